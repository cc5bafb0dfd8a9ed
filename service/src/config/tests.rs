use super::*;
use clap::CommandFactory;

fn serve(args: &[&str]) -> Result<Settings, clap::Error> {
    let argv = ["fulfillment", "serve"].iter().chain(args);
    let Command::Serve(a) = Cli::try_parse_from(argv)?.command else {
        panic!("not serve");
    };
    Ok((*a).into())
}

fn engine(args: &[&str]) -> Result<EngineSettings, clap::Error> {
    let argv = ["fulfillment", "engine"].iter().chain(args);
    let Command::Engine(a) = Cli::try_parse_from(argv)?.command else {
        panic!("not engine");
    };
    Ok(a.into())
}

#[test]
fn engine_defaults_are_the_documented_ones() {
    let s = engine(&[]).unwrap();
    assert_eq!(s.listen, "127.0.0.1:8083".parse().unwrap());
    assert_eq!(s.db_path, PathBuf::from("./engine.db"));
    assert_eq!(s.region, "us-east-1");
    assert_eq!(s.account_id, "123456789012");
    assert_eq!(s.endpoint.poll_wait, Duration::from_secs(60));
    assert_eq!(s.log_format, LogFormat::Text);
}

#[test]
fn engine_refuses_malformed_arn_parts() {
    for (args, flag) in [
        (&["--account-id", "12345"][..], "--account-id"),
        (&["--region", "US East"][..], "--region"),
    ] {
        let e = engine(args).unwrap_err().to_string();
        assert!(e.contains(flag), "{args:?}: {e}");
    }
}

#[test]
fn engine_flags_set_every_setting() {
    let s = engine(&[
        "--listen",
        "0.0.0.0:0",
        "--db",
        "/tmp/e.db",
        "--region",
        "eu-west-1",
        "--account-id",
        "000000000000",
        "--log-format",
        "json",
    ])
    .unwrap();
    assert_eq!(s.listen, "0.0.0.0:0".parse().unwrap());
    assert_eq!(s.db_path, PathBuf::from("/tmp/e.db"));
    assert_eq!(s.region, "eu-west-1");
    assert_eq!(s.account_id, "000000000000");
    assert_eq!(s.log_format, LogFormat::Json);
}

#[test]
fn the_command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn defaults_are_the_documented_ones() {
    let s = serve(&[]).unwrap();
    assert_eq!(s.listen, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(s.backend.kind, Backend::Embedded);
    assert_eq!(s.backend.store_path, PathBuf::from("./fulfillment.db"));
    assert_eq!(
        s.backend.engine_path,
        PathBuf::from("./fulfillment.engine.db")
    );
    assert!(s.operator_token.is_none());
    assert_eq!(s.saga.approval_threshold_cents, 100_000);
    assert_eq!(s.saga.approval_timeout, Duration::from_secs(3 * 24 * 3600));
    assert_eq!(s.saga.approval_heartbeat, Duration::from_secs(300));
    assert_eq!(s.keeper_rate.get(), 100);
    assert_eq!(s.limits.max_body_bytes, 64 * 1024);
    assert_eq!(s.limits.request_timeout, Duration::from_secs(30));
    assert_eq!(s.limits.read_timeout, Duration::from_secs(10));
    assert_eq!(s.log_format, LogFormat::Text);
    assert_eq!(s.repair, RepairLoopSettings::default());
    assert_eq!(s.repair.interval, Some(Duration::from_secs(60)));
    assert_eq!(s.retention, Some(Duration::from_secs(90 * 24 * 3600)));
}

#[test]
fn retention_is_a_duration_of_a_second_or_more_or_off() {
    let s = serve(&["--retention", "36h"]).unwrap();
    assert_eq!(s.retention, Some(Duration::from_secs(36 * 3600)));
    assert_eq!(serve(&["--retention", "off"]).unwrap().retention, None);
    for bad in ["0", "500ms", "forever", ""] {
        assert!(serve(&["--retention", bad]).is_err(), "{bad:?}");
    }
}

#[test]
fn the_repair_loop_is_set_by_its_flags_and_off_is_no_loop() {
    let s = serve(&["--repair-interval", "5m", "--repair-grace", "10s"]).unwrap();
    assert_eq!(
        s.repair,
        RepairLoopSettings {
            interval: Some(Duration::from_secs(300)),
            grace: Duration::from_secs(10),
            ..RepairLoopSettings::default()
        }
    );
    // The window follows the approval window unless given; whole passes daily unless told.
    let s = serve(&["--approval-timeout", "1d"]).unwrap();
    assert_eq!(s.repair.window, Duration::from_secs(2 * 24 * 3600));
    let s = serve(&["--repair-window", "10m", "--repair-whole-every", "6h"]).unwrap();
    assert_eq!(s.repair.window, Duration::from_secs(600));
    assert_eq!(s.repair.whole_every, Duration::from_secs(6 * 3600));
    for bad in ["30s", "0", "soon"] {
        assert!(serve(&["--repair-window", bad]).is_err(), "{bad:?}");
    }
    for off in ["0", "off"] {
        assert_eq!(
            serve(&["--repair-interval", off]).unwrap().repair.interval,
            None
        );
    }
    assert!(serve(&["--repair-interval", "soon"]).is_err());
    let plain = audit(&[]).unwrap();
    assert_eq!(plain.repair, None, "a plain audit repairs nothing");
    let repair = audit(&["--repair", "--repair-grace", "2m"]).unwrap();
    assert_eq!(repair.repair, Some(Duration::from_secs(120)));
}

#[test]
fn flags_set_every_setting() {
    let s = serve(&[
        "--listen",
        "0.0.0.0:0",
        "--db",
        "/var/lib/f/state.sqlite",
        "--backend",
        "aws",
        "--operator-token",
        "0123456789abcdef-token",
        "--approval-threshold-cents",
        "5000",
        "--approval-timeout",
        "30s",
        "--approval-heartbeat",
        "10s",
        "--max-body-bytes",
        "1024",
        "--request-timeout",
        "2s",
        "--read-timeout",
        "3s",
        "--log-format",
        "json",
    ])
    .unwrap();
    assert_eq!(s.listen, "0.0.0.0:0".parse().unwrap());
    assert_eq!(s.backend.kind, Backend::Aws);
    assert_eq!(
        s.backend.engine_path,
        PathBuf::from("/var/lib/f/state.sqlite.engine")
    );
    assert_eq!(s.operator_token.unwrap().expose(), "0123456789abcdef-token");
    assert_eq!(s.saga.approval_threshold_cents, 5000);
    assert_eq!(s.saga.approval_timeout, Duration::from_secs(30));
    assert_eq!(s.saga.approval_heartbeat, Duration::from_secs(10));
    assert_eq!(s.limits.max_body_bytes, 1024);
    assert_eq!(s.limits.request_timeout, Duration::from_secs(2));
    assert_eq!(s.limits.read_timeout, Duration::from_secs(3));
    assert_eq!(s.log_format, LogFormat::Json);
}

#[test]
fn bad_values_are_refused_with_the_flag_named() {
    for (args, flag) in [
        (&["--approval-timeout", "soon"][..], "--approval-timeout"),
        (
            &["--approval-heartbeat", "10ms"][..],
            "--approval-heartbeat",
        ),
        (&["--operator-token", "short"][..], "--operator-token"),
        (&["--backend", "gcp"][..], "--backend"),
        (&["--listen", "localhost"][..], "--listen"),
        (
            &["--state-machine-arn", "fulfillment"][..],
            "--state-machine-arn",
        ),
        (&["--table", "a b"][..], "--table"),
        (&["--endpoint-url", "localhost:4566"][..], "--endpoint-url"),
        (&["--payments", "paypal"][..], "--payments"),
        (&["--stripe-url", "ftp://x"][..], "--stripe-url"),
        (&["--read-timeout", "0s"][..], "--read-timeout"),
    ] {
        let e = serve(args).unwrap_err().to_string();
        assert!(e.contains(flag), "{args:?}: {e}");
    }
}

#[test]
fn the_engine_file_sits_beside_the_store() {
    for (store, engine) in [
        ("fulfillment.db", "fulfillment.engine.db"),
        ("/data/orders.db", "/data/orders.engine.db"),
        ("state", "state.engine"),
        ("dir/x.sqlite", "dir/x.sqlite.engine"),
        (".db", ".db.engine"),
    ] {
        assert_eq!(engine_path(Path::new(store)), PathBuf::from(engine));
    }
}

#[test]
fn aws_flags_set_the_aws_settings() {
    let arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:fulfillment-order-saga";
    let s = serve(&[
        "--backend",
        "aws",
        "--aws-region",
        "eu-west-1",
        "--aws-profile",
        "prod",
        "--endpoint-url",
        "http://127.0.0.1:4566/",
        "--table",
        "orders-prod",
        "--state-machine-arn",
        arn,
        "--payments",
        "stripe",
        "--stripe-url",
        "http://127.0.0.1:12111",
        "--stripe-key",
        "sk_test_abc",
        "--stripe-timeout",
        "5s",
    ])
    .unwrap();
    assert_eq!(
        s.backend.aws,
        AwsSettings {
            region: Some("eu-west-1".to_owned()),
            profile: Some("prod".to_owned()),
            endpoint_url: Some("http://127.0.0.1:4566".to_owned()),
            table: "orders-prod".to_owned(),
        }
    );
    assert_eq!(s.backend.state_machine_arn.as_deref(), Some(arn));
    let Some(PaymentsSettings::Stripe(stripe)) = s.backend.payments else {
        panic!("stripe chosen");
    };
    assert_eq!(stripe.base_url, "http://127.0.0.1:12111");
    assert_eq!(stripe.secret_key.expose(), "sk_test_abc");
    assert_eq!(stripe.timeout, Duration::from_secs(5));
}

#[test]
fn payments_are_unchosen_by_default_and_the_table_is_fulfillment() {
    let s = serve(&[]).unwrap();
    assert!(s.backend.payments.is_none());
    assert!(s.backend.state_machine_arn.is_none());
    assert_eq!(s.backend.aws.table, "fulfillment");
    assert_eq!(s.backend.aws.endpoint_url, None);
}

#[test]
fn provision_takes_the_aws_settings_and_a_role() {
    let argv = [
        "fulfillment",
        "provision",
        "--endpoint-url",
        "http://127.0.0.1:9000",
        "--state-machine-role-arn",
        "arn:aws:iam::123456789012:role/fulfillment-sfn",
    ];
    let Command::Provision(a) = Cli::try_parse_from(argv).unwrap().command else {
        panic!("not provision");
    };
    let p = ProvisionSettings::from(a);
    assert_eq!(p.aws.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));
    assert_eq!(p.aws.table, "fulfillment");
    assert_eq!(p.role_arn, "arn:aws:iam::123456789012:role/fulfillment-sfn");
    let missing = Cli::try_parse_from(["fulfillment", "provision"]).unwrap_err();
    assert!(missing.to_string().contains("--state-machine-role-arn"));
}

fn audit(args: &[&str]) -> Result<AuditSettings, clap::Error> {
    let argv = ["fulfillment", "audit"].iter().chain(args);
    let Command::Audit(a) = Cli::try_parse_from(argv)?.command else {
        panic!("not audit");
    };
    Ok(a.into())
}

#[test]
fn audit_takes_the_backend_settings_of_serve() {
    let arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:fulfillment-order-saga";
    let args = [
        "--db",
        "/data/f.db",
        "--backend",
        "aws",
        "--table",
        "orders-prod",
        "--state-machine-arn",
        arn,
        "--payments",
        "stripe",
        "--stripe-key",
        "sk_test_abc",
        "--log-format",
        "json",
    ];
    let a = audit(&args).unwrap();
    let s = serve(&args).unwrap();
    assert_eq!(format!("{:?}", a.backend), format!("{:?}", s.backend));
    assert_eq!(a.backend.kind, Backend::Aws);
    assert_eq!(a.backend.engine_path, PathBuf::from("/data/f.engine.db"));
    assert_eq!(a.log_format, LogFormat::Json);
    let defaults = audit(&[]).unwrap();
    assert_eq!(defaults.backend.kind, Backend::Embedded);
    assert_eq!(
        defaults.backend.store_path,
        PathBuf::from("./fulfillment.db")
    );
    // Only serve's own settings are serve's.
    let e = audit(&["--listen", "127.0.0.1:0"]).unwrap_err().to_string();
    assert!(e.contains("--listen"), "{e}");
}

#[test]
fn shipping_is_unchosen_by_default_and_its_flags_set_the_easypost_settings() {
    assert!(serve(&[]).unwrap().shipping.is_none());
    assert!(matches!(
        serve(&["--shipping", "sandbox"]).unwrap().shipping,
        Some(ShippingSettings::Sandbox)
    ));
    let s = serve(&[
        "--shipping",
        "easypost",
        "--easypost-url",
        "http://127.0.0.1:12112/",
        "--easypost-key",
        "EZTK_abc",
        "--easypost-timeout",
        "5s",
        "--easypost-carrier",
        "UPS",
        "--easypost-service",
        "Ground",
        "--easypost-from-address",
        "adr_123",
        "--easypost-unit-weight-oz",
        "8",
    ])
    .unwrap();
    let Some(ShippingSettings::EasyPost(c)) = s.shipping else {
        panic!("easypost chosen");
    };
    assert_eq!(c.base_url, "http://127.0.0.1:12112");
    assert_eq!(c.api_key.expose(), "EZTK_abc");
    assert_eq!(c.timeout, Duration::from_secs(5));
    assert_eq!(
        (c.carrier.as_str(), c.service.as_deref()),
        ("UPS", Some("Ground"))
    );
    assert_eq!(c.from_address, serde_json::json!({"id": "adr_123"}));
    assert_eq!(c.unit_weight_oz, 8);
    let Some(ShippingSettings::EasyPost(d)) = serve(&["--shipping", "easypost"]).unwrap().shipping
    else {
        panic!("easypost chosen");
    };
    assert_eq!(d.base_url, "https://api.easypost.com");
    assert_eq!((d.carrier.as_str(), d.service), ("USPS", None));
    assert_eq!((d.timeout, d.unit_weight_oz), (Duration::from_secs(20), 16));
    for (args, flag) in [
        (&["--shipping", "ups"][..], "--shipping"),
        (
            &["--easypost-from-address", "the warehouse"][..],
            "--easypost-from-address",
        ),
        (
            &["--easypost-unit-weight-oz", "0"][..],
            "--easypost-unit-weight-oz",
        ),
        (
            &["--easypost-url", "api.easypost.com"][..],
            "--easypost-url",
        ),
    ] {
        let e = serve(args).unwrap_err().to_string();
        assert!(e.contains(flag), "{args:?}: {e}");
    }
    let s = serve(&[
        "--shipping",
        "easypost",
        "--easypost-key",
        "EZAK_live_secret",
    ])
    .unwrap();
    assert!(!format!("{s:?}").contains("EZAK_live_secret"));
}

#[test]
fn the_stripe_key_never_prints() {
    let s = serve(&["--payments", "stripe", "--stripe-key", "sk_live_secret"]).unwrap();
    assert!(!format!("{s:?}").contains("sk_live_secret"));
}

#[test]
fn a_refused_secret_is_not_quoted_in_the_error() {
    let e = serve(&["--operator-token", "my secret pass phrase"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("--operator-token"), "{e}");
    assert!(e.contains("without spaces"), "{e}");
    assert!(!e.contains("secret pass"), "{e}");
    let e = serve(&["--operator-token", "short-secret"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least 16"), "{e}");
    assert!(!e.contains("short-secret"), "{e}");
}

#[test]
fn the_service_listens_on_loopback_unless_told_otherwise() {
    assert!(serve(&[]).unwrap().listen.ip().is_loopback());
    assert!(engine(&[]).unwrap().listen.ip().is_loopback());
}

#[test]
fn the_token_never_prints() {
    let s = serve(&["--operator-token", "0123456789abcdef-secret"]).unwrap();
    assert!(!format!("{s:?}").contains("secret"));
}

#[test]
fn a_canary_is_a_share_of_one_to_ninety_nine_percent_and_off_by_default() {
    assert_eq!(serve(&[]).unwrap().backend.canary_percent, None);
    let s = serve(&["--canary-percent", "10"]).unwrap();
    assert_eq!(s.backend.canary_percent, Some(10));
    for refused in ["0", "100", "-5", "ten"] {
        assert!(
            serve(&["--canary-percent", refused]).is_err(),
            "{refused} accepted"
        );
    }
}

#[test]
fn versions_takes_its_action_and_the_backend() {
    let parse = |args: &[&str]| {
        let argv = ["fulfillment", "versions"].iter().chain(args);
        let Command::Versions(c) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not versions");
        };
        VersionsSettings::from(c)
    };
    assert_eq!(parse(&["list"]).action, VersionsAction::List { limit: 20 });
    assert_eq!(
        parse(&["rollback", "3", "--backend", "aws"]).action,
        VersionsAction::Rollback { to: Some(3) }
    );
    assert_eq!(
        parse(&["rollback", "--backend", "aws"]).backend.kind,
        Backend::Aws
    );
    assert_eq!(parse(&["promote"]).action, VersionsAction::Promote);
}
