//! `OrderRepository` on SQLite. Each write is a single conditional statement (the condition is
//! the contract: insert if absent, move status only to a higher rank, record a decision only if
//! none is recorded), inside the write's own savepoint of the writer's group transaction (which
//! holds the write lock), that also reads the row back, so the record returned is exactly the
//! one the write left.

use super::listing::Listing;
use super::{
    SqliteStore, get_json, get_opt_ts, get_ts, get_u64, now, savepoint, to_json, to_sql_u64, ts,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::sync::OnceLock;
use store::domain::*;
use store::error::StoreError;
use store::ports::{ApprovalRepository, IncidentRepository, OrderListing, OrderRecords};
use store::ports::{
    CancelPlan, CancelRequested, Created, Decided, DecisionPlan, Expiry, FIND_EXAMINED,
    OrderFilter, Page, PendingApproval, QueueCursor, Resolved, StatusCounts, warn_if_other_charge,
};

const SELECT_ORDER: &str = "SELECT order_id, customer_id, items, currency, payment_method, \
    shipping_address, amount_cents, requires_approval, body_hash, created_at, status, \
    execution_arn, failure_error, failure_cause, approval_requested_at, approval_task_token, \
    approval_decision, approval_decided_by, approval_decided_at, approval_reason, updated_at, \
    charge_id, charged_at, refund_id, refund_amount_cents, refunded_at, owner, incident_step, \
    incident_error, incident_cause, incident_attempts, incident_since, actions, \
    approval_deadline, cancellation, shipping_started_at FROM orders";

/// `OrderStatus::rank` of the `status` column as an SQL expression, generated from the Rust
/// rule so the two can never disagree.
fn rank_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        let arms: String = OrderStatus::ALL
            .iter()
            .map(|s| format!(" WHEN '{}' THEN {}", s.as_str(), s.rank()))
            .collect();
        format!("(CASE status{arms} END)")
    })
}

/// The `SET` clauses that record the failure `?4`, `?5` unless the order has one (the first,
/// the one that started the compensation, is kept). SET expressions all see the row as it was,
/// so both columns test the old error.
const KEEP_FIRST_FAILURE: &str = "\
    failure_error = CASE WHEN failure_error IS NULL THEN ?4 ELSE failure_error END, \
    failure_cause = CASE WHEN failure_error IS NULL THEN ?5 ELSE failure_cause END";

/// The `SET` clauses that close an order's incident (a final status has none open).
const CLOSE_INCIDENT: &str = ", incident_step = NULL, incident_error = NULL, \
    incident_cause = NULL, incident_attempts = NULL, incident_since = NULL";

fn decision_str(d: Decision) -> &'static str {
    match d {
        Decision::Approve => "approve",
        Decision::Reject => "reject",
    }
}

fn order_from_row(r: &Row) -> rusqlite::Result<Order> {
    let text = |idx: usize| r.get::<_, String>(idx);
    let order_id = OrderId::parse(&text(0)?).map_err(|e| super::bad_column(0, e))?;
    let status = text(10)?;
    let status = OrderStatus::parse(&status)
        .ok_or_else(|| super::bad_column(10, format!("unknown status {status}")))?;
    let failure = match r.get::<_, Option<String>>(12)? {
        Some(error) => Some(Failure {
            error,
            cause: r.get::<_, Option<String>>(13)?.unwrap_or_default(),
        }),
        None => None,
    };
    let approval = match get_opt_ts(r, 14)? {
        Some(requested_at) => Some(Approval {
            requested_at,
            deadline: get_opt_ts(r, 33)?,
            task_token: r.get(15)?,
            decision: match r.get::<_, Option<String>>(16)?.as_deref() {
                None => None,
                Some("approve") => Some(Decision::Approve),
                Some("reject") => Some(Decision::Reject),
                Some(other) => {
                    return Err(super::bad_column(16, format!("unknown decision {other}")));
                }
            },
            decided_by: r.get(17)?,
            decided_at: get_opt_ts(r, 18)?,
            reason: r.get(19)?,
        }),
        None => None,
    };
    Ok(Order {
        new: NewOrder {
            order_id,
            customer_id: text(1)?,
            items: get_json(r, 2)?,
            currency: text(3)?,
            payment_method: text(4)?,
            shipping_address: get_json(r, 5)?,
            amount_cents: get_u64(r, 6)?,
            requires_approval: r.get(7)?,
            body_hash: text(8)?,
            owner: r.get(26)?,
            created_at: get_ts(r, 9)?,
        },
        status,
        execution_arn: r.get(11)?,
        charge_id: r.get(21)?,
        charged_at: get_opt_ts(r, 22)?,
        refund: match r.get::<_, Option<String>>(23)? {
            Some(refund_id) => Some(RefundRecord {
                refund_id,
                amount_cents: get_u64(r, 24)?,
                refunded_at: get_ts(r, 25)?,
            }),
            None => None,
        },
        failure,
        approval,
        incident: match get_opt_ts(r, 31)? {
            Some(since) => Some(Incident {
                step: text(27)?,
                error: text(28)?,
                cause: text(29)?,
                attempts: r.get(30)?,
                since,
            }),
            None => None,
        },
        actions: get_json(r, 32)?,
        cancellation: match r.get::<_, Option<String>>(34)? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| super::bad_column(34, e))?),
            None => None,
        },
        shipping_started_at: get_opt_ts(r, 35)?,
        updated_at: get_ts(r, 20)?,
    })
}

fn load(conn: &Connection, id: &OrderId) -> Result<Option<Order>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{SELECT_ORDER} WHERE order_id = ?1"))?
        .query_row([id.as_str()], order_from_row)
        .optional()?)
}

fn load_existing(conn: &Connection, id: &OrderId) -> Result<Order, StoreError> {
    load(conn, id)?.ok_or_else(|| StoreError::NotFound(format!("order {id}")))
}

/// Runs one conditional `UPDATE` of an order (`?1` is the order id) and returns the order as it
/// is afterwards, whether or not the condition held.
async fn update_and_load(
    store: &SqliteStore,
    id: &OrderId,
    sql: String,
    values: Vec<rusqlite::types::Value>,
) -> Result<Order, StoreError> {
    let id = id.clone();
    store
        .write(move |conn| {
            let tx = savepoint(conn)?;
            let mut all = vec![rusqlite::types::Value::Text(id.as_str().to_owned())];
            all.extend(values);
            tx.prepare_cached(&sql)?
                .execute(rusqlite::params_from_iter(all))?;
            let order = load_existing(&tx, &id)?;
            tx.commit()?;
            Ok(order)
        })
        .await
}

/// Inserts the order unless its id exists, with its execution's ARN when known.
async fn insert(
    store: &SqliteStore,
    order: NewOrder,
    execution_arn: String,
) -> Result<Created, StoreError> {
    let items = to_json(&order.items)?;
    let address = to_json(&order.shipping_address)?;
    let amount = to_sql_u64(order.amount_cents, "amount")?;
    // A client waits on this write (the 202 is sent once it is durable).
    store
        .write_first(move |conn| {
            let tx = savepoint(conn)?;
            let created_at = ts(order.created_at);
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO orders (order_id, customer_id, items, currency, payment_method, \
                     shipping_address, amount_cents, requires_approval, body_hash, created_at, \
                     status, updated_at, execution_arn, owner) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?10, ?12, ?13) \
                     ON CONFLICT (order_id) DO NOTHING",
                )?
                .execute(params![
                    order.order_id.as_str(),
                    order.customer_id,
                    items,
                    order.currency,
                    order.payment_method,
                    address,
                    amount,
                    order.requires_approval,
                    order.body_hash,
                    created_at,
                    OrderStatus::Accepted.as_str(),
                    execution_arn,
                    order.owner,
                ])?;
            let stored = load_existing(&tx, &order.order_id)?;
            tx.commit()?;
            Ok(if inserted == 1 {
                Created::New(stored)
            } else {
                Created::Existing(stored)
            })
        })
        .await
}

#[async_trait]
impl OrderRecords for SqliteStore {
    async fn create(&self, order: NewOrder, execution_arn: &str) -> Result<Created, StoreError> {
        insert(self, order, execution_arn.to_owned()).await
    }

    async fn get(&self, id: &OrderId) -> Result<Option<Order>, StoreError> {
        let id = id.clone();
        self.read(move |conn| load(conn, &id)).await
    }

    async fn record_charge(&self, id: &OrderId, charge: &Charge) -> Result<Order, StoreError> {
        let sql = "UPDATE orders SET charge_id = ?2, charged_at = ?3, updated_at = ?4 \
                   WHERE order_id = ?1 AND charge_id IS NULL";
        let values = vec![
            charge.charge_id.clone().into(),
            ts(charge.created_at).into(),
            now().into(),
        ];
        let order = update_and_load(self, id, sql.to_owned(), values).await?;
        warn_if_other_charge(&order, &charge.charge_id);
        Ok(order)
    }

    async fn record_refund(&self, id: &OrderId, refund: &Refund) -> Result<Order, StoreError> {
        let sql = "UPDATE orders SET refund_id = ?2, refund_amount_cents = ?3, refunded_at = ?4, \
                   updated_at = ?5 WHERE order_id = ?1 AND refund_id IS NULL";
        let values = vec![
            refund.refund_id.clone().into(),
            to_sql_u64(refund.amount_cents, "refund amount")?.into(),
            ts(refund.created_at).into(),
            now().into(),
        ];
        update_and_load(self, id, sql.to_owned(), values).await
    }

    async fn advance(
        &self,
        id: &OrderId,
        to: OrderStatus,
        failure: Option<Failure>,
    ) -> Result<Order, StoreError> {
        let failure = failure.filter(|_| to.is_compensation());
        let (error, cause) = match failure {
            Some(f) => (Some(f.error), Some(f.cause)),
            None => (None, None),
        };
        let sql = format!(
            "UPDATE orders SET status = ?2, updated_at = ?3, {KEEP_FIRST_FAILURE}{} \
             WHERE order_id = ?1 AND {} < ?6",
            if to.is_final() { CLOSE_INCIDENT } else { "" },
            rank_sql()
        );
        let values = vec![
            to.as_str().to_owned().into(),
            now().into(),
            error.into(),
            cause.into(),
            i64::from(to.rank()).into(),
        ];
        update_and_load(self, id, sql, values).await
    }

    async fn start_shipment(&self, id: &OrderId, at: DateTime<Utc>) -> Result<Order, StoreError> {
        let sql = "UPDATE orders SET shipping_started_at = ?2, updated_at = ?3 \
                   WHERE order_id = ?1 AND shipping_started_at IS NULL AND cancellation IS NULL \
                   AND status NOT IN (?4, ?5, ?6)";
        let values = vec![
            ts(at).into(),
            now().into(),
            OrderStatus::Compensating.as_str().to_owned().into(),
            OrderStatus::Cancelled.as_str().to_owned().into(),
            OrderStatus::CompensationFailed.as_str().to_owned().into(),
        ];
        update_and_load(self, id, sql.to_owned(), values).await
    }
}

#[async_trait]
impl ApprovalRepository for SqliteStore {
    /// Parks while the order has not passed `AWAITING_APPROVAL` and no decision (and no
    /// cancellation) is recorded. After a decision the order comes back unchanged, still carrying the decision: a worker
    /// that got a fresh token after a crash (the decision was recorded, the answer to the
    /// engine lost) can read it there and answer with the new token.
    async fn park_approval(
        &self,
        id: &OrderId,
        task_token: &str,
        at: DateTime<Utc>,
        deadline: Option<DateTime<Utc>>,
    ) -> Result<Order, StoreError> {
        let sql = format!(
            "UPDATE orders SET status = ?2, approval_task_token = ?3, \
             approval_requested_at = COALESCE(approval_requested_at, ?4), updated_at = ?5, \
             approval_deadline = COALESCE(approval_deadline, ?7) \
             WHERE order_id = ?1 AND approval_decision IS NULL AND {rank} <= ?6 \
             AND cancellation IS NULL AND (status <> ?2 OR approval_task_token IS NOT ?3)",
            rank = rank_sql()
        );
        let awaiting = OrderStatus::AwaitingApproval;
        let values = vec![
            awaiting.as_str().to_owned().into(),
            task_token.to_owned().into(),
            ts(at).into(),
            now().into(),
            i64::from(awaiting.rank()).into(),
            deadline.map(ts).into(),
        ];
        update_and_load(self, id, sql, values).await
    }

    /// Records the decision and clears the parked token. An approval also moves the order to
    /// `APPROVED`; a rejection leaves the status to the compensation it starts.
    async fn decide(
        &self,
        id: &OrderId,
        decision: Decision,
        by: &str,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Decided, StoreError> {
        let id = id.clone();
        let by = by.to_owned();
        let reason = reason.map(str::to_owned);
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            let (token, status) = match DecisionPlan::new(load_existing(&tx, &id)?, decision, at) {
                DecisionPlan::Answer(answer) => return Ok(*answer),
                DecisionPlan::Record { token, status } => (token, status),
            };
            let changed = tx
                .prepare_cached(
                    "UPDATE orders SET approval_decision = ?2, approval_decided_by = ?3, \
                     approval_decided_at = ?4, approval_reason = ?5, approval_task_token = NULL, \
                     status = ?6, updated_at = ?7 \
                     WHERE order_id = ?1 AND approval_decision IS NULL AND status = ?8",
                )?
                .execute(params![
                    id.as_str(),
                    decision_str(decision),
                    by,
                    ts(at),
                    reason,
                    status.as_str(),
                    now(),
                    OrderStatus::AwaitingApproval.as_str(),
                ])?;
            if changed != 1 {
                // The transaction holds the write lock since the read, so this is a bug.
                return Err(StoreError::Internal(format!("decision on {id} raced")));
            }
            let order = load_existing(&tx, &id)?;
            tx.commit()?;
            Ok(Decided::Applied {
                order,
                task_token: token,
            })
        })
        .await
    }

    /// Judged and written under the write lock, in one savepoint: nothing can change the order
    /// in between.
    async fn request_cancel(
        &self,
        id: &OrderId,
        request: &Cancellation,
    ) -> Result<CancelRequested, StoreError> {
        let id = id.clone();
        let cancellation = to_json(request)?;
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            let token = match CancelPlan::new(load_existing(&tx, &id)?) {
                CancelPlan::Answer(answer) => return Ok(*answer),
                CancelPlan::Record { token } => token,
            };
            let changed = tx
                .prepare_cached(
                    "UPDATE orders SET cancellation = ?2, updated_at = ?3, \
                     approval_task_token = CASE WHEN ?4 THEN NULL ELSE approval_task_token END \
                     WHERE order_id = ?1 AND cancellation IS NULL \
                     AND shipping_started_at IS NULL",
                )?
                .execute(params![id.as_str(), cancellation, now(), token.is_some()])?;
            if changed != 1 {
                // The transaction holds the write lock since the read, so this is a bug.
                return Err(StoreError::Internal(format!("cancellation of {id} raced")));
            }
            let order = load_existing(&tx, &id)?;
            tx.commit()?;
            Ok(CancelRequested::Recorded {
                order,
                task_token: token,
            })
        })
        .await
    }

    async fn expire_approval(
        &self,
        id: &OrderId,
        task_token: &str,
        at: DateTime<Utc>,
        failure: Failure,
    ) -> Result<Expiry, StoreError> {
        let id = id.clone();
        let task_token = task_token.to_owned();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            let changed = tx
                .prepare_cached(&format!(
                    "UPDATE orders SET status = ?2, approval_task_token = NULL, updated_at = ?3, \
                     {KEEP_FIRST_FAILURE} \
                     WHERE order_id = ?1 AND status = ?6 AND approval_decision IS NULL \
                     AND approval_task_token = ?7 AND approval_deadline <= ?8"
                ))?
                .execute(params![
                    id.as_str(),
                    OrderStatus::Compensating.as_str(),
                    now(),
                    failure.error,
                    failure.cause,
                    OrderStatus::AwaitingApproval.as_str(),
                    task_token,
                    ts(at),
                ])?;
            let order = load_existing(&tx, &id)?;
            tx.commit()?;
            Ok(if changed == 1 {
                Expiry::Expired(order)
            } else {
                Expiry::Kept(order)
            })
        })
        .await
    }

    async fn pending_approvals(
        &self,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<PendingApproval>, StoreError> {
        let (after_at, after_id) = match after {
            Some(c) => (c.at.clone(), c.order_id.as_str().to_owned()),
            None => (String::new(), String::new()),
        };
        let items = self
            .scan(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT order_id, amount_cents, currency, approval_requested_at, \
                     approval_task_token, approval_deadline FROM orders \
                     WHERE status = 'AWAITING_APPROVAL' AND approval_decision IS NULL \
                     AND approval_task_token IS NOT NULL \
                     AND (approval_requested_at, order_id) > (?1, ?2) \
                     ORDER BY approval_requested_at, order_id LIMIT ?3",
                )?;
                let rows = stmt.query_map(params![after_at, after_id, i64::from(limit)], |r| {
                    let id: String = r.get(0)?;
                    Ok(PendingApproval {
                        order_id: OrderId::parse(&id).map_err(|e| super::bad_column(0, e))?,
                        amount_cents: get_u64(r, 1)?,
                        currency: r.get(2)?,
                        requested_at: get_ts(r, 3)?,
                        task_token: r.get(4)?,
                        deadline: get_opt_ts(r, 5)?,
                    })
                })?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await?;
        Ok(Page::keyed(items, limit, |p| {
            QueueCursor::after_approval(p).to_string()
        }))
    }
}

#[async_trait]
impl IncidentRepository for SqliteStore {
    async fn record_incident(
        &self,
        id: &OrderId,
        incident: &Incident,
        failure: Option<Failure>,
    ) -> Result<Order, StoreError> {
        let failed = OrderStatus::CompensationFailed;
        let (error, cause) = match failure {
            Some(f) => (Some(f.error), Some(f.cause)),
            None => (None, None),
        };
        let sql = format!(
            "UPDATE orders SET status = ?2, updated_at = ?3, {KEEP_FIRST_FAILURE}, \
             incident_step = ?6, incident_error = ?7, incident_cause = ?8, \
             incident_attempts = ?9, incident_since = COALESCE(incident_since, ?10) \
             WHERE order_id = ?1 AND {} <= ?11",
            rank_sql()
        );
        let values = vec![
            failed.as_str().to_owned().into(),
            now().into(),
            error.into(),
            cause.into(),
            incident.step.clone().into(),
            incident.error.clone().into(),
            incident.cause.clone().into(),
            i64::from(incident.attempts).into(),
            ts(incident.since).into(),
            i64::from(failed.rank()).into(),
        ];
        update_and_load(self, id, sql, values).await
    }

    async fn record_action(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Order, StoreError> {
        let sql = "UPDATE orders SET actions = json_insert(actions, '$[#]', json(?2)), \
                   updated_at = ?3 WHERE order_id = ?1";
        let values = vec![to_json(action)?.into(), now().into()];
        update_and_load(self, id, sql.to_owned(), values).await
    }

    async fn resolve_incident(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Resolved, StoreError> {
        let sql = format!(
            "UPDATE orders SET status = ?2, updated_at = ?3, \
             actions = json_insert(actions, '$[#]', json(?4)){CLOSE_INCIDENT} \
             WHERE order_id = ?1 AND status = ?5 AND incident_since IS NOT NULL"
        );
        let values = vec![
            OrderStatus::Cancelled.as_str().to_owned().into(),
            now().into(),
            to_json(action)?.into(),
            OrderStatus::CompensationFailed.as_str().to_owned().into(),
        ];
        let order = update_and_load(self, id, sql, values).await?;
        // The action is the last one recorded only when this write made it.
        Ok(
            if order.actions.last() == Some(action) && order.incident.is_none() {
                Resolved::Now(order)
            } else {
                Resolved::NotOpen(order)
            },
        )
    }

    /// Keyset pagination by (incident time, order id), on the index of open incidents.
    async fn open_incidents(
        &self,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        let (since, after_id) = after.map_or((String::new(), String::new()), |c| {
            (c.at.clone(), c.order_id.as_str().to_owned())
        });
        let limit = limit.max(1);
        self.scan(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "{SELECT_ORDER} WHERE incident_since IS NOT NULL \
                 AND (incident_since, order_id) > (?1, ?2) \
                 ORDER BY incident_since, order_id LIMIT ?3"
            ))?;
            let rows =
                stmt.query_map(params![since, after_id, i64::from(limit)], order_from_row)?;
            let orders = rows.collect::<Result<Vec<_>, _>>()?;
            Ok(Page::keyed(orders, limit, |o| {
                QueueCursor::after_incident(o).to_string()
            }))
        })
        .await
    }
}

#[async_trait]
impl OrderListing for SqliteStore {
    /// Keyset pagination (`listing.rs`): by order id, or by creation time and id.
    async fn list_orders(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        let after = after.map(str::to_owned);
        self.scan(move |conn| {
            ORDERS.page(conn, since, after.as_deref(), limit, order_from_row, |o| {
                (o.new.created_at, o.id().as_str().to_owned())
            })
        })
        .await
    }

    /// Backwards through `orders_by_owner_created` (a client's) or `orders_by_created` (every
    /// order), from the filter's start, testing the status and the customer on each row read.
    async fn find_orders(
        &self,
        filter: &OrderFilter,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        let filter = filter.clone();
        let start = filter.start(after);
        self.scan(move |conn| {
            // Only the conditions that apply, so that each is a range of the index.
            let (mut conditions, mut values) = (Vec::new(), Vec::new());
            if let Some(owner) = &filter.owner {
                values.push(owner.clone());
                conditions.push(format!("owner = ?{}", values.len()));
            }
            if let Some(start) = start {
                values.push(start.at);
                values.push(start.order_id.as_str().to_owned());
                let n = values.len();
                conditions.push(format!("(created_at, order_id) < (?{}, ?{n})", n - 1));
            }
            if let Some(since) = filter.created_since {
                values.push(ts(since));
                conditions.push(format!("created_at >= ?{}", values.len()));
            }
            let condition = match conditions.is_empty() {
                true => String::new(),
                false => format!("WHERE {}", conditions.join(" AND ")),
            };
            let mut stmt = conn.prepare_cached(&format!(
                "{SELECT_ORDER} {condition} \
                 ORDER BY created_at DESC, order_id DESC LIMIT {FIND_EXAMINED}"
            ))?;
            let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
            let (mut items, mut examined, mut last) = (Vec::new(), 0, None);
            while let Some(row) = rows.next()? {
                let order = order_from_row(row)?;
                examined += 1;
                last = Some(QueueCursor::of_created(&order));
                if filter.selects(&order) {
                    items.push(order);
                    if items.len() >= limit.max(1) as usize {
                        break;
                    }
                }
            }
            // Full, or the budget spent: the rest lies below the last row read.
            let more = items.len() >= limit.max(1) as usize || examined >= FIND_EXAMINED;
            Ok(Page {
                items,
                next: last.filter(|_| more).map(|c| c.to_string()),
            })
        })
        .await
    }

    /// Exact for every status: one pass over `orders_by_status_requested`, which starts with
    /// the status (an index scan, not of the table; its cost grows with the books).
    async fn count_by_status(&self) -> Result<StatusCounts, StoreError> {
        self.scan(|conn| {
            let mut counts =
                StatusCounts(OrderStatus::ALL.into_iter().map(|s| (s, Some(0))).collect());
            let mut stmt =
                conn.prepare_cached("SELECT status, count(*) FROM orders GROUP BY status")?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let status: String = row.get(0)?;
                let status = OrderStatus::parse(&status)
                    .ok_or_else(|| super::bad_column(0, format!("unknown status {status}")))?;
                counts.0.insert(status, Some(get_u64(row, 1)?));
            }
            Ok(counts)
        })
        .await
    }
}

impl SqliteStore {
    /// Orders still `ACCEPTED` (stored, their execution never started), a page of at most
    /// `limit` after the cursor `after` (the last page's `next`), in the order they were
    /// stored. On the embedded backend these are what its start queue held when its process
    /// stopped, which the next process queues again at its start. Reads the status index
    /// (`status`, then `approval_requested_at`, always NULL while `ACCEPTED`, then the rowid),
    /// so a page costs its own rows whatever the size of the books.
    pub async fn accepted_orders(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        let after = after.map(str::to_owned);
        self.scan(move |conn| {
            let items = conn
                .prepare_cached(&format!(
                    "{SELECT_ORDER} WHERE status = 'ACCEPTED' AND approval_requested_at IS NULL \
                     AND rowid > COALESCE((SELECT rowid FROM orders WHERE order_id = ?1), 0) \
                     ORDER BY rowid LIMIT ?2"
                ))?
                .query_map(params![after, limit], order_from_row)?
                .collect::<rusqlite::Result<Vec<Order>>>()?;
            Ok(Page::keyed(items, limit, |o| o.id().as_str().to_owned()))
        })
        .await
    }
}

const ORDERS: Listing = Listing {
    select: SELECT_ORDER,
    key: "order_id",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_sql_covers_every_status() {
        for s in OrderStatus::ALL {
            assert!(rank_sql().contains(&format!("'{}' THEN {}", s.as_str(), s.rank())));
        }
    }
}
