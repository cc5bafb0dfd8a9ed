//! What a torture run puts around the service: the plain run has the embedded default with the
//! sandbox gateways; each other variant swaps one side for the real thing's adapter against its
//! fake, behind a fault-injecting proxy ([`blackbox::faults`]), and adds the checks only that
//! side can answer (the provider's own books: money taken and given back, labels bought).
//!
//! - `stripe`: `--payments stripe` against the fake Stripe, through a proxy that answers 5xx,
//!   throttles and loses answers to requests it passed on; Stripe's search lags by seconds, and
//!   a few orders' charges land late (after the saga gave up on them), for the repair loop to
//!   refund.
//! - `easypost`: `--shipping easypost` against the fake EasyPost, through such a proxy.
//! - `aws`: `--backend aws` (the engine for Step Functions, moto for DynamoDB, the fake Stripe)
//!   with such a proxy in front of Step Functions and of DynamoDB, which also throttles as AWS
//!   does.

use super::driver::Record;
use super::service::Launcher;
use super::workload::Workload;
use blackbox::aws::AwsStack;
use blackbox::faults::{Dialect, FaultProxy, Faults};
use blackbox::{Db, audit_command, serve_command};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::fake_easypost::{self, FakeEasyPost};
use testkit::fake_stripe::{self, FakeStripe};

/// How late a late charge lands: longer than ChargePayment's retries can wait (7 attempts, full
/// jitter, at most 122 s of back-off), so that the saga has given up and refunded nothing.
const LATE_BY: Duration = Duration::from_secs(130);
/// How many orders' charges land late.
const LATE_CHARGES: usize = 4;
/// How far Stripe's search lags behind a charge.
const SEARCH_LAG: Duration = Duration::from_secs(5);
/// How long the repair loop may take to refund the late charges once they all landed.
const REPAIR_DEADLINE: Duration = Duration::from_secs(90);

/// The faults the providers' proxies inject.
const PROVIDER_FAULTS: Faults = Faults {
    unavailable: 0.04,
    throttled: 0.02,
    lost: 0.03,
    cut: 0.02,
};
/// The faults the proxies in front of Step Functions and DynamoDB inject.
const AWS_FAULTS: Faults = Faults {
    unavailable: 0.02,
    throttled: 0.03,
    lost: 0.015,
    cut: 0.01,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    Stripe,
    EasyPost,
    Aws,
}

impl Kind {
    /// The name in the run's lines (`torture[<name>]`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Plain => "",
            Kind::Stripe => "stripe",
            Kind::EasyPost => "easypost",
            Kind::Aws => "aws",
        }
    }

    /// `torture` or `torture[<name>]`.
    pub fn tag(self) -> String {
        match self {
            Kind::Plain => "torture".to_owned(),
            _ => format!("torture[{}]", self.name()),
        }
    }
}

/// The store, providers and proxies of one run.
pub struct Variant {
    pub kind: Kind,
    db: Arc<Db>,
    stripe: Option<FakeStripe>,
    easypost: Option<FakeEasyPost>,
    aws: Option<Arc<AwsStack>>,
    proxies: Vec<(&'static str, FaultProxy)>,
    /// The orders whose charge lands late.
    pub late: Vec<String>,
}

impl Variant {
    /// Starts what `kind` needs, and fits `workload` to it.
    pub async fn start(kind: Kind, seed: u64, workload: Workload) -> (Variant, Workload) {
        let mut variant = Variant {
            kind,
            db: Arc::new(Db::new()),
            stripe: None,
            easypost: None,
            aws: None,
            proxies: Vec::new(),
            late: Vec::new(),
        };
        let seed = seed.wrapping_add(7);
        let workload = match kind {
            Kind::Plain => workload,
            Kind::Stripe => {
                let mut workload = workload.without_sandbox_faults();
                let stripe = FakeStripe::start().await;
                stripe.search_lag(SEARCH_LAG);
                variant.late = workload.land_charges_late(LATE_CHARGES, seed);
                stripe.hold_charges(variant.late.iter().cloned(), LATE_BY);
                let proxy =
                    FaultProxy::start(&stripe.base_url, Dialect::Stripe, PROVIDER_FAULTS, seed)
                        .await;
                variant.proxies.push(("stripe", proxy));
                variant.stripe = Some(stripe);
                workload
            }
            Kind::EasyPost => {
                let easypost = FakeEasyPost::start().await;
                // The postal code the sandbox refuses, refused by the carrier here.
                easypost.undeliverable("00000");
                let proxy =
                    FaultProxy::start(&easypost.base_url, Dialect::EasyPost, PROVIDER_FAULTS, seed)
                        .await;
                variant.proxies.push(("easypost", proxy));
                variant.easypost = Some(easypost);
                workload.without_sandbox_faults()
            }
            Kind::Aws => {
                let mut stack = AwsStack::start().await;
                let sfn =
                    FaultProxy::start(&stack.engine.base, Dialect::Aws, AWS_FAULTS, seed).await;
                let dynamodb = FaultProxy::start(
                    stack.moto.endpoint(),
                    Dialect::Aws,
                    AWS_FAULTS,
                    seed.wrapping_add(1),
                )
                .await;
                stack.route_replicas_through(&sfn.base_url, &dynamodb.base_url);
                variant.proxies.push(("step functions", sfn));
                variant.proxies.push(("dynamodb", dynamodb));
                variant.stripe = Some(stack.stripe.clone());
                variant.aws = Some(Arc::new(stack));
                workload.without_sandbox_faults()
            }
        };
        (variant, workload)
    }

    /// How the service is started (again, after each kill).
    pub fn launcher(&self) -> Launcher {
        match (self.kind, &self.aws) {
            (Kind::Aws, Some(stack)) => {
                let stack = stack.clone();
                Box::new(move || stack.serve_command())
            }
            _ => {
                let db = self.db.clone();
                let extra = self.serve_args();
                Box::new(move || {
                    let mut cmd = serve_command(&db);
                    cmd.args(&extra);
                    cmd
                })
            }
        }
    }

    fn serve_args(&self) -> Vec<String> {
        let mut args: Vec<&str> = Vec::new();
        if let Some(proxy) = self.proxy("stripe") {
            args.extend(["--payments", "stripe", "--stripe-url", &proxy.base_url]);
            args.extend([
                "--stripe-key",
                fake_stripe::SECRET_KEY,
                "--stripe-timeout",
                "2s",
            ]);
            args.extend(["--shipping", "sandbox"]);
        }
        if let Some(proxy) = self.proxy("easypost") {
            args.extend(["--shipping", "easypost", "--easypost-url", &proxy.base_url]);
            args.extend(["--easypost-key", fake_easypost::API_KEY]);
            args.extend(["--easypost-from-address", "adr_warehouse"]);
            args.extend(["--easypost-timeout", "2s"]);
        }
        args.into_iter().map(str::to_owned).collect()
    }

    fn proxy(&self, name: &str) -> Option<&FaultProxy> {
        self.proxies
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p)
    }

    /// Faults on or off (off for the set-up and the final reads and checks).
    pub fn faults(&self, on: bool) {
        for (_, proxy) in &self.proxies {
            proxy.pause(!on);
        }
    }

    /// The service's own audit over what the run left, straight at the store and the provider
    /// (no proxy in between).
    pub fn audit(&self) -> Command {
        match (&self.aws, &self.stripe) {
            (Some(stack), _) => stack.audit_command(),
            (None, Some(stripe)) => {
                let mut cmd = audit_command(&self.db);
                cmd.args(["--payments", "stripe", "--stripe-url", &stripe.base_url])
                    .args(["--stripe-key", fake_stripe::SECRET_KEY]);
                cmd
            }
            (None, None) => audit_command(&self.db),
        }
    }

    /// Waits until every late charge landed and the provider's books agree with how the orders
    /// ended (the repair loop refunds late charges), or the deadline passed.
    pub async fn settle(&self, workload: &Workload, journal: &BTreeMap<String, Record>) {
        let Some(stripe) = self.stripe.as_ref().filter(|_| !self.late.is_empty()) else {
            return;
        };
        let started = Instant::now();
        let landing = Instant::now() + LATE_BY + Duration::from_secs(30);
        while stripe.charges_in_flight() > 0 && Instant::now() < landing {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let until = Instant::now() + REPAIR_DEADLINE;
        while !self.books(workload, journal).is_empty() && Instant::now() < until {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        println!(
            "{}: late charges landed and the provider's books settled after {:.0?} more",
            self.kind.tag(),
            started.elapsed()
        );
    }

    /// What the providers' own books say against how each order ended: at most one charge, a
    /// completed order keeps it, a cancelled one has it refunded once; at most one label, a
    /// completed order's is the one it shows, a cancelled one keeps none. Also that the late
    /// charges were made (else the run proved nothing about them).
    pub fn books(&self, workload: &Workload, journal: &BTreeMap<String, Record>) -> Vec<String> {
        let mut wrong = Vec::new();
        for plan in &workload.plans {
            let Some(view) = journal.get(&plan.id).and_then(|r| r.last.as_ref()) else {
                continue;
            };
            let status = view["status"].as_str().unwrap_or("?");
            if let Some(stripe) = &self.stripe {
                money(stripe, &plan.id, status, &mut wrong);
            }
            if let Some(easypost) = &self.easypost {
                labels(easypost, &plan.id, status, view, &mut wrong);
            }
        }
        if let Some(stripe) = &self.stripe
            && !self.late.is_empty()
            && self.late.iter().all(|id| stripe.charges_of(id) == 0)
        {
            wrong.push(format!(
                "none of the orders whose charge was to land late ({:?}) was charged",
                self.late
            ));
        }
        wrong
    }

    /// One line per proxy: what it injected.
    pub fn injected(&self) -> Vec<String> {
        self.proxies
            .iter()
            .map(|(name, proxy)| {
                format!(
                    "{}: faults in front of {name}: {}",
                    self.kind.tag(),
                    proxy.injected()
                )
            })
            .collect()
    }
}

fn money(stripe: &FakeStripe, id: &str, status: &str, wrong: &mut Vec<String>) {
    let (charges, refunds, refunded) = (
        stripe.charges_of(id),
        stripe.refunds_of(id),
        stripe.refunded_intents_of(id),
    );
    let kept = charges - refunded.min(charges);
    let fine = charges <= 1
        && refunds == refunded
        && match status {
            "COMPLETED" => charges == 1 && kept == 1,
            "CANCELLED" => kept == 0,
            _ => false,
        };
    if !fine {
        wrong.push(format!(
            "{id}: ended {status}; the provider holds {charges} charges, {refunds} refunds of \
             {refunded} of them"
        ));
    }
}

fn labels(easypost: &FakeEasyPost, id: &str, status: &str, view: &Value, wrong: &mut Vec<String>) {
    let (bought, refunded) = (easypost.labels_bought(id), easypost.labels_refunded(id));
    let tracking = view["shipment"]["trackingNumber"].as_str();
    let fine = bought <= 1
        && match status {
            "COMPLETED" => {
                bought == 1
                    && refunded == 0
                    && tracking.is_some_and(|t| easypost.tracking_codes(id).iter().any(|c| c == t))
            }
            "CANCELLED" => bought == refunded,
            _ => false,
        };
    if !fine {
        wrong.push(format!(
            "{id}: ended {status} showing tracking {tracking:?}; the carrier sold {bought} labels \
             ({refunded} refunded), tracking {:?}",
            easypost.tracking_codes(id)
        ));
    }
}
