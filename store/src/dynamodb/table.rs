//! The table's shape, in one place: its key, its one index and the key prefix of every item
//! kind. The CloudFormation template in `deploy/` must declare exactly this;
//! [`create_table`] creates it (for `fulfillment provision` and the tests).
//!
//! | what | value |
//! |---|---|
//! | billing | `PAY_PER_REQUEST` |
//! | key | [`PARTITION_KEY`] `pk` (S, HASH); no sort key |
//! | attribute definitions | `pk` S, `approval_queue` S, `approval_requested_at` S |
//! | index | [`PENDING_APPROVALS_INDEX`] `pending-approvals`: [`APPROVAL_QUEUE`] (S, HASH), [`APPROVAL_REQUESTED_AT`] (S, RANGE), projection `KEYS_ONLY` |
//!
//! The index is sparse: only an order awaiting a decision with a parked token carries
//! `approval_queue` (always [`PENDING`]), so the index holds exactly the operators' queue,
//! oldest request first. One hash key value puts the whole queue in one index partition; that
//! is fine for the few orders that need an approval (a partition takes about a thousand writes
//! a second), and it is what lets one `Query` return them in order. Should the queue ever grow
//! past that, shard the hash key (`PENDING#0`…`PENDING#n`) and merge the queries.

use super::error::sdk;
use crate::error::StoreError;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TableDescription,
};
use aws_sdk_dynamodb::waiters::table_exists::WaitUntilTableExistsError as WaiterError;
use std::time::Duration;

/// The partition key of every item: the item kind's prefix and the item's id.
pub const PARTITION_KEY: &str = "pk";
/// The sparse index of orders awaiting an operator's decision.
pub const PENDING_APPROVALS_INDEX: &str = "pending-approvals";
/// Hash key of [`PENDING_APPROVALS_INDEX`], set (to [`PENDING`]) only while an order awaits a
/// decision with a parked token.
pub const APPROVAL_QUEUE: &str = "approval_queue";
/// Range key of [`PENDING_APPROVALS_INDEX`]: when the approval was first requested, as
/// fixed-width RFC 3339 text, which sorts chronologically.
pub const APPROVAL_REQUESTED_AT: &str = "approval_requested_at";
/// The one value of [`APPROVAL_QUEUE`].
pub const PENDING: &str = "PENDING";
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
}

/// How long [`create_table`] waits for a new table to become `ACTIVE`.
const ACTIVE_WITHIN: Duration = Duration::from_secs(300);

/// Creates the table unless it exists, then waits until it is `ACTIVE`. An existing table must
/// have this shape (key and index); one that does not is an error, not silently used.
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    let key = |name: &str, key_type| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build()
            .map_err(|e| StoreError::Internal(format!("key schema: {e}")))
    };
    let string_attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(|e| StoreError::Internal(format!("attribute definition: {e}")))
    };
    let index = GlobalSecondaryIndex::builder()
        .index_name(PENDING_APPROVALS_INDEX)
        .key_schema(key(APPROVAL_QUEUE, KeyType::Hash)?)
        .key_schema(key(APPROVAL_REQUESTED_AT, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(PENDING_APPROVALS_PROJECTION)
                .build(),
        )
        .build()
        .map_err(|e| StoreError::Internal(format!("index: {e}")))?;
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(PARTITION_KEY, KeyType::Hash)?)
        .attribute_definitions(string_attribute(PARTITION_KEY)?)
        .attribute_definitions(string_attribute(APPROVAL_QUEUE)?)
        .attribute_definitions(string_attribute(APPROVAL_REQUESTED_AT)?)
        .global_secondary_indexes(index)
        .send()
        .await;
    match created {
        Ok(_) => tracing::info!(table, "DynamoDB table created"),
        // It exists (perhaps still being created by someone else): wait for it like for ours.
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) => {}
        Err(e) => return Err(sdk("CreateTable")(e)),
    }
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
        })?;
    match described.into_result() {
        Ok(output) => check_shape(table, output.table()),
        Err(e) => Err(sdk("DescribeTable")(e)),
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
             (see store::dynamodb's table shape)"
        ))
    };
    if keys(description.key_schema()) != [(PARTITION_KEY.to_owned(), KeyType::Hash)] {
        return Err(mismatch("key schema"));
    }
    let index = description
        .global_secondary_indexes()
        .iter()
        .find(|i| i.index_name() == Some(PENDING_APPROVALS_INDEX))
        .ok_or_else(|| mismatch(&format!("set of indexes (no {PENDING_APPROVALS_INDEX})")))?;
    let expected = [
        (APPROVAL_QUEUE.to_owned(), KeyType::Hash),
        (APPROVAL_REQUESTED_AT.to_owned(), KeyType::Range),
    ];
    if keys(index.key_schema()) != expected {
        return Err(mismatch(&format!("{PENDING_APPROVALS_INDEX} key schema")));
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
        ];
        for a in all {
            for b in all.iter().filter(|b| **b != a) {
                assert!(!b.starts_with(a), "{b} starts with {a}");
            }
        }
    }
}
