//! Everything `serve` runs with: its arguments, grouped by the part each configures, and the resolved settings.

use super::*;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address the HTTP API listens on (port 0 picks a free port; the address bound is
    /// printed as `listening on http://ADDR`).
    #[arg(long, env = "FULFILLMENT_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    #[command(flatten)]
    pub backend: BackendArgs,

    #[command(flatten)]
    pub shipping: ShippingArgs,

    /// One more operator API key, for the principal `operator`: at least 16 printable
    /// characters, no spaces; never logged. Required with --backend aws (replicas create no keys:
    /// this is how the first operator gets in). On the embedded backend a first start creates an
    /// operator key and a client key itself; `fulfillment keys` makes the rest.
    #[arg(
        long,
        env = "FULFILLMENT_OPERATOR_TOKEN",
        hide_env_values = true,
        value_parser = Secret(parse_token),
        value_name = "TOKEN"
    )]
    pub operator_token: Option<OperatorToken>,

    /// Orders whose total (in cents) is at or above this wait for an operator's approval.
    #[arg(
        long,
        env = "FULFILLMENT_APPROVAL_THRESHOLD_CENTS",
        default_value_t = 100_000,
        value_name = "CENTS"
    )]
    pub approval_threshold_cents: u64,

    /// How long an operator has to decide before the order is cancelled (e.g. `3d`, `12h`,
    /// `30s`).
    #[arg(
        long,
        env = "FULFILLMENT_APPROVAL_TIMEOUT",
        default_value = "3d",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub approval_timeout: Duration,

    /// How long a waiting approval may go without a heartbeat before its task is re-issued:
    /// the recovery time after a crash (parked approvals are heartbeated every fifth of it).
    #[arg(
        long,
        env = "FULFILLMENT_APPROVAL_HEARTBEAT",
        default_value = "5m",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub approval_heartbeat: Duration,

    /// With `--backend aws`: how many heartbeats per second the approval keepers of all
    /// replicas send together (each its shards' share), well below Step Functions'
    /// `SendTaskHeartbeat` refill (300–500 a second per account). With the heartbeat, it bounds
    /// how many approvals can wait at once: each is heartbeaten several times a heartbeat.
    #[arg(
        long,
        env = "FULFILLMENT_APPROVAL_KEEPER_RATE",
        default_value_t = NonZeroU32::new(100).expect("non-zero"),
        value_name = "PER_SECOND"
    )]
    pub approval_keeper_rate: NonZeroU32,

    /// How long the embedded engine keeps a finished order's execution (its history, tasks
    /// and timers) after it closed, e.g. `90d`, `12h`; `off` keeps everything. The order's own
    /// record (status, prices, charge, shipment, approval) is kept for good; its history
    /// answers `410 Gone` once pruned. With `--backend aws`, Step Functions applies its own
    /// retention (90 days after an execution closes) and this setting has no effect.
    #[arg(
        long,
        env = "FULFILLMENT_RETENTION",
        default_value = "90d",
        value_parser = parse_retention,
        value_name = "DURATION"
    )]
    pub retention: Retention,

    /// The delays between a webhook's attempts (after the first, which is at once), e.g.
    /// `5s,5m,30m,2h`: a delivery fails for good after the last. The default spreads ten
    /// attempts over about three days.
    #[arg(
        long,
        env = "FULFILLMENT_WEBHOOK_RETRIES",
        default_value = "5s,5m,30m,2h,5h,10h,10h,24h,24h",
        value_parser = parse_schedule,
        value_name = "DURATIONS"
    )]
    pub webhook_retries: Schedule,

    /// Let webhook endpoints be on loopback, private and link-local addresses, over `http` too
    /// (a receiver on the same network, a test). Off: such URLs are refused when registered,
    /// and a name resolving to such an address is not called.
    #[arg(long, env = "FULFILLMENT_WEBHOOK_ALLOW_PRIVATE")]
    pub webhook_allow_private: bool,

    /// An endpoint whose every attempt failed for this long is disabled (its client sees why
    /// on `GET /webhooks/endpoints/{id}`).
    #[arg(
        long,
        env = "FULFILLMENT_WEBHOOK_DISABLE_AFTER",
        default_value = "5d",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub webhook_disable_after: Duration,

    /// Mark the operator console's session cookie `Secure`, so browsers send it over HTTPS
    /// only: set it when operators reach the console through TLS (a proxy in front).
    #[arg(long, env = "FULFILLMENT_CONSOLE_SECURE_COOKIE")]
    pub console_secure_cookie: bool,

    /// The largest request body accepted (larger ones are answered 413).
    #[arg(
        long,
        env = "FULFILLMENT_MAX_BODY_BYTES",
        default_value_t = 64 * 1024,
        value_name = "BYTES"
    )]
    pub max_body_bytes: usize,

    /// How long a request may take before it is answered 503.
    #[arg(
        long,
        env = "FULFILLMENT_REQUEST_TIMEOUT",
        default_value = "30s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub request_timeout: Duration,

    /// How long a client may take to send a request's headers (the connection is then closed)
    /// and, after them, its body (answered 408). A connection idle this long between requests
    /// is closed too: behind a load balancer, set it above the balancer's idle timeout.
    #[arg(
        long,
        env = "FULFILLMENT_READ_TIMEOUT",
        default_value = "10s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub read_timeout: Duration,

    /// Requests per second each API key may send (a token bucket per key, in each replica);
    /// past it the answer is 429 with `Retry-After`. 0 turns the limit off.
    #[arg(
        long,
        env = "FULFILLMENT_RATE_LIMIT",
        default_value_t = 100,
        value_name = "PER_SECOND"
    )]
    pub rate_limit: u32,

    /// How many requests a key may send at once above its rate (the bucket's size).
    #[arg(
        long,
        env = "FULFILLMENT_RATE_LIMIT_BURST",
        default_value_t = 200,
        value_parser = clap::value_parser!(u32).range(1..),
        value_name = "REQUESTS"
    )]
    pub rate_limit_burst: u32,

    /// Failed authentications (unknown or revoked keys) per minute from one address; past it
    /// the address gets 429 for any key this replica has not checked lately.
    #[arg(
        long,
        env = "FULFILLMENT_FAILED_AUTH_LIMIT",
        default_value_t = 20,
        value_parser = clap::value_parser!(u32).range(1..),
        value_name = "PER_MINUTE"
    )]
    pub failed_auth_limit: u32,

    /// The header a proxy in front sets to the caller's address (e.g. `X-Forwarded-For`; its
    /// last value counts). Without it the connection's peer is the caller's address: behind a
    /// load balancer, that is the balancer's, and every caller shares one failure budget.
    #[arg(long, env = "FULFILLMENT_CLIENT_ADDRESS_HEADER", value_name = "HEADER")]
    pub client_address_header: Option<axum::http::HeaderName>,

    /// How often the repair loop runs (README, "The repair loop"): it starts orders left
    /// ACCEPTED, refunds late charges of CANCELLED orders, releases stock held by finished
    /// ones and reports what it may not fix; the first pass comes a few seconds after the
    /// start. One replica at a time on AWS (a lease in the table). `0` or `off` turns it off,
    /// and with it, on AWS, the start of orders a crash left ACCEPTED (a retry of their POST
    /// still starts them; the embedded backend queues them again at every start).
    #[arg(
        long,
        env = "FULFILLMENT_REPAIR_INTERVAL",
        default_value = "60s",
        value_parser = parse_repair_interval,
        value_name = "DURATION"
    )]
    pub repair_interval: RepairInterval,

    #[command(flatten)]
    pub repair_grace: RepairGraceArgs,

    /// How far back the repair loop's frequent passes look: they read the orders created
    /// within it and what was made for them, so their cost follows the orders of the window,
    /// not the years of history. Longer than an order lives (default: --approval-timeout plus
    /// a day); orders older than it are checked by the passes over the whole books.
    #[arg(long, env = "FULFILLMENT_REPAIR_WINDOW", value_parser = parse_repair_window, value_name = "DURATION")]
    pub repair_window: Option<Duration>,

    /// How often the repair loop reads the whole books instead of the window (every order,
    /// reservation, charge and refund; and every SKU's counts against all its reservations):
    /// the first pass after the start, then this often.
    #[arg(
        long,
        env = "FULFILLMENT_REPAIR_WHOLE_EVERY",
        default_value = "24h",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub repair_whole_every: Duration,
}

/// Everything `serve` runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub backend: BackendSettings,
    /// `None`: not chosen (the sandbox, unless the payment key is live: see `--shipping`).
    pub shipping: Option<ShippingSettings>,
    /// `None`: generate one at start-up.
    pub operator_token: Option<OperatorToken>,
    pub saga: SagaSettings,
    /// Heartbeats per second of all replicas' approval keepers together (AWS backend).
    pub keeper_rate: NonZeroU32,
    pub limits: HttpLimits,
    pub rate_limits: RateLimitSettings,
    pub log_format: LogFormat,
    pub repair: RepairLoopSettings,
    /// How long the embedded engine keeps a closed execution; `None`: for ever.
    pub retention: Option<Duration>,
    pub webhooks: WebhookSettings,
    pub console: console::ConsoleSettings,
}

/// The repair loop of `serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairLoopSettings {
    /// `None`: no loop.
    pub interval: Option<Duration>,
    pub grace: Duration,
    /// How far back the frequent passes read.
    pub window: Duration,
    /// How often a pass reads the whole books.
    pub whole_every: Duration,
}

impl Default for RepairLoopSettings {
    fn default() -> Self {
        RepairLoopSettings {
            interval: Some(Duration::from_secs(60)),
            grace: Duration::from_secs(60),
            window: Duration::from_secs(4 * 24 * 3600),
            whole_every: Duration::from_secs(24 * 3600),
        }
    }
}

impl Settings {
    /// What `fulfillment serve --db DB` runs with: the embedded backend, its store at `db` and
    /// its engine's state beside it, every other setting at its default (or its `FULFILLMENT_*`
    /// variable's value, as for the binary). The test harnesses and the examples start here and
    /// change what they tune.
    pub fn embedded(db: &Path) -> Result<Settings, clap::Error> {
        let argv = [
            OsStr::new("fulfillment"),
            OsStr::new("serve"),
            OsStr::new("--db"),
            db.as_os_str(),
        ];
        match Cli::try_parse_from(argv)?.command {
            Command::Serve(a) => Ok(Settings::from(*a)),
            _ => unreachable!("parsed as serve"),
        }
    }
}

impl From<ServeArgs> for Settings {
    fn from(a: ServeArgs) -> Self {
        Settings {
            listen: a.listen,
            log_format: a.backend.log_format,
            backend: a.backend.into(),
            shipping: a.shipping.into(),
            operator_token: a.operator_token,
            saga: SagaSettings {
                approval_threshold_cents: a.approval_threshold_cents,
                approval_timeout: a.approval_timeout,
                approval_heartbeat: a.approval_heartbeat,
            },
            keeper_rate: a.approval_keeper_rate,
            limits: HttpLimits {
                max_body_bytes: a.max_body_bytes,
                request_timeout: a.request_timeout,
                read_timeout: a.read_timeout,
            },
            rate_limits: RateLimitSettings {
                per_key: NonZeroU32::new(a.rate_limit).map(|rate| {
                    let burst = NonZeroU32::new(a.rate_limit_burst).unwrap_or(rate);
                    (rate, burst)
                }),
                failed_auth_per_minute: NonZeroU32::new(a.failed_auth_limit)
                    .unwrap_or(NonZeroU32::MIN),
                address_header: a.client_address_header,
            },
            repair: RepairLoopSettings {
                interval: a.repair_interval.0,
                grace: a.repair_grace.repair_grace,
                window: a
                    .repair_window
                    .unwrap_or(a.approval_timeout + Duration::from_secs(24 * 3600)),
                whole_every: a.repair_whole_every,
            },
            retention: a.retention.0,
            webhooks: WebhookSettings {
                retries: a.webhook_retries.0,
                allow_private: a.webhook_allow_private,
                disable_after: a.webhook_disable_after,
                ..WebhookSettings::default()
            },
            console: console::ConsoleSettings {
                secure_cookie: a.console_secure_cookie,
            },
        }
    }
}

/// A schedule of delays, `5s,5m,…` (empty: no retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule(pub Vec<Duration>);

fn parse_schedule(raw: &str) -> Result<Schedule, String> {
    raw.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(parse_duration)
        .collect::<Result<Vec<_>, _>>()
        .map(Schedule)
}
