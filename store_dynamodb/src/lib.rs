//! DynamoDB adapters of AWS mode. One table (its shape: [`table`]) holds the orders, the stock
//! and reservations, the webhooks' endpoints and deliveries, and the sandbox gateways' ledger;
//! [`DynamoStore`] implements [`OrderRepository`](store::OrderRepository),
//! [`InventoryRepository`](store::InventoryRepository),
//! [`WebhookRepository`](store::WebhookRepository) and the sandbox
//! [`Ledger`](store::ledger::Ledger).
//!
//! Every write is conditional and decides in the same round trip: a failed condition returns
//! the item as it was (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), which tells a replay from
//! a conflict without a second read. Multi-item changes (a reservation and its stock, a release)
//! are one `TransactWriteItems`. Every read a decision depends on is strongly consistent; the
//! indexes (pending approvals, open incidents, items by creation day) cannot be: their readers
//! read the items again, consistently (`orders.rs`, `created.rs`). Whole listings (for
//! `fulfillment audit`) are consistent `Scan`s of one item kind, by its key prefix; listings
//! since a moment query the `created` index.
//!
//! | item | `pk` | attributes |
//! |---|---|---|
//! | order | `ORDER#{order id}` | `order_id`, `customer_id`, `items` (JSON), `currency`, `payment_method`, `shipping_address` (JSON), `amount_cents` N, `requires_approval` BOOL, `body_hash`, `created_at`, `created_shard`, `status`, `updated_at`; when set: `owner`, `execution_arn`, `charge_id` with `charged_at`, `refund_id` with `refund_amount_cents` N and `refunded_at`, `failure_error`, `failure_cause`, `approval_requested_at`, `approval_deadline`, `approval_task_token`, `approval_decision`, `approval_decided_by`, `approval_decided_at`, `approval_reason`, `approval_queue`; the outbox (`outbox.rs`): `reached` (M, status → time), `dispatched` (M, status → BOOL), `outbox_shard` while a reached status is not dispatched (absent on orders from before the outbox) |
//! | stock | `STOCK#{sku}` | `sku`, `available` N, `reserved` N, `shipped` N, `stocked` N (absent on items last counted before it was kept) |
//! | reservation | `RESERVATION#{order id}` | `order_id`, `lines` (JSON), `status` (`HELD`, `RELEASED`, `SHIPPED`), `released_unreserved` BOOL, `created_at`, `created_shard`, `updated_at` |
//! | sandbox charge | `SANDBOX#CHARGE#{idempotency key}` | `idempotency_key`, `charge_id`, `order_id`, `amount_cents` N, `currency`, `payment_method`, `created_at`, `created_shard`; `refund_key` once refunded |
//! | sandbox charge id | `SANDBOX#CHARGE-ID#{charge id}` | `idempotency_key` (of the charge) |
//! | sandbox payment | `SANDBOX#PAYMENT#{order id}` | `first_charge_key` or `voided` BOOL |
//! | sandbox refund | `SANDBOX#REFUND#{idempotency key}` | `idempotency_key`, `refund_id`, `charge_id`, `order_id`, `amount_cents` N, `created_at`, `created_shard` |
//! | sandbox shipment | `SANDBOX#SHIPMENT#{order id}` | `shipment_id`, `tracking_number`, `created_at`, or `voided` BOOL |
//! | sandbox attempt | `SANDBOX#ATTEMPT#{key}` | `attempts` N |
//! | EasyPost label record | `LABEL#{order id}` | `record` (JSON of `easypost::book::LabelRecord`), `version` N |
//! | console session | `SESSION#{session hash}` | `session_hash`, `key_hash`, `principal`, `created_at`, `expires_at`, `retain_until` N (`expires_at` in seconds since the epoch, rounded up: the time to live) |
//! | lease | `LEASE#{name}` | `owner`, `expires_at` N (milliseconds since the epoch; see [`DynamoLease`]) |
//! | webhook endpoint | `WEBHOOK#ENDPOINT#{id}` | `endpoint_id`, `endpoint_owner`, `url`, `event_types` (JSON), `secrets` (JSON), `created_at`; when set: `disabled` (JSON), `failing_since` |
//! | webhook delivery | `WEBHOOK#DELIVERY#{message id}#{endpoint id}` | `message_id`, `endpoint_id`, `order_id`, `event_type`, `payload`, `created_at`, `state`, `attempts` (JSON), `delivery_endpoint`, `delivery_position` (`{created_at}\|{message id}`); when set: `next_attempt_at`; while pending: `due_shard`; once finished: `retain_until` N (seconds since the epoch, the time to live) |
//!
//! Timestamps are RFC 3339 text with nanoseconds; all other attributes are S unless noted.

mod codec;
mod created;
mod deliveries;
mod error;
mod inventory;
mod keys;
mod labels;
mod lease;
mod ledger;
mod newest;
mod orders;
mod outbox;
pub mod table;
mod webhooks;

pub use lease::{DynamoLease, DynamoShardLeases};
pub use table::{
    APPROVAL_QUEUE, APPROVAL_REQUESTED_AT, APPROVAL_SHARDS, CREATED_INDEX, CREATED_SHARD,
    CREATED_SHARDS, INCIDENT_QUEUE, INCIDENT_SINCE, INDEXES, OPEN_INCIDENTS_INDEX, PARTITION_KEY,
    PENDING, PENDING_APPROVALS_INDEX, PENDING_APPROVALS_PROJECTION, approval_queue, approval_shard,
    create_table, shard_of,
};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    CancellationReason, KeysAndAttributes, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use codec::{Item, key, names};
use error::sdk;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use store::error::StoreError;

/// The DynamoDB store: cheap to clone, every clone shares the client (and its connections).
#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: Arc<str>,
}

impl std::fmt::Debug for DynamoStore {
    // The client's configuration is left out: it holds the credentials provider.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoStore")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// What a conditional write did.
pub(crate) enum Written {
    /// The condition held: the item as it is now.
    Done(Item),
    /// The condition failed and nothing was written: the item as it is (`None`: there is none).
    Refused(Option<Item>),
}

/// What a `TransactWriteItems` did.
pub(crate) enum Transacted {
    Done,
    /// A condition failed and nothing was written: one reason per item, in order (code `None`
    /// for an item whose condition held), with the item as it was where `ALL_OLD` was asked.
    Refused(Vec<CancellationReason>),
}

/// How often a transaction cancelled only by other transactions on its items (or throttling) is
/// tried, pausing from 10 ms, doubling, with a jitter of each caller's own
/// (`store::retry::pauses`), before the store reports itself unavailable.
const TRANSACTION_ATTEMPTS: u32 = 8;

impl DynamoStore {
    /// A store over the table `table` (create it with [`create_table`]).
    pub fn new(client: Client, table: impl Into<String>) -> DynamoStore {
        DynamoStore {
            client,
            table: Arc::from(table.into()),
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// The item `pk` as it is now (a strongly consistent read).
    pub(crate) async fn get_item(&self, pk: String) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&*self.table)
            .set_key(Some(codec::key(pk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk("GetItem"))?;
        Ok(out.item)
    }

    /// The items `pks` as they are now (strongly consistent), by `pk`; missing ones are left out.
    /// The entries `query` (of an index, its table set) finds, in the index's order, following
    /// its pages until `limit` entries or the end: each entry's `range` attribute and `pk`.
    pub(crate) async fn index_entries(
        &self,
        query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
        range: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let limit = limit as usize;
        let mut entries = Vec::new();
        let mut start = None;
        loop {
            let page = query
                .clone()
                .limit(i32::try_from(limit - entries.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk("Query"))?;
            for key in page.items() {
                let f = codec::Fields::of(key);
                entries.push((f.string(range)?, f.string(PARTITION_KEY)?));
            }
            start = page.last_evaluated_key;
            if start.is_none() || entries.len() >= limit {
                return Ok(entries);
            }
        }
    }

    pub(crate) async fn get_items(
        &self,
        pks: &[String],
    ) -> Result<HashMap<String, Item>, StoreError> {
        let mut found = HashMap::new();
        // BatchGetItem takes 100 keys a call, and may leave some unprocessed when throttled.
        for chunk in pks.chunks(100) {
            let mut keys: Vec<Item> = chunk.iter().map(|pk| key(pk.clone())).collect();
            let mut pauses = store::retry::pauses(
                Duration::from_millis(10),
                Duration::from_secs(1),
                Some(UNPROCESSED_TRIES),
            );
            while !keys.is_empty() {
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| StoreError::Internal(format!("BatchGetItem request: {e}")))?;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&*self.table, request)
                    .send()
                    .await
                    .map_err(sdk("BatchGetItem"))?;
                for item in out
                    .responses
                    .and_then(|mut r| r.remove(&*self.table))
                    .unwrap_or_default()
                {
                    let pk = codec::Fields::of(&item).string(PARTITION_KEY)?;
                    found.insert(pk, item);
                }
                keys = out
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&*self.table))
                    .map(|k| k.keys)
                    .unwrap_or_default();
                if !keys.is_empty() {
                    let Some(pause) = pauses.next() else {
                        return Err(StoreError::Unavailable(format!(
                            "DynamoDB BatchGetItem left {} keys unprocessed {UNPROCESSED_TRIES} \
                             times (throttled)",
                            keys.len()
                        )));
                    };
                    tokio::time::sleep(pause).await;
                }
            }
        }
        Ok(found)
    }

    /// A page of the items whose key starts with `prefix` (one item kind), in the table's scan
    /// order, after the key `after`: a `Scan` with `ConsistentRead`, filtered by
    /// `begins_with(pk, prefix)`, its `ExclusiveStartKey` the cursor. DynamoDB's `Limit` counts
    /// the items it reads, before the filter, so the scan goes on until `limit` items match
    /// or the table ends; the cursor is the last key read (an item of any kind).
    pub(crate) async fn scan_prefix(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        let wanted = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
        let condition = format!("begins_with(#{PARTITION_KEY}, :prefix)");
        let mut items = Vec::new();
        let mut start = after.map(|pk| key(pk.to_owned()));
        loop {
            let remaining = wanted - items.len();
            let page = self
                .client
                .scan()
                .table_name(&*self.table)
                .consistent_read(true)
                .filter_expression(&condition)
                .set_expression_attribute_names(Some(names(&[&condition])))
                .expression_attribute_values(":prefix", codec::s(prefix))
                .limit(i32::try_from(remaining).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(sdk("Scan"))?;
            items.extend(page.items.unwrap_or_default());
            start = page.last_evaluated_key;
            let next = match &start {
                None => None,
                Some(last) => Some(codec::Fields::of(last).string(PARTITION_KEY)?),
            };
            if next.is_none() || items.len() >= wanted {
                return Ok((items, next));
            }
        }
    }

    /// Puts `item` unless an item with its key exists (`attribute_not_exists(pk)`), in one round
    /// trip: a refusal carries the existing item.
    pub(crate) async fn put_new(&self, item: Item) -> Result<Written, StoreError> {
        let condition = format!("attribute_not_exists(#{PARTITION_KEY})");
        let sent = self
            .client
            .put_item()
            .table_name(&*self.table)
            .set_item(Some(item.clone()))
            .condition_expression(&condition)
            .set_expression_attribute_names(Some(names(&[&condition])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(Written::Done(item)),
            Err(err) => match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                    let pk = codec::Fields::of(&item).string(PARTITION_KEY)?;
                    Ok(Written::Refused(self.old_item(failed.item(), pk).await?))
                }
                _ => Err(sdk("PutItem")(err)),
            },
        }
    }

    /// Updates (or creates) the item `pk` if `condition` holds, in one round trip: the answer
    /// carries the item as the write left it, or as the refusal found it. Attribute names are
    /// written `#name` in the expressions (see [`names`]); `values` binds the `:value`s.
    pub(crate) async fn update(
        &self,
        pk: String,
        update: &str,
        condition: Option<&str>,
        values: Item,
    ) -> Result<Written, StoreError> {
        let sent = self
            .client
            .update_item()
            .table_name(&*self.table)
            .set_key(Some(key(pk.clone())))
            .update_expression(update)
            .set_condition_expression(condition.map(str::to_owned))
            .set_expression_attribute_names(Some(names(&[update, condition.unwrap_or("")])))
            .set_expression_attribute_values((!values.is_empty()).then_some(values))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match sent {
            Ok(out) => out.attributes.map(Written::Done).ok_or_else(|| {
                StoreError::Internal(format!("DynamoDB UpdateItem of {pk} returned no item"))
            }),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    Ok(Written::Refused(self.old_item(failed.item(), pk).await?))
                }
                _ => Err(sdk("UpdateItem")(err)),
            },
        }
    }

    /// The item a refused write found: DynamoDB returns it (`ALL_OLD`) when there is one. When
    /// it does not, the item is read (consistently), so an emulator that leaves it out costs a
    /// round trip, never a wrong answer.
    async fn old_item(
        &self,
        returned: Option<&Item>,
        pk: String,
    ) -> Result<Option<Item>, StoreError> {
        match returned {
            Some(item) => Ok(Some(item.clone())),
            None => self.get_item(pk).await,
        }
    }

    /// The item a transaction's refused item `reason` found (see `old_item`).
    pub(crate) async fn refused_item(
        &self,
        reason: &CancellationReason,
        pk: String,
    ) -> Result<Option<Item>, StoreError> {
        self.old_item(reason.item(), pk).await
    }

    /// A transaction's `Update` of the item `pk`, as [`update`](Self::update) has it; a failed
    /// condition reports the item as it was.
    pub(crate) fn tx_update(
        &self,
        pk: String,
        expression: &str,
        condition: &str,
        values: Item,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&*self.table)
            .set_key(Some(key(pk)))
            .update_expression(expression)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[expression, condition])))
            .set_expression_attribute_values((!values.is_empty()).then_some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::Internal(format!("transaction update: {e}")))?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// A transaction's `Put` of `item` unless its key exists, as [`put_new`](Self::put_new).
    pub(crate) fn tx_put_new(&self, item: Item) -> Result<TransactWriteItem, StoreError> {
        let condition = format!("attribute_not_exists(#{PARTITION_KEY})");
        let put = Put::builder()
            .table_name(&*self.table)
            .set_item(Some(item))
            .condition_expression(&condition)
            .set_expression_attribute_names(Some(names(&[&condition])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::Internal(format!("transaction put: {e}")))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Runs a transaction. A cancellation in which a condition failed is returned for the caller
    /// to decide; one caused only by concurrent transactions on the same items
    /// (`TransactionConflict`) or throttling decided nothing and is tried again after a pause.
    pub(crate) async fn transact(
        &self,
        items: Vec<TransactWriteItem>,
    ) -> Result<Transacted, StoreError> {
        let mut pauses = store::retry::pauses(
            Duration::from_millis(10),
            Duration::from_millis(500),
            Some(TRANSACTION_ATTEMPTS as usize - 1),
        );
        loop {
            let sent = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .send()
                .await;
            let err = match sent {
                Ok(_) => return Ok(Transacted::Done),
                Err(err) => err,
            };
            let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
                err.as_service_error()
            else {
                return Err(sdk("TransactWriteItems")(err));
            };
            let reasons = cancelled.cancellation_reasons();
            let codes: Vec<&str> = reasons.iter().map(|r| r.code().unwrap_or("None")).collect();
            if codes.contains(&CONDITION_FAILED) {
                return Ok(Transacted::Refused(reasons.to_vec()));
            }
            let message = format!("DynamoDB TransactWriteItems cancelled: {codes:?}");
            let transient = codes.iter().all(|c| {
                matches!(
                    *c,
                    "None"
                        | "TransactionConflict"
                        | "ThrottlingError"
                        | "ProvisionedThroughputExceeded"
                )
            });
            if !transient {
                return Err(StoreError::Internal(message));
            }
            match pauses.next() {
                Some(pause) => tokio::time::sleep(pause).await,
                None => return Err(StoreError::Unavailable(message)),
            }
        }
    }
}

/// How often a `BatchGetItem` is sent again for the keys DynamoDB left unprocessed (it does so
/// when throttled) before the read is given up as unavailable.
const UNPROCESSED_TRIES: usize = 10;

/// The code of a cancellation reason whose condition failed.
pub(crate) const CONDITION_FAILED: &str = "ConditionalCheckFailed";

/// Whether the condition of the transaction's item `index` failed.
pub(crate) fn failed(reasons: &[CancellationReason], index: usize) -> bool {
    reasons
        .get(index)
        .is_some_and(|r| r.code() == Some(CONDITION_FAILED))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use aws_sdk_dynamodb::config::retry::RetryConfig;
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsOutput;
    use aws_sdk_dynamodb::types::error::TransactionCanceledException;
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};

    /// A store whose client answers by `rules`, in order, without the SDK's retries.
    pub(crate) fn mock_store(rules: &[&Rule]) -> DynamoStore {
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::Sequential, rules, |c| c
            .retry_config(RetryConfig::disabled()));
        DynamoStore::new(client, "fulfillment")
    }

    fn cancelled(codes: &[&str]) -> TransactWriteItemsError {
        let mut e = TransactionCanceledException::builder();
        for code in codes {
            e = e.cancellation_reasons(CancellationReason::builder().code(*code).build());
        }
        TransactWriteItemsError::TransactionCanceledException(e.build())
    }

    fn cancelled_once(codes: &'static [&'static str]) -> Rule {
        mock!(Client::transact_write_items).then_error(move || cancelled(codes))
    }

    #[tokio::test]
    async fn a_transaction_that_ran_into_another_is_tried_again() {
        let conflict = cancelled_once(&["None", "TransactionConflict"]);
        let done = mock!(Client::transact_write_items)
            .then_output(|| TransactWriteItemsOutput::builder().build());
        let store = mock_store(&[&conflict, &done]);
        assert!(matches!(store.transact(vec![]).await, Ok(Transacted::Done)));
    }

    #[tokio::test]
    async fn a_transaction_that_keeps_conflicting_is_transient() {
        let conflicts = mock!(Client::transact_write_items)
            .sequence()
            .error(|| cancelled(&["TransactionConflict"]))
            .repeatedly()
            .build();
        let err = mock_store(&[&conflicts])
            .transact(vec![])
            .await
            .err()
            .expect("gives up");
        assert!(err.is_transient(), "{err:?}");
        assert_eq!(conflicts.num_calls(), TRANSACTION_ATTEMPTS as usize);
    }

    #[tokio::test]
    async fn a_failed_condition_is_left_to_the_caller() {
        let failed_condition = cancelled_once(&["None", CONDITION_FAILED]);
        let store = mock_store(&[&failed_condition]);
        let Ok(Transacted::Refused(reasons)) = store.transact(vec![]).await else {
            panic!("refused, with the reasons");
        };
        assert!(!failed(&reasons, 0) && failed(&reasons, 1));
    }

    #[tokio::test]
    async fn an_invalid_transaction_is_not_transient() {
        let invalid = cancelled_once(&["ValidationError"]);
        let err = mock_store(&[&invalid]).transact(vec![]).await.err();
        assert!(matches!(err, Some(StoreError::Internal(_))), "{err:?}");
    }
}
