//! The schema of the store's SQLite file and its migrations: a list of steps applied in order,
//! each once, in its own transaction, with the file's `PRAGMA user_version` counting the steps
//! applied so far.

use rusqlite::Connection;
use store::error::StoreError;

/// Each entry moves the schema one version forward. Never edit a step that has shipped: add one.
/// The steps use plain `CREATE TABLE` (no `IF NOT EXISTS`) on purpose, so a step applied twice
/// fails loudly instead of passing unnoticed.
///
/// Step 1 is the baseline of release 0.1.0: the whole schema as that release writes it. Every
/// later change of the schema is a step after it, with the migration of the rows it changes
/// (the 0.1.0 fixture in `store/tests/fixtures/` is opened by every later build).
pub(crate) const MIGRATIONS: &[&str] = &[BASELINE];

/// Version 1, the schema of 0.1.0.
const BASELINE: &str = r#"
-- Orders. Items, address, cancellation and actions are JSON (read and written whole);
-- everything a query filters or a conditional update tests is a column of its own.
CREATE TABLE orders (
    order_id              TEXT PRIMARY KEY,
    customer_id           TEXT NOT NULL,
    -- The principal whose key placed the order.
    owner                 TEXT,
    items                 TEXT NOT NULL,
    currency              TEXT NOT NULL,
    payment_method        TEXT NOT NULL,
    shipping_address      TEXT NOT NULL,
    amount_cents          INTEGER NOT NULL CHECK (amount_cents >= 0),
    requires_approval     INTEGER NOT NULL,
    body_hash             TEXT NOT NULL,
    created_at            TEXT NOT NULL,
    status                TEXT NOT NULL,
    execution_arn         TEXT,
    failure_error         TEXT,
    failure_cause         TEXT,
    -- The approval: requested with its token parked, a deadline fixed at the first park, and
    -- the decision.
    approval_requested_at TEXT,
    approval_deadline     TEXT,
    approval_task_token   TEXT,
    approval_decision     TEXT,
    approval_decided_by   TEXT,
    approval_decided_at   TEXT,
    approval_reason       TEXT,
    -- The provider's id of the order's charge and when it was made, set together by the charge
    -- step: the refund goes by the id, and the status view shows the charge without asking the
    -- provider.
    charge_id             TEXT,
    charged_at            TEXT,
    -- The refund, recorded by the compensation that made it.
    refund_id             TEXT,
    refund_amount_cents   INTEGER CHECK (refund_amount_cents >= 0),
    refunded_at           TEXT,
    -- The incident of an order whose compensation gave up (open while `incident_since` is set),
    -- and the operators' actions on the order (a JSON array).
    incident_step         TEXT,
    incident_error        TEXT,
    incident_cause        TEXT,
    incident_attempts     INTEGER CHECK (incident_attempts >= 0),
    incident_since        TEXT,
    actions               TEXT NOT NULL DEFAULT '[]',
    -- A request to cancel the order (JSON, written once) and when its shipment step began (the
    -- point of no return): of the two, the first written excludes the other.
    cancellation          TEXT,
    shipping_started_at   TEXT,
    updated_at            TEXT NOT NULL
) STRICT;
-- The operators' queue: awaiting orders, oldest request first.
CREATE INDEX orders_by_status_requested ON orders (status, approval_requested_at);
-- Open incidents only, oldest first.
CREATE INDEX orders_open_incidents ON orders (incident_since, order_id)
    WHERE incident_since IS NOT NULL;
-- The approvals' queue (a parked token and no decision), paged in request order.
CREATE INDEX orders_pending_approvals ON orders (approval_requested_at, order_id)
    WHERE status = 'AWAITING_APPROVAL' AND approval_decision IS NULL
    AND approval_task_token IS NOT NULL;
-- What was created since a moment (the repair loop's passes over recent orders, `listing.rs`),
-- and every order's listing read backwards (`GET /orders` of an operator).
CREATE INDEX orders_by_created ON orders (created_at, order_id);
-- A client's own orders, newest first.
CREATE INDEX orders_by_owner_created ON orders (owner, created_at, order_id);

-- Stock and reservations. The CHECKs are the last line of defence: a bug that would take stock
-- below zero aborts its transaction instead of corrupting the counts. `stocked` is what the SKU
-- holds in all, so that conservation (available + reserved + shipped = stocked) can be
-- checked: only a count (`set_available`) changes it; reservations, releases and shipments move
-- units between the other three. The catalog price is set by an operator (both or neither: the
-- code writes them together); a SKU without one cannot be ordered.
CREATE TABLE stock (
    sku         TEXT PRIMARY KEY,
    available   INTEGER NOT NULL CHECK (available >= 0),
    reserved    INTEGER NOT NULL CHECK (reserved >= 0),
    shipped     INTEGER NOT NULL CHECK (shipped >= 0),
    stocked     INTEGER NOT NULL DEFAULT 0 CHECK (stocked >= 0),
    price_cents INTEGER CHECK (price_cents >= 0),
    currency    TEXT
) STRICT;
-- One row per order. `released_unreserved` marks a release that came before any reservation:
-- the row then holds no lines and refuses every later reserve for the order.
CREATE TABLE reservations (
    order_id            TEXT PRIMARY KEY,
    lines               TEXT NOT NULL,
    status              TEXT NOT NULL,
    released_unreserved INTEGER NOT NULL DEFAULT 0,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
) STRICT;
CREATE INDEX reservations_by_created ON reservations (created_at, order_id);

-- The sandbox gateways' ledger. It stands in for the payment provider's and the carrier's own
-- records, hence the prefix: the service itself never reads these tables.
CREATE TABLE sandbox_charges (
    idempotency_key TEXT PRIMARY KEY,
    charge_id       TEXT NOT NULL UNIQUE,
    order_id        TEXT NOT NULL,
    amount_cents    INTEGER NOT NULL,
    currency        TEXT NOT NULL,
    payment_method  TEXT NOT NULL,
    created_at      TEXT NOT NULL
) STRICT;
CREATE INDEX sandbox_charges_by_order ON sandbox_charges (order_id, created_at);
CREATE INDEX sandbox_charges_by_created ON sandbox_charges (created_at, idempotency_key);
CREATE TABLE sandbox_refunds (
    idempotency_key TEXT PRIMARY KEY,
    refund_id       TEXT NOT NULL UNIQUE,
    charge_id       TEXT NOT NULL UNIQUE,
    order_id        TEXT NOT NULL,
    amount_cents    INTEGER NOT NULL,
    created_at      TEXT NOT NULL
) STRICT;
CREATE INDEX sandbox_refunds_by_created ON sandbox_refunds (created_at, idempotency_key);
CREATE TABLE sandbox_shipments (
    order_id        TEXT PRIMARY KEY,
    shipment_id     TEXT NOT NULL UNIQUE,
    tracking_number TEXT NOT NULL,
    created_at      TEXT NOT NULL
) STRICT;
-- How often a "once" behaviour was triggered, per key, so it stays once across restarts.
CREATE TABLE sandbox_attempts (
    key   TEXT PRIMARY KEY,
    count INTEGER NOT NULL
) STRICT;

-- What the EasyPost gateway recorded of each order's label (`easypost::book`): the provider
-- shipment that is the order's, buys in flight, the label, a void. JSON read and written whole,
-- by one rule shared with DynamoDB.
CREATE TABLE carrier_labels (
    order_id   TEXT PRIMARY KEY,
    record     TEXT NOT NULL,
    updated_at TEXT NOT NULL
) STRICT;

-- Principals (a client or an operator, by a unique name; the role is for life) and their API
-- keys, stored as hashes only.
CREATE TABLE principals (
    name       TEXT PRIMARY KEY,
    role       TEXT NOT NULL CHECK (role IN ('client', 'operator')),
    created_at TEXT NOT NULL
) STRICT;
CREATE TABLE api_keys (
    key_id       TEXT PRIMARY KEY,
    principal    TEXT NOT NULL REFERENCES principals (name),
    key_hash     TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at   TEXT
) STRICT;
-- The operators' console sessions, by the hash of their secret (never the secret), with the
-- hash of the key each was opened with. Opening one purges those past `expires_at` (`keys.rs`),
-- through the index.
CREATE TABLE console_sessions (
    session_hash TEXT PRIMARY KEY,
    key_hash     TEXT NOT NULL,
    principal    TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL
) STRICT;
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);

-- The outbox of order events, written by triggers in the transaction of the status change
-- itself (so no write path can forget it); the webhook endpoints and the deliveries the
-- dispatcher fans the events out into (`webhooks.rs`).
CREATE TABLE order_events (
    seq        INTEGER PRIMARY KEY,
    order_id   TEXT NOT NULL,
    owner      TEXT,
    status     TEXT NOT NULL,
    at         TEXT NOT NULL,
    dispatched INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX order_events_by_order ON order_events (order_id, seq);
CREATE INDEX order_events_undispatched ON order_events (seq) WHERE dispatched = 0;
CREATE TRIGGER order_events_accepted AFTER INSERT ON orders BEGIN
    INSERT INTO order_events (order_id, owner, status, at)
    VALUES (new.order_id, new.owner, new.status, new.updated_at);
END;
CREATE TRIGGER order_events_moved AFTER UPDATE OF status ON orders
WHEN new.status IS NOT old.status BEGIN
    INSERT INTO order_events (order_id, owner, status, at)
    VALUES (new.order_id, new.owner, new.status, new.updated_at);
END;
CREATE TABLE webhook_endpoints (
    endpoint_id   TEXT PRIMARY KEY,
    owner         TEXT NOT NULL,
    url           TEXT NOT NULL,
    event_types   TEXT NOT NULL,
    secrets       TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    disabled      TEXT,
    failing_since TEXT
) STRICT;
CREATE INDEX webhook_endpoints_by_owner ON webhook_endpoints (owner, created_at);
CREATE TABLE webhook_deliveries (
    message_id      TEXT NOT NULL,
    endpoint_id     TEXT NOT NULL,
    order_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    state           TEXT NOT NULL,
    next_attempt_at TEXT,
    attempts        TEXT NOT NULL,
    PRIMARY KEY (message_id, endpoint_id)
) STRICT;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE state = 'PENDING';
CREATE INDEX webhook_deliveries_by_endpoint
    ON webhook_deliveries (endpoint_id, created_at, message_id);
"#;

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

pub(crate) fn version(conn: &Connection) -> Result<u32, StoreError> {
    let v: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    u32::try_from(v).map_err(|_| StoreError::Internal(format!("bad schema version {v}")))
}

/// Applies the steps after the file's version, up to `target`, and returns how many it applied.
pub(crate) fn migrate(conn: &mut Connection, target: u32) -> Result<u32, StoreError> {
    let mut applied = 0;
    loop {
        // Read the version inside the write transaction: two processes opening one new file
        // at once must not both apply a step.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let current = version(&tx)?;
        if current > SCHEMA_VERSION {
            return Err(StoreError::Internal(format!(
                "the database has schema version {current}, newer than this build knows \
                 ({SCHEMA_VERSION}); refusing to use it"
            )));
        }
        if current >= target {
            return Ok(applied);
        }
        tx.execute_batch(MIGRATIONS[current as usize])?;
        tx.pragma_update(None, "user_version", i64::from(current + 1))?;
        tx.commit()?;
        applied += 1;
        tracing::info!(version = current + 1, "store schema migrated");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_count(conn: &Connection) -> i64 {
        conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    }

    #[test]
    fn applies_each_step_once_and_in_order() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut conn, SCHEMA_VERSION).unwrap(), SCHEMA_VERSION);
        assert_eq!(version(&conn).unwrap(), SCHEMA_VERSION);
        // The baseline makes every table.
        assert_eq!(table_count(&conn), 14);
        // A file at this version gets nothing more.
        assert_eq!(migrate(&mut conn, SCHEMA_VERSION).unwrap(), 0);
        assert_eq!(version(&conn).unwrap(), SCHEMA_VERSION);
    }

    #[test]
    fn refuses_a_file_from_a_newer_build() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", i64::from(SCHEMA_VERSION) + 1)
            .unwrap();
        let err = migrate(&mut conn, SCHEMA_VERSION).unwrap_err();
        assert!(matches!(err, StoreError::Internal(m) if m.contains("newer")));
    }

    #[test]
    fn a_failing_step_leaves_the_version_where_it_was() {
        let mut conn = Connection::open_in_memory().unwrap();
        // Make step 1 fail half-way: its table exists already.
        conn.execute_batch("CREATE TABLE orders (x INTEGER)")
            .unwrap();
        assert!(migrate(&mut conn, SCHEMA_VERSION).is_err());
        assert_eq!(version(&conn).unwrap(), 0);
    }
}
