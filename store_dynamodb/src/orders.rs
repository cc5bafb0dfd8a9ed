//! `OrderRepository` on DynamoDB. Each write is one conditional `PutItem` or `UpdateItem` whose
//! condition is the contract (insert if absent, move status only to a later one, record a
//! decision only if none is), and whose answer is the order afterwards: the new item when the
//! condition held, the old one (`ALL_OLD`) when it did not.
//!
//! The status rule is `OrderStatus::can_move_to`, turned into the condition
//! `status IN (every status that may move to the target)`, so the two cannot disagree. Every
//! write that sets the status also records the event in the item's outbox
//! ([`record_reached`], `outbox.rs`), in the same request.
//!
//! Pending approvals come from the sparse `pending-approvals` index, which DynamoDB updates
//! after the write (eventually consistent, typically well under a second). So each candidate is
//! read again, consistently, and only orders still awaiting a decision are listed, with the
//! token parked now: a decided or re-parked order is never shown stale. An order parked in the
//! last moment may be missing from the list until the index catches up; the operator's next
//! look finds it.

use super::codec::{Fields, Item, json, n, s, ts};
use super::created::created_shard;
use super::outbox::{new_order_outbox, record_reached};
use super::table::{
    APPROVAL_QUEUE, APPROVAL_REQUESTED_AT, APPROVAL_SHARDS, CREATED_SHARD, INCIDENT_QUEUE,
    INCIDENT_SINCE, LIST_SHARD, OPEN, OPEN_INCIDENTS_INDEX, OWNER_SHARD, OWNER_SHARDS,
    PARTITION_KEY, PENDING_APPROVALS_INDEX, approval_queue, approval_queue_of, list_shard,
    owner_shard, prefix, shard_of,
};
use super::{DynamoStore, Written, error::sdk};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use store::domain::*;
use store::error::StoreError;
use store::ports::{ApprovalRepository, IncidentRepository, OrderListing, OrderRecords};
use store::ports::{
    CancelPlan, CancelRequested, Created, Decided, DecisionPlan, Expiry, FIND_EXAMINED,
    OrderFilter, Page, PendingApproval, QueueCursor, Resolved, StatusCounts, warn_if_other_charge,
};

pub(crate) fn order_pk(id: &OrderId) -> String {
    format!("{}{id}", prefix::ORDER)
}

/// The attributes of an open incident, removed together when it closes (`incident_since` is
/// also the `open-incidents` index's range key, `incident_queue` its hash key).
const INCIDENT_ATTRIBUTES: [&str; 6] = [
    INCIDENT_QUEUE,
    INCIDENT_SINCE,
    "incident_step",
    "incident_error",
    "incident_cause",
    "incident_attempts",
];

/// `, #a, #b…`: the incident's attributes, to append to a `REMOVE` clause.
fn remove_incident() -> String {
    INCIDENT_ATTRIBUTES
        .iter()
        .map(|a| format!(", #{a}"))
        .collect()
}

/// Adds to a `SET` clause the recording of `failure` unless the order has one: the first
/// failure, the one that started the compensation, is kept.
fn keep_first_failure(set: &mut String, values: &mut Item, failure: Failure) {
    set.push_str(
        ", #failure_error = if_not_exists(#failure_error, :failure_error), \
         #failure_cause = if_not_exists(#failure_cause, :failure_cause)",
    );
    values.insert(":failure_error".to_owned(), s(failure.error));
    values.insert(":failure_cause".to_owned(), s(failure.cause));
}

/// The operators' actions: a list of JSON strings, appended to with `list_append`.
fn actions_from(item: &Item) -> Result<Vec<OperatorAction>, StoreError> {
    let Some(value) = item.get("actions") else {
        return Ok(Vec::new());
    };
    let bad = |e: String| StoreError::Internal(format!("order with unreadable actions: {e}"));
    value
        .as_l()
        .map_err(|_| bad("not a list".to_owned()))?
        .iter()
        .map(|a| {
            let text = a.as_s().map_err(|_| bad("not a string".to_owned()))?;
            serde_json::from_str(text).map_err(|e| bad(e.to_string()))
        })
        .collect()
}

fn action_list(action: &OperatorAction) -> Result<AttributeValue, StoreError> {
    Ok(AttributeValue::L(vec![json(action)?]))
}

fn decision_str(d: Decision) -> &'static str {
    match d {
        Decision::Approve => "approve",
        Decision::Reject => "reject",
    }
}

fn new_order_item(order: &NewOrder, now: DateTime<Utc>) -> Result<Item, StoreError> {
    let mut item = HashMap::from([
        (PARTITION_KEY.to_owned(), s(order_pk(&order.order_id))),
        ("order_id".to_owned(), s(order.order_id.as_str())),
        ("customer_id".to_owned(), s(&order.customer_id)),
        ("items".to_owned(), json(&order.items)?),
        ("currency".to_owned(), s(&order.currency)),
        ("payment_method".to_owned(), s(&order.payment_method)),
        (
            "shipping_address".to_owned(),
            json(&order.shipping_address)?,
        ),
        ("amount_cents".to_owned(), n(order.amount_cents)),
        (
            "requires_approval".to_owned(),
            AttributeValue::Bool(order.requires_approval),
        ),
        ("body_hash".to_owned(), s(&order.body_hash)),
        ("created_at".to_owned(), ts(order.created_at)),
        (
            CREATED_SHARD.to_owned(),
            created_shard(prefix::ORDER, order.order_id.as_str(), order.created_at),
        ),
        ("status".to_owned(), s(OrderStatus::Accepted.as_str())),
        ("updated_at".to_owned(), ts(now)),
    ]);
    let shard = shard_of(order.order_id.as_str());
    item.insert(LIST_SHARD.to_owned(), s(list_shard(shard)));
    item.extend(new_order_outbox(&order.order_id, now));
    if let Some(owner) = &order.owner {
        item.insert("owner".to_owned(), s(owner));
        item.insert(
            OWNER_SHARD.to_owned(),
            s(owner_shard(owner, shard % OWNER_SHARDS)),
        );
    }
    Ok(item)
}

fn order_from(item: &Item) -> Result<Order, StoreError> {
    let f = Fields::of(item);
    let status = f.s("status")?;
    let status = OrderStatus::parse(status)
        .ok_or_else(|| StoreError::Internal(format!("order with unknown status {status}")))?;
    let failure = match f.opt_string("failure_error")? {
        Some(error) => Some(Failure {
            error,
            cause: f.opt_string("failure_cause")?.unwrap_or_default(),
        }),
        None => None,
    };
    let approval = match f.opt_ts("approval_requested_at")? {
        Some(requested_at) => Some(Approval {
            requested_at,
            deadline: f.opt_ts("approval_deadline")?,
            task_token: f.opt_string("approval_task_token")?,
            decision: match f.opt_s("approval_decision")? {
                None => None,
                Some("approve") => Some(Decision::Approve),
                Some("reject") => Some(Decision::Reject),
                Some(other) => {
                    return Err(StoreError::Internal(format!(
                        "order with unknown decision {other}"
                    )));
                }
            },
            decided_by: f.opt_string("approval_decided_by")?,
            decided_at: f.opt_ts("approval_decided_at")?,
            reason: f.opt_string("approval_reason")?,
        }),
        None => None,
    };
    Ok(Order {
        new: NewOrder {
            order_id: f.order_id("order_id")?,
            customer_id: f.string("customer_id")?,
            items: f.json("items")?,
            currency: f.string("currency")?,
            payment_method: f.string("payment_method")?,
            shipping_address: f.json("shipping_address")?,
            amount_cents: f.n("amount_cents")?,
            requires_approval: f.bool("requires_approval")?,
            body_hash: f.string("body_hash")?,
            owner: f.opt_string("owner")?,
            created_at: f.ts("created_at")?,
        },
        status,
        execution_arn: f.opt_string("execution_arn")?,
        charge_id: f.opt_string("charge_id")?,
        charged_at: f.opt_ts("charged_at")?,
        refund: match f.opt_string("refund_id")? {
            Some(refund_id) => Some(RefundRecord {
                refund_id,
                amount_cents: f.n("refund_amount_cents")?,
                refunded_at: f.ts("refunded_at")?,
            }),
            None => None,
        },
        failure,
        approval,
        incident: match f.opt_ts(INCIDENT_SINCE)? {
            Some(since) => Some(Incident {
                step: f.string("incident_step")?,
                error: f.string("incident_error")?,
                cause: f.opt_string("incident_cause")?.unwrap_or_default(),
                attempts: u32::try_from(f.n("incident_attempts")?)
                    .map_err(|_| StoreError::Internal("incident attempts out of range".into()))?,
                since,
            }),
            None => None,
        },
        actions: actions_from(item)?,
        cancellation: f.opt_json("cancellation")?,
        shipping_started_at: f.opt_ts("shipping_started_at")?,
        updated_at: f.ts("updated_at")?,
    })
}

/// `#status IN (:from0, …)` over `from`, with its values added to `values`; `None` when no
/// status qualifies.
fn status_in(from: &[OrderStatus], values: &mut Item) -> Option<String> {
    let placeholders: Vec<String> = from
        .iter()
        .enumerate()
        .map(|(i, status)| {
            values.insert(format!(":from{i}"), s(status.as_str()));
            format!(":from{i}")
        })
        .collect();
    (!placeholders.is_empty()).then(|| format!("#status IN ({})", placeholders.join(", ")))
}

/// An order whose condition held, or the order as it is when it did not.
enum Change {
    Applied(Order),
    Unchanged(Order),
}

impl Change {
    fn into_order(self) -> Order {
        match self {
            Change::Applied(order) | Change::Unchanged(order) => order,
        }
    }
}

impl DynamoStore {
    /// Updates the order if it exists and `condition` holds. `NotFound` when there is no order.
    async fn change_order(
        &self,
        id: &OrderId,
        update: &str,
        condition: &str,
        values: Item,
    ) -> Result<Change, StoreError> {
        let condition = format!("attribute_exists(#{PARTITION_KEY}) AND ({condition})");
        match self
            .update(order_pk(id), update, Some(&condition), values)
            .await?
        {
            Written::Done(item) => Ok(Change::Applied(order_from(&item)?)),
            Written::Refused(Some(item)) => Ok(Change::Unchanged(order_from(&item)?)),
            Written::Refused(None) => Err(StoreError::NotFound(format!("order {id}"))),
        }
    }

    async fn existing_order(&self, id: &OrderId) -> Result<Order, StoreError> {
        self.get(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("order {id}")))
    }
}

impl DynamoStore {
    /// One page of the approvals' shard `shard` (eventually consistent index), the entries
    /// after `after` in request order, each order read again consistently: one decided,
    /// expired or moved on since is left out. Also, when the shard holds more, the position of
    /// the last entry read.
    async fn queue_page(
        &self,
        shard: u32,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<(Vec<PendingApproval>, Option<QueueCursor>), StoreError> {
        let queue = approval_queue(shard);
        let mut start = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(self.table())
                .index_name(PENDING_APPROVALS_INDEX)
                .expression_attribute_names(format!("#{APPROVAL_QUEUE}"), APPROVAL_QUEUE)
                .expression_attribute_values(":queue", s(&queue))
                .scan_index_forward(true)
                // At most one consistent batch read per page.
                .limit(i32::try_from(limit.clamp(1, 100)).unwrap_or(100))
                .set_exclusive_start_key(start.take());
            query = match after {
                // From the cursor's time on: a cursor is a position, not necessarily an entry.
                Some(c) => query
                    .key_condition_expression(format!(
                        "#{APPROVAL_QUEUE} = :queue AND #{APPROVAL_REQUESTED_AT} >= :at"
                    ))
                    .expression_attribute_names(
                        format!("#{APPROVAL_REQUESTED_AT}"),
                        APPROVAL_REQUESTED_AT,
                    )
                    .expression_attribute_values(":at", s(&c.at)),
                None => query.key_condition_expression(format!("#{APPROVAL_QUEUE} = :queue")),
            };
            let page = query.send().await.map_err(sdk("Query"))?;
            let position = |key: &Item| -> Result<QueueCursor, StoreError> {
                let f = Fields::of(key);
                let pk = f.string(PARTITION_KEY)?;
                let id = pk.strip_prefix(prefix::ORDER).unwrap_or(&pk);
                Ok(QueueCursor {
                    at: f.string(APPROVAL_REQUESTED_AT)?,
                    order_id: OrderId::parse(id).map_err(StoreError::Internal)?,
                })
            };
            let mut candidates = Vec::new();
            for key in page.items() {
                let at = position(key)?;
                if after.is_none_or(|c| &at > c) {
                    candidates.push(order_pk(&at.order_id));
                }
            }
            let more = page.last_evaluated_key.as_ref().map(position).transpose()?;
            // Entries all at the cursor (it was one of them): read on from the last.
            if candidates.is_empty() && more.is_some() {
                start = page.last_evaluated_key;
                continue;
            }
            let now = self.get_items(&candidates).await?;
            let mut items = Vec::new();
            for pk in &candidates {
                let Some(item) = now.get(pk) else { continue };
                let order = order_from(item)?;
                let Some(approval) = order.approval else {
                    continue;
                };
                if let (OrderStatus::AwaitingApproval, None, Some(task_token)) =
                    (order.status, approval.decision, approval.task_token)
                {
                    items.push(PendingApproval {
                        order_id: order.new.order_id,
                        amount_cents: order.new.amount_cents,
                        currency: order.new.currency,
                        requested_at: approval.requested_at,
                        deadline: approval.deadline,
                        task_token,
                    });
                }
            }
            return Ok((items, more));
        }
    }
}

impl DynamoStore {
    /// How many entries `index` holds under the hash key `hash_key` = `value`: a `Select=COUNT`
    /// query, its pages followed to the end (each reads at most 1 MB of the index's keys).
    async fn count_in_index(
        &self,
        index: &str,
        hash_key: &str,
        value: String,
    ) -> Result<u64, StoreError> {
        let (mut count, mut start) = (0, None);
        loop {
            let page = self
                .client
                .query()
                .table_name(self.table())
                .index_name(index)
                .key_condition_expression("#key = :value")
                .expression_attribute_names("#key", hash_key)
                .expression_attribute_values(":value", s(value.clone()))
                .select(Select::Count)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk("Query"))?;
            count += u64::try_from(page.count()).unwrap_or_default();
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(count);
            }
        }
    }
}

/// How often `decide` and `request_cancel` try again when the order changed between their read
/// and their write (a token re-parked, another decision, a cancellation); each try reads the
/// order as the refusal found it.
const CONDITIONAL_ATTEMPTS: u32 = 5;

impl DynamoStore {
    /// Puts the order unless its id exists, with its execution's ARN.
    async fn insert(&self, order: NewOrder, execution_arn: &str) -> Result<Created, StoreError> {
        let mut item = new_order_item(&order, Utc::now())?;
        item.insert("execution_arn".to_owned(), s(execution_arn));
        match self.put_new(item).await? {
            Written::Done(item) => Ok(Created::New(order_from(&item)?)),
            Written::Refused(Some(item)) => Ok(Created::Existing(order_from(&item)?)),
            Written::Refused(None) => Err(StoreError::Internal(format!(
                "order {} both exists and does not",
                order.order_id
            ))),
        }
    }
}

#[async_trait]
impl OrderRecords for DynamoStore {
    async fn create(&self, order: NewOrder, execution_arn: &str) -> Result<Created, StoreError> {
        self.insert(order, execution_arn).await
    }

    async fn get(&self, id: &OrderId) -> Result<Option<Order>, StoreError> {
        self.get_item(order_pk(id))
            .await?
            .as_ref()
            .map(order_from)
            .transpose()
    }

    async fn record_charge(&self, id: &OrderId, charge: &Charge) -> Result<Order, StoreError> {
        let values = HashMap::from([
            (":charge_id".to_owned(), s(&charge.charge_id)),
            (":charged_at".to_owned(), ts(charge.created_at)),
            (":now".to_owned(), ts(Utc::now())),
        ]);
        let order = self
            .change_order(
                id,
                "SET #charge_id = :charge_id, #charged_at = :charged_at, #updated_at = :now",
                "attribute_not_exists(#charge_id)",
                values,
            )
            .await?
            .into_order();
        warn_if_other_charge(&order, &charge.charge_id);
        Ok(order)
    }

    async fn record_refund(&self, id: &OrderId, refund: &Refund) -> Result<Order, StoreError> {
        let values = HashMap::from([
            (":refund_id".to_owned(), s(&refund.refund_id)),
            (":refund_amount_cents".to_owned(), n(refund.amount_cents)),
            (":refunded_at".to_owned(), ts(refund.created_at)),
            (":now".to_owned(), ts(Utc::now())),
        ]);
        Ok(self
            .change_order(
                id,
                "SET #refund_id = :refund_id, #refund_amount_cents = :refund_amount_cents, \
                 #refunded_at = :refunded_at, #updated_at = :now",
                "attribute_not_exists(#refund_id)",
                values,
            )
            .await?
            .into_order())
    }

    /// Leaving `AWAITING_APPROVAL` also leaves the operators' queue.
    async fn advance(
        &self,
        id: &OrderId,
        to: OrderStatus,
        failure: Option<Failure>,
    ) -> Result<Order, StoreError> {
        let from: Vec<OrderStatus> = OrderStatus::ALL
            .into_iter()
            .filter(|s| s.can_move_to(to))
            .collect();
        let mut values = HashMap::from([
            (":to".to_owned(), s(to.as_str())),
            (":now".to_owned(), ts(Utc::now())),
        ]);
        let Some(condition) = status_in(&from, &mut values) else {
            return self.existing_order(id).await;
        };
        let mut set = "SET #status = :to, #updated_at = :now".to_owned();
        record_reached(&mut set, &mut values, to, id);
        if let Some(failure) = failure.filter(|_| to.is_compensation()) {
            keep_first_failure(&mut set, &mut values, failure);
        }
        let closes = if to.is_final() {
            remove_incident()
        } else {
            String::new()
        };
        let update = format!("{set} REMOVE #{APPROVAL_QUEUE}{closes}");
        Ok(self
            .change_order(id, &update, &condition, values)
            .await?
            .into_order())
    }

    async fn start_shipment(&self, id: &OrderId, at: DateTime<Utc>) -> Result<Order, StoreError> {
        let mut values = HashMap::from([
            (":at".to_owned(), ts(at)),
            (":now".to_owned(), ts(Utc::now())),
        ]);
        let undoing: Vec<OrderStatus> = OrderStatus::ALL
            .into_iter()
            .filter(|s| s.is_compensation())
            .collect();
        let undoing = status_in(&undoing, &mut values).expect("compensation statuses exist");
        let condition = format!(
            "attribute_not_exists(#shipping_started_at) AND attribute_not_exists(#cancellation) \
             AND NOT ({undoing})"
        );
        Ok(self
            .change_order(
                id,
                "SET #shipping_started_at = :at, #updated_at = :now",
                &condition,
                values,
            )
            .await?
            .into_order())
    }
}

#[async_trait]
impl ApprovalRepository for DynamoStore {
    /// Parks while the order has not passed `AWAITING_APPROVAL` and no decision is recorded,
    /// and puts it in the operators' queue. After a decision the order comes back unchanged,
    /// still carrying the decision: a worker that got a fresh token after a crash (the decision
    /// was recorded, the answer to the engine lost) can read it there and answer with the new
    /// token.
    async fn park_approval(
        &self,
        id: &OrderId,
        task_token: &str,
        at: DateTime<Utc>,
        deadline: Option<DateTime<Utc>>,
    ) -> Result<Order, StoreError> {
        let awaiting = OrderStatus::AwaitingApproval;
        let from: Vec<OrderStatus> = OrderStatus::ALL
            .into_iter()
            .filter(|s| *s == awaiting || s.can_move_to(awaiting))
            .collect();
        let mut values = HashMap::from([
            (":awaiting".to_owned(), s(awaiting.as_str())),
            (":token".to_owned(), s(task_token)),
            (":at".to_owned(), ts(at)),
            (":now".to_owned(), ts(Utc::now())),
            (":pending".to_owned(), s(approval_queue_of(id.as_str()))),
        ]);
        let statuses = status_in(&from, &mut values).expect("statuses lead to AWAITING_APPROVAL");
        // The last clause skips a write that would change nothing (the same token again).
        let condition = format!(
            "attribute_not_exists(#approval_decision) AND attribute_not_exists(#cancellation) \
             AND {statuses} AND (#status <> :awaiting \
             OR attribute_not_exists(#approval_task_token) OR #approval_task_token <> :token)"
        );
        let mut update = format!(
            "SET #status = :awaiting, #approval_task_token = :token, \
             #approval_requested_at = if_not_exists(#approval_requested_at, :at), \
             #updated_at = :now, #{APPROVAL_QUEUE} = :pending"
        );
        // A re-park (already awaiting, a new token) keeps the time first reached.
        record_reached(&mut update, &mut values, awaiting, id);
        if let Some(deadline) = deadline {
            update.push_str(", #approval_deadline = if_not_exists(#approval_deadline, :deadline)");
            values.insert(":deadline".to_owned(), ts(deadline));
        }
        Ok(self
            .change_order(id, &update, &condition, values)
            .await?
            .into_order())
    }

    /// Records the decision and clears the parked token, conditionally on the very token it
    /// read, so a decision made or a token parked in between is noticed and decided again.
    /// An approval also moves the order to `APPROVED`; a rejection leaves the status to the
    /// compensation it starts.
    async fn decide(
        &self,
        id: &OrderId,
        decision: Decision,
        by: &str,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Decided, StoreError> {
        let mut order = self.existing_order(id).await?;
        for _ in 0..CONDITIONAL_ATTEMPTS {
            let (token, status) = match DecisionPlan::new(order, decision, at) {
                DecisionPlan::Answer(answer) => return Ok(*answer),
                DecisionPlan::Record { token, status } => (token, status),
            };
            let mut set = "SET #approval_decision = :decision, #approval_decided_by = :by, \
                           #approval_decided_at = :at, #status = :status, #updated_at = :now"
                .to_owned();
            let mut values = HashMap::from([
                (":decision".to_owned(), s(decision_str(decision))),
                (":by".to_owned(), s(by)),
                (":at".to_owned(), ts(at)),
                (":status".to_owned(), s(status.as_str())),
                (":now".to_owned(), ts(Utc::now())),
                (
                    ":awaiting".to_owned(),
                    s(OrderStatus::AwaitingApproval.as_str()),
                ),
                (":token".to_owned(), s(&token)),
            ]);
            if let Some(reason) = reason {
                set.push_str(", #approval_reason = :reason");
                values.insert(":reason".to_owned(), s(reason));
            }
            // A rejection leaves the status as it is (awaiting): no event.
            if status != OrderStatus::AwaitingApproval {
                record_reached(&mut set, &mut values, status, id);
            }
            let update = format!("{set} REMOVE #approval_task_token, #{APPROVAL_QUEUE}");
            let condition = "attribute_not_exists(#approval_decision) AND #status = :awaiting \
                             AND #approval_task_token = :token";
            match self.change_order(id, &update, condition, values).await? {
                Change::Applied(order) => {
                    return Ok(Decided::Applied {
                        order,
                        task_token: token,
                    });
                }
                Change::Unchanged(now) => order = now,
            }
        }
        Err(StoreError::Unavailable(format!(
            "order {id} kept changing while a decision was recorded"
        )))
    }

    /// Conditional on the order as judged (its status and parked token, no cancellation, no
    /// shipment begun), so a change in between is noticed and judged again.
    async fn request_cancel(
        &self,
        id: &OrderId,
        request: &Cancellation,
    ) -> Result<CancelRequested, StoreError> {
        let mut order = self.existing_order(id).await?;
        for _ in 0..CONDITIONAL_ATTEMPTS {
            let status = order.status;
            let token = match CancelPlan::new(order) {
                CancelPlan::Answer(answer) => return Ok(*answer),
                CancelPlan::Record { token } => token,
            };
            let mut values = HashMap::from([
                (":cancellation".to_owned(), json(request)?),
                (":status".to_owned(), s(status.as_str())),
                (":now".to_owned(), ts(Utc::now())),
            ]);
            let mut update = "SET #cancellation = :cancellation, #updated_at = :now".to_owned();
            let mut condition = "attribute_not_exists(#cancellation) \
                                 AND attribute_not_exists(#shipping_started_at) \
                                 AND #status = :status"
                .to_owned();
            match &token {
                Some(token) => {
                    update.push_str(&format!(" REMOVE #approval_task_token, #{APPROVAL_QUEUE}"));
                    condition.push_str(" AND #approval_task_token = :token");
                    values.insert(":token".to_owned(), s(token));
                }
                // A token parked in between (a re-issued task) must be taken too.
                None if status == OrderStatus::AwaitingApproval => {
                    condition.push_str(" AND attribute_not_exists(#approval_task_token)");
                }
                None => {}
            }
            match self.change_order(id, &update, &condition, values).await? {
                Change::Applied(order) => {
                    return Ok(CancelRequested::Recorded {
                        order,
                        task_token: token,
                    });
                }
                Change::Unchanged(now) => order = now,
            }
        }
        Err(StoreError::Unavailable(format!(
            "order {id} kept changing while its cancellation was recorded"
        )))
    }

    /// Of a decision and an expiry racing, the condition lets one write through.
    async fn expire_approval(
        &self,
        id: &OrderId,
        task_token: &str,
        at: DateTime<Utc>,
        failure: Failure,
    ) -> Result<Expiry, StoreError> {
        let mut values = HashMap::from([
            (
                ":compensating".to_owned(),
                s(OrderStatus::Compensating.as_str()),
            ),
            (
                ":awaiting".to_owned(),
                s(OrderStatus::AwaitingApproval.as_str()),
            ),
            (":token".to_owned(), s(task_token)),
            (":at".to_owned(), ts(at)),
            (":now".to_owned(), ts(Utc::now())),
        ]);
        let mut set = "SET #status = :compensating, #updated_at = :now".to_owned();
        record_reached(&mut set, &mut values, OrderStatus::Compensating, id);
        keep_first_failure(&mut set, &mut values, failure);
        let update = format!("{set} REMOVE #approval_task_token, #{APPROVAL_QUEUE}");
        let condition = "#status = :awaiting AND attribute_not_exists(#approval_decision) \
                         AND #approval_task_token = :token AND #approval_deadline <= :at";
        Ok(
            match self.change_order(id, &update, condition, values).await? {
                Change::Applied(order) => Expiry::Expired(order),
                Change::Unchanged(order) => Expiry::Kept(order),
            },
        )
    }

    /// The shards of the index, merged in request order: each shard's next entries after the
    /// cursor, up to the first position where a shard may hold more than was read.
    async fn pending_approvals(
        &self,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<PendingApproval>, StoreError> {
        let limit = limit.clamp(1, 100);
        let shards = futures_util::future::try_join_all(
            (0..self.approval_shards()).map(|shard| self.queue_page(shard, after, limit)),
        )
        .await?;
        // Past the earliest place a shard stopped reading, an entry of that shard may be missing.
        let horizon = shards.iter().filter_map(|(_, more)| more.clone()).min();
        let mut items: Vec<(QueueCursor, PendingApproval)> = shards
            .into_iter()
            .flat_map(|(items, _)| items)
            .map(|p| (QueueCursor::after_approval(&p), p))
            .filter(|(at, _)| horizon.as_ref().is_none_or(|h| at <= h))
            .collect();
        items.sort_by(|a, b| a.0.cmp(&b.0));
        let next = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|(at, _)| at.to_string())
        } else {
            horizon.map(|h| h.to_string())
        };
        Ok(Page {
            items: items.into_iter().map(|(_, p)| p).collect(),
            next,
        })
    }

    fn approval_shards(&self) -> u32 {
        APPROVAL_SHARDS
    }

    async fn pending_approvals_in(
        &self,
        shard: u32,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<PendingApproval>, StoreError> {
        let (items, more) = self.queue_page(shard, after, limit).await?;
        Ok(Page {
            items,
            next: more.map(|m| m.to_string()),
        })
    }
}

#[async_trait]
impl IncidentRepository for DynamoStore {
    async fn record_incident(
        &self,
        id: &OrderId,
        incident: &Incident,
        failure: Option<Failure>,
    ) -> Result<Order, StoreError> {
        let failed = OrderStatus::CompensationFailed;
        let from: Vec<OrderStatus> = OrderStatus::ALL
            .into_iter()
            .filter(|s| s.rank() <= failed.rank())
            .collect();
        let mut values = HashMap::from([
            (":to".to_owned(), s(failed.as_str())),
            (":now".to_owned(), ts(Utc::now())),
            (":step".to_owned(), s(&incident.step)),
            (":error".to_owned(), s(&incident.error)),
            (":cause".to_owned(), s(&incident.cause)),
            (":attempts".to_owned(), n(u64::from(incident.attempts))),
            (":since".to_owned(), ts(incident.since)),
            (":open".to_owned(), s(OPEN)),
        ]);
        let condition =
            status_in(&from, &mut values).expect("statuses lead to COMPENSATION_FAILED");
        let mut set = format!(
            "SET #status = :to, #updated_at = :now, #incident_step = :step, \
             #incident_error = :error, #incident_cause = :cause, \
             #incident_attempts = :attempts, \
             #{INCIDENT_SINCE} = if_not_exists(#{INCIDENT_SINCE}, :since), \
             #{INCIDENT_QUEUE} = :open"
        );
        record_reached(&mut set, &mut values, failed, id);
        if let Some(failure) = failure {
            keep_first_failure(&mut set, &mut values, failure);
        }
        let update = format!("{set} REMOVE #{APPROVAL_QUEUE}");
        Ok(self
            .change_order(id, &update, &condition, values)
            .await?
            .into_order())
    }

    async fn record_action(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Order, StoreError> {
        let values = HashMap::from([
            (":action".to_owned(), action_list(action)?),
            (":none".to_owned(), AttributeValue::L(Vec::new())),
            (":now".to_owned(), ts(Utc::now())),
        ]);
        Ok(self
            .change_order(
                id,
                "SET #actions = list_append(if_not_exists(#actions, :none), :action), \
                 #updated_at = :now",
                &format!("attribute_exists(#{PARTITION_KEY})"),
                values,
            )
            .await?
            .into_order())
    }

    async fn resolve_incident(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Resolved, StoreError> {
        let cancelled = OrderStatus::Cancelled;
        let mut values = HashMap::from([
            (":to".to_owned(), s(cancelled.as_str())),
            (
                ":failed".to_owned(),
                s(OrderStatus::CompensationFailed.as_str()),
            ),
            (":action".to_owned(), action_list(action)?),
            (":none".to_owned(), AttributeValue::L(Vec::new())),
            (":now".to_owned(), ts(Utc::now())),
        ]);
        let mut set = "SET #status = :to, #updated_at = :now, \
                       #actions = list_append(if_not_exists(#actions, :none), :action)"
            .to_owned();
        record_reached(&mut set, &mut values, cancelled, id);
        let update = format!("{set} REMOVE #{APPROVAL_QUEUE}{}", remove_incident());
        let condition = format!("#status = :failed AND attribute_exists(#{INCIDENT_SINCE})");
        Ok(
            match self.change_order(id, &update, &condition, values).await? {
                Change::Applied(order) => Resolved::Now(order),
                Change::Unchanged(order) => Resolved::NotOpen(order),
            },
        )
    }

    /// From the sparse `open-incidents` index (eventually consistent), each order read again
    /// consistently: one whose incident closed since is left out.
    async fn open_incidents(
        &self,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        let start = after.map(|c| {
            HashMap::from([
                (INCIDENT_QUEUE.to_owned(), s(OPEN)),
                (INCIDENT_SINCE.to_owned(), s(&c.at)),
                (PARTITION_KEY.to_owned(), s(order_pk(&c.order_id))),
            ])
        });
        let page = self
            .client
            .query()
            .table_name(self.table())
            .index_name(OPEN_INCIDENTS_INDEX)
            .key_condition_expression(format!("#{INCIDENT_QUEUE} = :open"))
            .expression_attribute_names(format!("#{INCIDENT_QUEUE}"), INCIDENT_QUEUE)
            .expression_attribute_values(":open", s(OPEN))
            .scan_index_forward(true)
            .limit(i32::try_from(limit.clamp(1, 100)).unwrap_or(100))
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(sdk("Query"))?;
        let candidates: Vec<String> = page
            .items()
            .iter()
            .map(|item| Fields::of(item).string(PARTITION_KEY))
            .collect::<Result<_, _>>()?;
        let now = self.get_items(&candidates).await?;
        let mut items = Vec::new();
        for pk in &candidates {
            let Some(item) = now.get(pk) else { continue };
            let order = order_from(item)?;
            if order.incident.is_some() {
                items.push(order);
            }
        }
        // The page goes on after the last order the index gave, kept or not.
        let next = match &page.last_evaluated_key {
            Some(key) => {
                let f = Fields::of(key);
                let pk = f.string(PARTITION_KEY)?;
                let id = pk.strip_prefix(prefix::ORDER).unwrap_or(&pk);
                Some(
                    QueueCursor {
                        at: f.string(INCIDENT_SINCE)?,
                        order_id: OrderId::parse(id).map_err(StoreError::Internal)?,
                    }
                    .to_string(),
                )
            }
            None => None,
        };
        Ok(Page { items, next })
    }
}

#[async_trait]
impl OrderListing for DynamoStore {
    async fn list_orders(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        let (items, next) = match since {
            None => self.scan_prefix(prefix::ORDER, after, limit).await?,
            Some(since) => {
                self.list_created(prefix::ORDER, since, after, limit)
                    .await?
            }
        };
        let items = items.iter().map(order_from).collect::<Result<_, _>>()?;
        Ok(Page { items, next })
    }

    /// Merged pages of the owner's (or every order's) index shards (`newest.rs`), each order
    /// read again consistently and tested against the filter, until the page is full or
    /// [`FIND_EXAMINED`] entries were read.
    async fn find_orders(
        &self,
        filter: &OrderFilter,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        let limit = limit.clamp(1, 100);
        let mut start = filter.start(after);
        let (mut items, mut examined) = (Vec::new(), 0);
        loop {
            let wanted = if filter.tests_after_reading() {
                100
            } else {
                limit
            };
            let (positions, next) = self
                .newest_positions(
                    filter.owner.as_deref(),
                    start.as_ref(),
                    filter.created_since,
                    wanted,
                )
                .await?;
            let pks: Vec<String> = positions.iter().map(|p| order_pk(&p.order_id)).collect();
            let now = self.get_items(&pks).await?;
            for (position, pk) in positions.iter().zip(&pks) {
                examined += 1;
                start = Some(position.clone());
                let Some(item) = now.get(pk) else { continue };
                let order = order_from(item)?;
                if filter.selects(&order) {
                    items.push(order);
                    if items.len() == limit as usize {
                        break;
                    }
                }
            }
            let full = items.len() == limit as usize;
            if full || next.is_none() || examined >= FIND_EXAMINED {
                // Full: below the last order; else below what the shards were read down to.
                let next = if full { start } else { next };
                return Ok(Page {
                    items,
                    next: next.map(|n| n.to_string()),
                });
            }
            start = next;
        }
    }

    /// Counts only what the sparse indexes hold, which costs their size rather than the
    /// books': there is no index by status (and `orders-newest` projects keys only), so
    /// counting any other status would read every order. Every other status is `None`.
    ///
    /// - `AWAITING_APPROVAL`: the operators' queue, the `pending-approvals` index's every shard:
    ///   the orders awaiting a decision with a token parked. An awaiting order whose token a
    ///   rejection or a cancellation has just taken (its
    ///   compensation is about to move it on) is not counted.
    /// - `COMPENSATION_FAILED`: the open incidents, the `open-incidents` index (an order reaches
    ///   that status by its incident, and leaves it when the incident closes).
    ///
    /// The indexes are eventually consistent: a change of the last moment (typically well under
    /// a second) may not be counted yet.
    async fn count_by_status(&self) -> Result<StatusCounts, StoreError> {
        let awaiting =
            futures_util::future::try_join_all((0..self.approval_shards()).map(|shard| {
                self.count_in_index(
                    PENDING_APPROVALS_INDEX,
                    APPROVAL_QUEUE,
                    approval_queue(shard),
                )
            }));
        let failed = self.count_in_index(OPEN_INCIDENTS_INDEX, INCIDENT_QUEUE, OPEN.to_owned());
        let (awaiting, failed) = futures_util::future::try_join(awaiting, failed).await?;
        let mut counts = StatusCounts::uncounted();
        counts.0.insert(
            OrderStatus::AwaitingApproval,
            Some(awaiting.into_iter().sum()),
        );
        counts
            .0
            .insert(OrderStatus::CompensationFailed, Some(failed));
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::mock_store;
    use aws_sdk_dynamodb::Client;
    use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemOutput;
    use aws_sdk_dynamodb::operation::query::QueryOutput;
    use aws_smithy_mocks::mock;

    /// An order item as `park_approval` leaves it, then as `change` makes it.
    fn parked(id: &str, token: &str, change: &[(&str, AttributeValue)]) -> Item {
        let id = OrderId::parse(id).unwrap();
        let mut item = new_order_item(&testkit::new_order(&id), Utc::now()).unwrap();
        item.extend([
            ("status".to_owned(), s("AWAITING_APPROVAL")),
            ("approval_requested_at".to_owned(), ts(Utc::now())),
            ("approval_task_token".to_owned(), s(token)),
            (APPROVAL_QUEUE.to_owned(), s(approval_queue(0))),
        ]);
        for (name, value) in change {
            item.insert((*name).to_owned(), value.clone());
        }
        item
    }

    /// The index still lists an order decided since, and an older token of a re-parked one:
    /// the consistent re-read drops the first and shows the second's current token.
    #[tokio::test]
    async fn pending_approvals_show_the_orders_as_they_are_not_as_indexed() {
        let decided = parked(
            "decided",
            "token-d",
            &[
                ("status", s("APPROVED")),
                ("approval_decision", s("approve")),
            ],
        );
        let reparked = parked("reparked", "token-new", &[]);
        // What the KEYS_ONLY index holds: the table's key and the index's.
        let keys: Vec<Item> = [&decided, &reparked]
            .iter()
            .map(|item| {
                [PARTITION_KEY, APPROVAL_QUEUE, APPROVAL_REQUESTED_AT]
                    .iter()
                    .map(|k| ((*k).to_owned(), item[*k].clone()))
                    .collect()
            })
            .collect();
        let index = mock!(Client::query)
            .then_output(move || QueryOutput::builder().set_items(Some(keys.clone())).build());
        let now = mock!(Client::batch_get_item).then_output(move || {
            BatchGetItemOutput::builder()
                .responses("fulfillment", vec![decided.clone(), reparked.clone()])
                .build()
        });
        let store = mock_store(&[&index, &now]);
        let pending = store
            .pending_approvals_in(0, None, 10)
            .await
            .expect("pending");
        assert_eq!(pending.next, None);
        let shown: Vec<(&str, &str)> = pending
            .items
            .iter()
            .map(|p| (p.order_id.as_str(), p.task_token.as_str()))
            .collect();
        assert_eq!(shown, [("reparked", "token-new")]);
    }

    #[test]
    fn status_condition_follows_can_move_to() {
        for to in OrderStatus::ALL {
            let from: Vec<OrderStatus> = OrderStatus::ALL
                .into_iter()
                .filter(|s| s.can_move_to(to))
                .collect();
            let mut values = HashMap::new();
            let condition = status_in(&from, &mut values);
            let listed: Vec<&str> = values
                .values()
                .map(|v| v.as_s().unwrap().as_str())
                .collect();
            for s in OrderStatus::ALL {
                assert_eq!(
                    listed.contains(&s.as_str()),
                    s.can_move_to(to),
                    "{s:?} → {to:?}"
                );
            }
            assert_eq!(condition.is_none(), from.is_empty());
        }
    }
}
