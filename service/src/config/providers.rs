//! Who charges and who ships: the payment provider and the carrier, and their settings.

use super::*;

/// Who charges and refunds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PaymentsKind {
    /// Simulated by magic payment methods (README), ledger in the store: no money moves.
    Sandbox,
    /// A Stripe-compatible provider over HTTPS (--stripe-url, --stripe-key).
    Stripe,
}

/// The payment provider, resolved.
#[derive(Debug, Clone)]
pub enum PaymentsSettings {
    Sandbox,
    Stripe(StripeConfig),
}

/// Who buys shipping labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShippingKind {
    /// Simulated by magic postal codes (docs/saga.md), records in the store: nothing ships.
    Sandbox,
    /// EasyPost's API (--easypost-key, --easypost-carrier, --easypost-from-address).
    Easypost,
}

/// The carrier, resolved.
#[derive(Debug, Clone)]
pub enum ShippingSettings {
    Sandbox,
    EasyPost(EasyPostConfig),
}

/// Who ships, and how EasyPost is reached: `serve`'s settings (the audit ships nothing).
#[derive(Debug, Args)]
pub struct ShippingArgs {
    /// Who buys shipping labels: `sandbox` by default, except beside a live payment key
    /// (`sk_live_…`), where it must be said (`--shipping sandbox` to simulate knowingly), so that
    /// real charges never go with simulated shipping by accident.
    #[arg(long, env = "FULFILLMENT_SHIPPING", value_enum)]
    pub shipping: Option<ShippingKind>,

    /// EasyPost's API base URL (`--shipping easypost`).
    #[arg(long, env = "FULFILLMENT_EASYPOST_URL", default_value = EASYPOST_API, value_parser = parse_url, value_name = "URL")]
    pub easypost_url: String,

    /// The EasyPost API key (`--shipping easypost`; test keys buy test labels). Checked once at
    /// start-up. Never logged.
    #[arg(
        long,
        env = "FULFILLMENT_EASYPOST_KEY",
        hide_env_values = true,
        value_parser = Secret(|raw: &str| Ok(SecretKey::new(raw))),
        value_name = "KEY"
    )]
    pub easypost_key: Option<SecretKey>,

    /// How long one EasyPost call may take before it counts as unavailable (retried).
    #[arg(long, env = "FULFILLMENT_EASYPOST_TIMEOUT", default_value = "20s", value_parser = parse_duration, value_name = "DURATION")]
    pub easypost_timeout: Duration,

    /// The carrier whose rate is bought, as EasyPost names it on rates.
    #[arg(
        long,
        env = "FULFILLMENT_EASYPOST_CARRIER",
        default_value = "USPS",
        value_name = "CARRIER"
    )]
    pub easypost_carrier: String,

    /// The carrier's service to buy (e.g. `GroundAdvantage`); without it the carrier's cheapest
    /// rate is bought.
    #[arg(long, env = "FULFILLMENT_EASYPOST_SERVICE", value_name = "SERVICE")]
    pub easypost_service: Option<String>,

    /// Where parcels leave from: an EasyPost address id (`adr_…`) or a JSON object of
    /// EasyPost's address fields (`street1`, `city`, `state`, `zip`, `country`, `name`, …).
    #[arg(long, env = "FULFILLMENT_EASYPOST_FROM_ADDRESS", value_parser = parse_from_address, value_name = "ADDRESS")]
    pub easypost_from_address: Option<serde_json::Value>,

    /// What one unit weighs, in ounces: a parcel weighs the order's units times this.
    #[arg(long, env = "FULFILLMENT_EASYPOST_UNIT_WEIGHT_OZ", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..), value_name = "OUNCES")]
    pub easypost_unit_weight_oz: u32,
}

impl From<ShippingArgs> for Option<ShippingSettings> {
    fn from(a: ShippingArgs) -> Self {
        a.shipping.map(|kind| match kind {
            ShippingKind::Sandbox => ShippingSettings::Sandbox,
            // What is missing is refused at start-up, with the other combinations.
            ShippingKind::Easypost => ShippingSettings::EasyPost(EasyPostConfig {
                base_url: a.easypost_url,
                api_key: a.easypost_key.unwrap_or_else(|| SecretKey::new("")),
                timeout: a.easypost_timeout,
                carrier: a.easypost_carrier,
                service: a.easypost_service,
                from_address: a.easypost_from_address.unwrap_or_default(),
                unit_weight_oz: a.easypost_unit_weight_oz,
            }),
        })
    }
}
