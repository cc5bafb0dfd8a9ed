//! `audit`'s arguments and settings, and the repair grace `serve` shares.

use super::*;

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub backend: BackendArgs,

    /// Repair what can be repaired alone (one pass of the repair loop) after the audit.
    /// Without it the audit changes nothing.
    #[arg(long)]
    pub repair: bool,

    #[command(flatten)]
    pub repair_grace: RepairGraceArgs,

    /// The carrier, as `serve` has it: --repair voids the shipping of the orders whose charge
    /// it refunds or whose stock it releases, as the saga's compensations do.
    #[command(flatten)]
    pub shipping: ShippingArgs,
}

/// The grace an order stored but not started gets before the repair loop starts it.
#[derive(Debug, Args)]
pub struct RepairGraceArgs {
    /// How long an order may stay ACCEPTED with no execution before the repair loop starts
    /// it: longer than a POST takes from storing the order to starting its execution, so
    /// none in flight is raced (which would be harmless, but is pointless work).
    #[arg(
        long,
        env = "FULFILLMENT_REPAIR_GRACE",
        default_value = "60s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub repair_grace: Duration,
}

/// Everything `audit` runs with.
#[derive(Debug, Clone)]
pub struct AuditSettings {
    pub backend: BackendSettings,
    pub log_format: LogFormat,
    /// `Some`: repair after the audit (`--repair`), with this grace for orders not started.
    pub repair: Option<Duration>,
    pub shipping: Option<ShippingSettings>,
}

impl From<AuditArgs> for AuditSettings {
    fn from(a: AuditArgs) -> Self {
        AuditSettings {
            log_format: a.backend.log_format,
            backend: a.backend.into(),
            repair: a.repair.then_some(a.repair_grace.repair_grace),
            shipping: a.shipping.into(),
        }
    }
}
