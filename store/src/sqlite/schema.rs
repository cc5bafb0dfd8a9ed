//! The schema of the store's SQLite file and its migrations: a list of steps applied in order,
//! each once, in its own transaction, with the file's `PRAGMA user_version` counting the steps
//! applied so far.

use crate::error::StoreError;
use rusqlite::Connection;

/// Each entry moves the schema one version forward. Never edit a step that has shipped: add one.
/// The steps use plain `CREATE TABLE` (no `IF NOT EXISTS`) on purpose, so a step applied twice
/// fails loudly instead of passing unnoticed.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: orders. Items and address are JSON (read and written whole); everything a query filters
    // or a conditional update tests is a column of its own.
    r#"
CREATE TABLE orders (
    order_id              TEXT PRIMARY KEY,
    customer_id           TEXT NOT NULL,
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
    approval_requested_at TEXT,
    approval_task_token   TEXT,
    approval_decision     TEXT,
    approval_decided_by   TEXT,
    approval_decided_at   TEXT,
    approval_reason       TEXT,
    updated_at            TEXT NOT NULL
) STRICT;
-- The operators' queue: awaiting orders, oldest request first.
CREATE INDEX orders_by_status_requested ON orders (status, approval_requested_at);
"#,
    // 2: stock and reservations. The CHECKs are the last line of defence: a bug that would take
    // stock below zero aborts its transaction instead of corrupting the counts.
    r#"
CREATE TABLE stock (
    sku       TEXT PRIMARY KEY,
    available INTEGER NOT NULL CHECK (available >= 0),
    reserved  INTEGER NOT NULL CHECK (reserved >= 0),
    shipped   INTEGER NOT NULL CHECK (shipped >= 0)
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
"#,
    // 3: the sandbox gateways' ledger. It stands in for the payment provider's and the carrier's
    // own records, hence the prefix: the service itself never reads these tables.
    r#"
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
CREATE TABLE sandbox_refunds (
    idempotency_key TEXT PRIMARY KEY,
    refund_id       TEXT NOT NULL UNIQUE,
    charge_id       TEXT NOT NULL UNIQUE,
    order_id        TEXT NOT NULL,
    amount_cents    INTEGER NOT NULL,
    created_at      TEXT NOT NULL
) STRICT;
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
"#,
    // 4: the payment provider's id of the order's charge, so a refund goes by it rather than by a
    // lookup the provider may answer late. Orders charged before this step have none: their
    // refund looks the charge up, as before.
    r#"
ALTER TABLE orders ADD COLUMN charge_id TEXT;
"#,
    // 5: when that charge was made, set with `charge_id`, so the status view shows the charge
    // without asking the provider. Orders charged before this step have none: their status looks
    // the charge up, as before.
    r#"
ALTER TABLE orders ADD COLUMN charged_at TEXT;
"#,
    // 6: what each SKU holds in all, so that conservation (available + reserved + shipped =
    // stocked) can be checked. Only a count (`set_available`) changes it; reservations, releases
    // and shipments move units between the other three. Rows from before start balanced: the
    // counts they hold are taken as what was stocked.
    r#"
ALTER TABLE stock ADD COLUMN stocked INTEGER NOT NULL DEFAULT 0 CHECK (stocked >= 0);
UPDATE stock SET stocked = available + reserved + shipped;
"#,
    // 7: the refund of the order's charge, recorded by the compensation that made it, so the
    // status view shows it (id, amount, when) without asking the provider.
    r#"
ALTER TABLE orders ADD COLUMN refund_id TEXT;
ALTER TABLE orders ADD COLUMN refund_amount_cents INTEGER CHECK (refund_amount_cents >= 0);
ALTER TABLE orders ADD COLUMN refunded_at TEXT;
"#,
    // 8: principals (a client or an operator, by a unique name; the role is for life) and their
    // API keys, stored as hashes only.
    r#"
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
"#,
    // 9: the principal whose key placed the order (its owner). Orders from before have none:
    // only operators see them.
    r#"
ALTER TABLE orders ADD COLUMN owner TEXT;
"#,
    // 10: the catalog price of a SKU, set by an operator (both or neither: the code writes them
    // together). SKUs from before have none and cannot be ordered until priced.
    r#"
ALTER TABLE stock ADD COLUMN price_cents INTEGER CHECK (price_cents >= 0);
ALTER TABLE stock ADD COLUMN currency TEXT;
"#,
    // 11: what the EasyPost gateway recorded of each order's label (`easypost::book`): the
    // provider shipment that is the order's, buys in flight, the label, a void. JSON read and
    // written whole, by one rule shared with DynamoDB.
    r#"
CREATE TABLE carrier_labels (
    order_id   TEXT PRIMARY KEY,
    record     TEXT NOT NULL,
    updated_at TEXT NOT NULL
) STRICT;
"#,
    // 12: the incident of an order whose compensation gave up (open while `incident_since` is
    // set; the index holds only open ones, oldest first), and the operators' actions on the
    // order (a JSON array, read and written whole).
    r#"
ALTER TABLE orders ADD COLUMN incident_step TEXT;
ALTER TABLE orders ADD COLUMN incident_error TEXT;
ALTER TABLE orders ADD COLUMN incident_cause TEXT;
ALTER TABLE orders ADD COLUMN incident_attempts INTEGER CHECK (incident_attempts >= 0);
ALTER TABLE orders ADD COLUMN incident_since TEXT;
ALTER TABLE orders ADD COLUMN actions TEXT NOT NULL DEFAULT '[]';
CREATE INDEX orders_open_incidents ON orders (incident_since, order_id)
    WHERE incident_since IS NOT NULL;
"#,
    // 13: the approval window's deadline, fixed at the first park; the approvals' queue (orders
    // with a parked token and no decision) paged in request order.
    r#"
ALTER TABLE orders ADD COLUMN approval_deadline TEXT;
CREATE INDEX orders_pending_approvals ON orders (approval_requested_at, order_id)
    WHERE status = 'AWAITING_APPROVAL' AND approval_decision IS NULL
    AND approval_task_token IS NOT NULL;
"#,
    // 14: what was created since a moment, for the repair loop's passes over recent orders
    // (`listing.rs`): each listing read by creation time, then its key.
    r#"
CREATE INDEX orders_by_created ON orders (created_at, order_id);
CREATE INDEX reservations_by_created ON reservations (created_at, order_id);
CREATE INDEX sandbox_charges_by_created ON sandbox_charges (created_at, idempotency_key);
CREATE INDEX sandbox_refunds_by_created ON sandbox_refunds (created_at, idempotency_key);
"#,
    // 15: a request to cancel the order (JSON, written once) and when its shipment step began
    // (the point of no return): of the two, the first written excludes the other.
    r#"
ALTER TABLE orders ADD COLUMN cancellation TEXT;
ALTER TABLE orders ADD COLUMN shipping_started_at TEXT;
"#,
    // 16: a client's own orders, newest first (`GET /orders`); every order's listing reads
    // `orders_by_created` backwards.
    r#"
CREATE INDEX orders_by_owner_created ON orders (owner, created_at, order_id);
"#,
    // 17: the outbox of order events, written by triggers in the transaction of the status
    // change itself (so no write path can forget it); the webhook endpoints and the
    // deliveries the dispatcher fans the events out into (`webhooks.rs`).
    r#"
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
"#,
    // 18: the operators' console sessions, by the hash of their secret (never the secret), with
    // the hash of the key each was opened with. Opening one purges those past `expires_at`
    // (`keys.rs`), through the index.
    r#"
CREATE TABLE console_sessions (
    session_hash TEXT PRIMARY KEY,
    key_hash     TEXT NOT NULL,
    principal    TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL
) STRICT;
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
"#,
];

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
        assert_eq!(migrate(&mut conn, 1).unwrap(), 1);
        assert_eq!(version(&conn).unwrap(), 1);
        assert_eq!(table_count(&conn), 1);
        // A file left at an older version gets only the steps it lacks.
        assert_eq!(
            migrate(&mut conn, SCHEMA_VERSION).unwrap(),
            SCHEMA_VERSION - 1
        );
        assert_eq!(migrate(&mut conn, SCHEMA_VERSION).unwrap(), 0);
        assert_eq!(version(&conn).unwrap(), SCHEMA_VERSION);
        assert_eq!(table_count(&conn), 14);
    }

    #[test]
    fn orders_stored_before_charge_ids_keep_their_rows_without_one() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn, 3).unwrap();
        conn.execute_batch(
            "INSERT INTO orders (order_id, customer_id, items, currency, payment_method, \
             shipping_address, amount_cents, requires_approval, body_hash, created_at, status, \
             updated_at) VALUES ('o1', 'c', '[]', 'EUR', 'pm', '{}', 1, 0, 'h', 't', 'CHARGED', 't')",
        )
        .unwrap();
        assert_eq!(migrate(&mut conn, 4).unwrap(), 1);
        let (status, charge_id): (String, Option<String>) = conn
            .query_row(
                "SELECT status, charge_id FROM orders WHERE order_id = 'o1'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((status.as_str(), charge_id), ("CHARGED", None));
    }

    #[test]
    fn orders_charged_before_charge_times_keep_their_charge_id_without_one() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn, 4).unwrap();
        conn.execute_batch(
            "INSERT INTO orders (order_id, customer_id, items, currency, payment_method, \
             shipping_address, amount_cents, requires_approval, body_hash, created_at, status, \
             updated_at, charge_id) \
             VALUES ('o1', 'c', '[]', 'EUR', 'pm', '{}', 1, 0, 'h', 't', 'CHARGED', 't', 'ch_1')",
        )
        .unwrap();
        assert_eq!(migrate(&mut conn, 5).unwrap(), 1);
        let (charge_id, charged_at): (Option<String>, Option<String>) = conn
            .query_row(
                "SELECT charge_id, charged_at FROM orders WHERE order_id = 'o1'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((charge_id.as_deref(), charged_at), (Some("ch_1"), None));
    }

    #[test]
    fn stock_from_before_the_total_was_kept_starts_balanced() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn, 5).unwrap();
        conn.execute_batch(
            "INSERT INTO stock (sku, available, reserved, shipped) VALUES ('book', 3, 2, 5)",
        )
        .unwrap();
        assert_eq!(migrate(&mut conn, 6).unwrap(), 1);
        let stocked: i64 = conn
            .query_row("SELECT stocked FROM stock WHERE sku = 'book'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(stocked, 10);
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
