//! The table's shape, in one place: its key, its indexes, its time-to-live attribute and the
//! key prefix of every item kind. The CloudFormation template in `deploy/` must declare exactly this;
//! [`create_table`] creates it (for `fulfillment provision` and the tests).
//!
//! | what | value |
//! |---|---|
//! | billing | `PAY_PER_REQUEST` |
//! | key | [`PARTITION_KEY`] `pk` (S, HASH); no sort key |
//! | attribute definitions | `pk` S, `approval_queue` S, `approval_requested_at` S, `incident_queue` S, `incident_since` S, `created_shard` S, `created_at` S, `list_shard` S, `owner_shard` S, `outbox_shard` S, `due_shard` S, `next_attempt_at` S, `delivery_endpoint` S, `delivery_position` S, `endpoint_owner` S |
//! | index | [`PENDING_APPROVALS_INDEX`] `pending-approvals`: [`APPROVAL_QUEUE`] (S, HASH), [`APPROVAL_REQUESTED_AT`] (S, RANGE), projection `KEYS_ONLY` |
//! | index | [`OPEN_INCIDENTS_INDEX`] `open-incidents`: [`INCIDENT_QUEUE`] (S, HASH), [`INCIDENT_SINCE`] (S, RANGE), projection `KEYS_ONLY` |
//! | index | [`CREATED_INDEX`] `created`: [`CREATED_SHARD`] (S, HASH), [`CREATED_AT`] (S, RANGE), projection `KEYS_ONLY` |
//! | index | [`NEWEST_INDEX`] `orders-newest`: [`LIST_SHARD`] (S, HASH), [`CREATED_AT`] (S, RANGE), projection `KEYS_ONLY` |
//! | index | [`OWNER_INDEX`] `orders-by-owner`: [`OWNER_SHARD`] (S, HASH), [`CREATED_AT`] (S, RANGE), projection `KEYS_ONLY` |
//! | index | [`OUTBOX_INDEX`] `outbox`: [`OUTBOX_SHARD`] (S, HASH), [`CREATED_AT`] (S, RANGE), projection `KEYS_ONLY` |
//! | index | [`DUE_INDEX`] `webhooks-due`: [`DUE_SHARD`] (S, HASH), [`NEXT_ATTEMPT_AT`] (S, RANGE), projection `KEYS_ONLY` |
//! | index | [`DELIVERIES_INDEX`] `deliveries-by-endpoint`: [`DELIVERY_ENDPOINT`] (S, HASH), [`DELIVERY_POSITION`] (S, RANGE), projection `KEYS_ONLY` |
//! | index | [`ENDPOINTS_INDEX`] `endpoints-by-owner`: [`ENDPOINT_OWNER`] (S, HASH), [`CREATED_AT`] (S, RANGE), projection `KEYS_ONLY` |
//! | time to live | [`RETAIN_UNTIL`] `retain_until` (N, seconds since the epoch) |
//!
//! The index is sparse: only an order awaiting a decision with a parked token carries
//! `approval_queue`, so the index holds exactly the operators' queue. Its hash key is one of
//! [`APPROVAL_SHARDS`] values, `PENDING#0`…`PENDING#15`, by a hash of the order id
//! ([`approval_queue_of`]): no index partition takes every approval's writes, and the approval
//! keepers of several replicas split the queue by shard (each shard read by the one replica
//! that holds its lease). Each shard is in request order; the operators' list merges them.
//!
//! `open-incidents` is sparse the same way: only an order whose compensation gave up and waits
//! for a person carries `incident_queue` (always [`OPEN`]). A table made before it existed gets
//! it added by [`create_table`] (`UpdateTable`), which waits until it is `ACTIVE`.
//!
//! `created` is sparse too: orders, reservations and the sandbox's charges and refunds carry
//! `created_shard` from when they are put (items put before it existed do not), so the repair
//! loop lists what was created since a moment without scanning the table (`created.rs`).
//!
//! `orders-newest` and `orders-by-owner` hold every order, and every order with an owner, by
//! creation time in shards (16 and 4 per owner) that a listing merges newest first
//! (`newest.rs`). Their keys never change after the put, so an order's later writes cost
//! the indexes nothing. Orders put before they existed carry neither key and are not listed.
//!
//! The webhooks' indexes (`outbox.rs`, `deliveries.rs`, `webhooks.rs`): `outbox` is sparse,
//! holding the orders with a status reached and not yet dispatched, in [`CREATED_SHARDS`]
//! shards; `webhooks-due` holds the pending deliveries by when they are due, in as many shards;
//! `deliveries-by-endpoint` each endpoint's deliveries by creation; `endpoints-by-owner` each
//! client's endpoints. A finished delivery carries [`RETAIN_UNTIL`], and DynamoDB's time to
//! live deletes it after (named apart from the leases' `expires_at`, milliseconds, which it must
//! not read). So does a console session (`SESSION#…`, `keys.rs`), set to when it expires.

use super::error::sdk;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndex,
    GlobalSecondaryIndexUpdate, IndexStatus, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, TableDescription, TimeToLiveSpecification, TimeToLiveStatus,
};
use aws_sdk_dynamodb::waiters::table_exists::WaitUntilTableExistsError as WaiterError;
use std::time::Duration;
use store::error::StoreError;

/// The partition key of every item: the item kind's prefix and the item's id.
pub const PARTITION_KEY: &str = "pk";
/// The sparse index of orders awaiting an operator's decision.
pub const PENDING_APPROVALS_INDEX: &str = "pending-approvals";
/// Hash key of [`PENDING_APPROVALS_INDEX`], set (to [`approval_queue_of`] the order) only while
/// an order awaits a decision with a parked token.
pub const APPROVAL_QUEUE: &str = "approval_queue";
/// Range key of [`PENDING_APPROVALS_INDEX`]: when the approval was first requested, as
/// fixed-width RFC 3339 text, which sorts chronologically.
pub const APPROVAL_REQUESTED_AT: &str = "approval_requested_at";
/// The prefix of an [`APPROVAL_QUEUE`] value: [`approval_queue_of`] gives `PENDING#{shard}`.
pub const PENDING: &str = "PENDING";
/// How many shards the approvals' queue is split into.
pub const APPROVAL_SHARDS: u32 = 16;

/// The approvals' shard of an order: a hash of its id, the same in every build and replica.
pub fn approval_shard(order_id: &str) -> u32 {
    hash(order_id) % APPROVAL_SHARDS
}

/// A hash of `key`, the same in every build and replica.
fn hash(key: &str) -> u32 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(key.as_bytes());
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// The sparse index of items by when they were created: orders, reservations, and the sandbox
/// ledger's charges and refunds (`created.rs`).
pub const CREATED_INDEX: &str = "created";
/// Hash key of [`CREATED_INDEX`]: the item kind's prefix, the UTC day it was created and a
/// shard (`ORDER#2026-12-03#7`), set when the item is put.
pub const CREATED_SHARD: &str = "created_shard";
/// Range key of [`CREATED_INDEX`]: the item's `created_at`.
pub const CREATED_AT: &str = "created_at";
/// How many shards each kind's day is split into in [`CREATED_INDEX`].
pub const CREATED_SHARDS: u32 = 16;

/// The [`CREATED_INDEX`] shard of an item with key `key` (an order id, an idempotency key).
pub fn shard_of(key: &str) -> u32 {
    hash(key) % CREATED_SHARDS
}

/// The index of every order, newest first (`GET /orders` for operators; `newest.rs`).
pub const NEWEST_INDEX: &str = "orders-newest";
/// Hash key of [`NEWEST_INDEX`]: `ORDERS#{shard}`, one of [`CREATED_SHARDS`] by a hash of the
/// order id, set when the order is put; range key [`CREATED_AT`].
pub const LIST_SHARD: &str = "list_shard";
/// The index of each client's orders, newest first (`GET /orders` for clients; `newest.rs`).
pub const OWNER_INDEX: &str = "orders-by-owner";
/// Hash key of [`OWNER_INDEX`]: `{owner}#{shard}`, one of [`OWNER_SHARDS`] by a hash of the
/// order id, set when an order with an owner is put; range key [`CREATED_AT`].
pub const OWNER_SHARD: &str = "owner_shard";
/// How many shards each owner's orders are split into in [`OWNER_INDEX`]: an index partition
/// takes about 1,000 writes a second, so a client may place about four times that.
pub const OWNER_SHARDS: u32 = 4;

/// The sparse index of the orders whose reached statuses are not all dispatched to webhooks
/// yet: the outbox (`outbox.rs`).
pub const OUTBOX_INDEX: &str = "outbox";
/// Hash key of [`OUTBOX_INDEX`]: `OUTBOX#{shard}` ([`outbox_shard`]), set by every write that
/// changes an order's status, removed once all its statuses are dispatched; range key
/// [`CREATED_AT`].
pub const OUTBOX_SHARD: &str = "outbox_shard";
/// The sparse index of the webhook deliveries pending, by when they are due (`deliveries.rs`).
pub const DUE_INDEX: &str = "webhooks-due";
/// Hash key of [`DUE_INDEX`]: `DUE#{shard}` ([`due_shard`], by a hash of the message id), set
/// only while the delivery is pending.
pub const DUE_SHARD: &str = "due_shard";
/// Range key of [`DUE_INDEX`]: when the next attempt is due.
pub const NEXT_ATTEMPT_AT: &str = "next_attempt_at";
/// The index of each webhook endpoint's deliveries, by creation (`deliveries.rs`).
pub const DELIVERIES_INDEX: &str = "deliveries-by-endpoint";
/// Hash key of [`DELIVERIES_INDEX`]: the endpoint's id.
pub const DELIVERY_ENDPOINT: &str = "delivery_endpoint";
/// Range key of [`DELIVERIES_INDEX`]: `{created_at}|{message id}`, the listing's cursor too.
pub const DELIVERY_POSITION: &str = "delivery_position";
/// The index of each client's webhook endpoints (`webhooks.rs`).
pub const ENDPOINTS_INDEX: &str = "endpoints-by-owner";
/// Hash key of [`ENDPOINTS_INDEX`]: the endpoint's owner; range key [`CREATED_AT`].
pub const ENDPOINT_OWNER: &str = "endpoint_owner";
/// The table's time-to-live attribute: seconds since the epoch after which DynamoDB deletes the
/// item (a finished delivery, [`EVENT_RETENTION`](store::EVENT_RETENTION) after its event; a
/// console session, once it expired).
pub const RETAIN_UNTIL: &str = "retain_until";

/// The [`OUTBOX_SHARD`] of shard `shard`.
pub fn outbox_shard(shard: u32) -> String {
    format!("OUTBOX#{shard}")
}

/// The [`DUE_SHARD`] of shard `shard`.
pub fn due_shard(shard: u32) -> String {
    format!("DUE#{shard}")
}

/// The [`LIST_SHARD`] of shard `shard`.
pub fn list_shard(shard: u32) -> String {
    format!("ORDERS#{shard}")
}

/// The [`OWNER_SHARD`] of shard `shard` of `owner`'s orders.
pub fn owner_shard(owner: &str, shard: u32) -> String {
    format!("{owner}#{shard}")
}

/// The [`APPROVAL_QUEUE`] value of shard `shard`: `PENDING#{shard}`.
pub fn approval_queue(shard: u32) -> String {
    format!("{PENDING}#{shard}")
}

/// The [`APPROVAL_QUEUE`] an order parks in.
pub fn approval_queue_of(order_id: &str) -> String {
    approval_queue(approval_shard(order_id))
}
/// The sparse index of orders with an open incident.
pub const OPEN_INCIDENTS_INDEX: &str = "open-incidents";
/// Hash key of [`OPEN_INCIDENTS_INDEX`], set (to [`OPEN`]) only while an incident is open.
pub const INCIDENT_QUEUE: &str = "incident_queue";
/// Range key of [`OPEN_INCIDENTS_INDEX`]: when the incident was first recorded.
pub const INCIDENT_SINCE: &str = "incident_since";
/// The one value of [`INCIDENT_QUEUE`].
pub const OPEN: &str = "OPEN";
/// What the index projects: its keys (and the table's). Readers fetch the orders themselves,
/// consistently, so the index needs nothing more.
pub const PENDING_APPROVALS_PROJECTION: ProjectionType = ProjectionType::KeysOnly;

/// Key prefixes, one per item kind. Order ids cannot contain `#`; SKUs and idempotency keys may,
/// which is harmless since each prefix is distinct and the rest of the key is the whole id.
pub(crate) mod prefix {
    pub const ORDER: &str = "ORDER#";
    pub const STOCK: &str = "STOCK#";
    pub const RESERVATION: &str = "RESERVATION#";
    /// A principal (client or operator) by name, with its role.
    pub const PRINCIPAL: &str = "PRINCIPAL#";
    /// An API key by its id (its hash, principal, role, times).
    pub const API_KEY: &str = "APIKEY#";
    /// An API key by its hash: a pointer to its id, for authentication's one lookup.
    pub const API_KEY_HASH: &str = "APIKEYHASH#";
    /// An operator's console session by the hash of its secret (its key's hash, principal,
    /// times), deleted by the time to live once it expired.
    pub const SESSION: &str = "SESSION#";
    /// The sandbox gateways' ledger: it stands in for the provider's and the carrier's own
    /// records, hence the prefix (as the `sandbox_` tables in SQLite).
    pub const CHARGE: &str = "SANDBOX#CHARGE#";
    pub const CHARGE_ID: &str = "SANDBOX#CHARGE-ID#";
    pub const PAYMENT: &str = "SANDBOX#PAYMENT#";
    pub const REFUND: &str = "SANDBOX#REFUND#";
    pub const SHIPMENT: &str = "SANDBOX#SHIPMENT#";
    pub const ATTEMPT: &str = "SANDBOX#ATTEMPT#";
    /// The EasyPost gateway's record of an order's label (`easypost::book`).
    pub const LABEL: &str = "LABEL#";
    /// A lease of a job one replica does at a time (`dynamodb::DynamoLease`).
    pub const LEASE: &str = "LEASE#";
    /// A webhook endpoint by its id.
    pub const WEBHOOK_ENDPOINT: &str = "WEBHOOK#ENDPOINT#";
    /// A delivery of an event to an endpoint, by the event's message id and the endpoint's id.
    pub const WEBHOOK_DELIVERY: &str = "WEBHOOK#DELIVERY#";
}

/// How long [`create_table`] waits for a new table to become `ACTIVE`.
const ACTIVE_WITHIN: Duration = Duration::from_secs(300);

/// The table's indexes: name, hash key, range key. Each projects its keys only
/// ([`PENDING_APPROVALS_PROJECTION`]): readers fetch the items themselves, consistently.
pub const INDEXES: [(&str, &str, &str); 9] = [
    (
        PENDING_APPROVALS_INDEX,
        APPROVAL_QUEUE,
        APPROVAL_REQUESTED_AT,
    ),
    (OPEN_INCIDENTS_INDEX, INCIDENT_QUEUE, INCIDENT_SINCE),
    (CREATED_INDEX, CREATED_SHARD, CREATED_AT),
    (NEWEST_INDEX, LIST_SHARD, CREATED_AT),
    (OWNER_INDEX, OWNER_SHARD, CREATED_AT),
    (OUTBOX_INDEX, OUTBOX_SHARD, CREATED_AT),
    (DUE_INDEX, DUE_SHARD, NEXT_ATTEMPT_AT),
    (DELIVERIES_INDEX, DELIVERY_ENDPOINT, DELIVERY_POSITION),
    (ENDPOINTS_INDEX, ENDPOINT_OWNER, CREATED_AT),
];

fn key(name: &str, key_type: KeyType) -> Result<KeySchemaElement, StoreError> {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(key_type)
        .build()
        .map_err(|e| StoreError::Internal(format!("key schema: {e}")))
}

fn string_attribute(name: &str) -> Result<AttributeDefinition, StoreError> {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .map_err(|e| StoreError::Internal(format!("attribute definition: {e}")))
}

fn index(name: &str, hash: &str, range: &str) -> Result<GlobalSecondaryIndex, StoreError> {
    GlobalSecondaryIndex::builder()
        .index_name(name)
        .key_schema(key(hash, KeyType::Hash)?)
        .key_schema(key(range, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(PENDING_APPROVALS_PROJECTION)
                .build(),
        )
        .build()
        .map_err(|e| StoreError::Internal(format!("index: {e}")))
}

/// Creates the table unless it exists, then waits until it is `ACTIVE`; adds an index a table
/// made by an older build lacks. An existing table must otherwise have this shape (key and
/// indexes); one that does not is an error, not silently used.
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    let mut create = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(PARTITION_KEY, KeyType::Hash)?)
        .attribute_definitions(string_attribute(PARTITION_KEY)?);
    // Each attribute defined once, however many indexes key on it.
    let mut defined = std::collections::BTreeSet::new();
    for (name, hash, range) in INDEXES {
        for attribute in [hash, range] {
            if defined.insert(attribute) {
                create = create.attribute_definitions(string_attribute(attribute)?);
            }
        }
        create = create.global_secondary_indexes(index(name, hash, range)?);
    }
    match create.send().await {
        Ok(_) => tracing::info!(table, "DynamoDB table created"),
        // It exists (perhaps still being created by someone else): wait for it like for ours.
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) => {}
        Err(e) => return Err(sdk("CreateTable")(e)),
    }
    let mut described = wait_active(client, table).await?;
    for (name, hash, range) in INDEXES {
        let has = |d: &Option<TableDescription>| {
            d.as_ref().is_some_and(|d| {
                d.global_secondary_indexes()
                    .iter()
                    .any(|i| i.index_name() == Some(name))
            })
        };
        if has(&described) {
            continue;
        }
        add_index(client, table, name, hash, range).await?;
        described = wait_active(client, table).await?;
    }
    check_shape(table, described.as_ref())?;
    enable_time_to_live(client, table).await;
    Ok(())
}

/// Turns on the time to live on [`RETAIN_UNTIL`] unless it is on. Only housekeeping depends on
/// it (finished deliveries linger without it), so a failure is logged, not fatal: the table is
/// usable, and the next `provision` tries again.
async fn enable_time_to_live(client: &Client, table: &str) {
    let described = client
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await;
    let current = match described {
        Ok(out) => out.time_to_live_description,
        Err(e) => {
            let e = sdk("DescribeTimeToLive")(e);
            tracing::warn!(table, error = %e, "cannot read the table's time to live");
            return;
        }
    };
    let status = current.as_ref().and_then(|d| d.time_to_live_status());
    let attribute = current.as_ref().and_then(|d| d.attribute_name());
    match (status, attribute) {
        (Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling), Some(RETAIN_UNTIL)) => {
            return;
        }
        (Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling), Some(other)) => {
            // A table has one time-to-live attribute: someone chose another on purpose.
            tracing::warn!(
                table,
                attribute = other,
                "the table's time to live is on another attribute than {RETAIN_UNTIL}; \
                 finished webhook deliveries will not expire"
            );
            return;
        }
        _ => {}
    }
    let specification = match TimeToLiveSpecification::builder()
        .attribute_name(RETAIN_UNTIL)
        .enabled(true)
        .build()
    {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(table, error = %e, "time to live specification");
            return;
        }
    };
    match client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(specification)
        .send()
        .await
    {
        Ok(_) => tracing::info!(
            table,
            attribute = RETAIN_UNTIL,
            "DynamoDB time to live enabled"
        ),
        Err(e) => {
            let e = sdk("UpdateTimeToLive")(e);
            tracing::warn!(table, error = %e, "cannot enable the table's time to live");
        }
    }
}

/// Waits until the table and its indexes are `ACTIVE`, and describes it.
async fn wait_active(client: &Client, table: &str) -> Result<Option<TableDescription>, StoreError> {
    let deadline = tokio::time::Instant::now() + ACTIVE_WITHIN;
    loop {
        let described = client
            .wait_until_table_exists()
            .table_name(table)
            .wait(ACTIVE_WITHIN)
            .await
            .map_err(|e| match e {
                WaiterError::OperationFailed(failed) => sdk("DescribeTable")(failed.into_error()),
                WaiterError::ExceededMaxWait(_) => StoreError::Unavailable(format!(
                    "DynamoDB table {table} did not become ACTIVE within {ACTIVE_WITHIN:?}"
                )),
                other => StoreError::Internal(format!(
                    "DynamoDB table {table} did not become ACTIVE: {}",
                    DisplayErrorContext(&other)
                )),
            })?
            .into_result()
            .map_err(sdk("DescribeTable"))?;
        let table_description = described.table;
        let indexes_active = table_description.as_ref().is_none_or(|t| {
            t.global_secondary_indexes()
                .iter()
                .all(|i| i.index_status().is_none_or(|s| *s == IndexStatus::Active))
        });
        if indexes_active {
            return Ok(table_description);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(StoreError::Unavailable(format!(
                "an index of DynamoDB table {table} did not become ACTIVE within {ACTIVE_WITHIN:?}"
            )));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Adds the index `name` to an existing table (one made by a build from before it existed).
async fn add_index(
    client: &Client,
    table: &str,
    name: &str,
    hash: &str,
    range: &str,
) -> Result<(), StoreError> {
    let gsi = index(name, hash, range)?;
    let create = CreateGlobalSecondaryIndexAction::builder()
        .index_name(name)
        .set_key_schema(Some(gsi.key_schema().to_vec()))
        .set_projection(gsi.projection().cloned())
        .build()
        .map_err(|e| StoreError::Internal(format!("index: {e}")))?;
    let added = client
        .update_table()
        .table_name(table)
        .attribute_definitions(string_attribute(hash)?)
        .attribute_definitions(string_attribute(range)?)
        .global_secondary_index_updates(
            GlobalSecondaryIndexUpdate::builder().create(create).build(),
        )
        .send()
        .await;
    match added {
        Ok(_) => {
            tracing::info!(table, index = name, "DynamoDB index added");
            Ok(())
        }
        // Another replica is adding it at the same moment: wait for it like for ours.
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(sdk("UpdateTable")(e)),
    }
}

/// Refuses a table whose key or index differs from this shape: the adapters would fail on it
/// in ways far from the cause.
fn check_shape(table: &str, description: Option<&TableDescription>) -> Result<(), StoreError> {
    let keys = |schema: &[KeySchemaElement]| -> Vec<(String, KeyType)> {
        schema
            .iter()
            .map(|k| (k.attribute_name().to_owned(), k.key_type().clone()))
            .collect()
    };
    let description = description.ok_or_else(|| {
        StoreError::Internal(format!("DynamoDB table {table} has no description"))
    })?;
    let mismatch = |what: &str| {
        StoreError::Internal(format!(
            "DynamoDB table {table} exists with another {what} than this build uses \
             (see store_dynamodb's table shape)"
        ))
    };
    if keys(description.key_schema()) != [(PARTITION_KEY.to_owned(), KeyType::Hash)] {
        return Err(mismatch("key schema"));
    }
    for (name, hash, range) in INDEXES {
        let index = description
            .global_secondary_indexes()
            .iter()
            .find(|i| i.index_name() == Some(name))
            .ok_or_else(|| mismatch(&format!("set of indexes (no {name})")))?;
        let expected = [
            (hash.to_owned(), KeyType::Hash),
            (range.to_owned(), KeyType::Range),
        ];
        if keys(index.key_schema()) != expected {
            return Err(mismatch(&format!("{name} key schema")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::prefix::*;

    /// A listing scans one item kind by its prefix (`begins_with`): no kind may take another's.
    #[test]
    fn no_item_kind_prefix_starts_another() {
        let all = [
            ORDER,
            STOCK,
            RESERVATION,
            CHARGE,
            CHARGE_ID,
            PAYMENT,
            REFUND,
            SHIPMENT,
            ATTEMPT,
            LABEL,
            LEASE,
            WEBHOOK_ENDPOINT,
            WEBHOOK_DELIVERY,
        ];
        for a in all {
            for b in all.iter().filter(|b| **b != a) {
                assert!(!b.starts_with(a), "{b} starts with {a}");
            }
        }
    }
}
