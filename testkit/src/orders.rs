//! The contract of `OrderRepository`: conditional create, forward-only status, the charge (id
//! and time) recorded once, approvals parked and decided once,
//! incidents recorded, listed and resolved, a cancellation recorded once and exclusive with the
//! shipment's start.

use super::{
    all_pages, covered_once, covered_since, execution_arn, failure, moment_apart, new_order, now,
    order_id, unique,
};
use chrono::Duration;
use store::domain::*;
use store::error::StoreError;
use store::ports::*;

async fn created(repo: &dyn OrderRepository, prefix: &str) -> Order {
    let id = order_id(prefix);
    match repo
        .create(new_order(&id), &execution_arn(&id))
        .await
        .expect("create")
    {
        Created::New(order) => order,
        other => panic!("a fresh id must create, got {other:?}"),
    }
}

/// The provider's charge `charge_id` of order `id` (as `new_order` made it), made at `at`.
fn charge(id: &OrderId, charge_id: &str, at: chrono::DateTime<chrono::Utc>) -> Charge {
    Charge {
        charge_id: charge_id.to_owned(),
        idempotency_key: id.charge_key(),
        order_id: id.clone(),
        amount_cents: 3499,
        currency: "EUR".to_owned(),
        created_at: at,
    }
}

/// How long the approval windows of [`parked`] orders are.
const WINDOW: Duration = Duration::days(3);

/// An order parked for approval with `token` at `at`, its window closing [`WINDOW`] later.
async fn parked(
    repo: &dyn OrderRepository,
    token: &str,
    at: chrono::DateTime<chrono::Utc>,
) -> Order {
    let order = created(repo, "parked").await;
    repo.advance(order.id(), OrderStatus::Charged, None)
        .await
        .expect("advance");
    repo.park_approval(order.id(), token, at, Some(at + WINDOW))
        .await
        .expect("park")
}

pub async fn create_is_conditional(repo: &dyn OrderRepository) {
    let id = order_id("create");
    let new = new_order(&id);
    let Created::New(first) = repo
        .create(new.clone(), &execution_arn(&id))
        .await
        .expect("create")
    else {
        panic!("first create must store the order");
    };
    assert_eq!(first.new, new, "stored as given, with its owner");
    assert_eq!(first.status, OrderStatus::Accepted);
    assert_eq!(
        first.execution_arn,
        Some(execution_arn(&id)),
        "with its execution"
    );
    assert_eq!(first.failure, None);
    assert_eq!(first.approval, None);
    assert_eq!((&first.charge_id, first.charged_at), (&None, None));

    assert_eq!(
        repo.create(new.clone(), &execution_arn(&id))
            .await
            .expect("replay"),
        Created::Existing(first.clone())
    );

    // Another body, or another owner, under the same id changes nothing; the caller compares
    // hashes and owners.
    let mut other = new.clone();
    other.body_hash = "sha256:body-2".to_owned();
    other.amount_cents = 1;
    other.owner = Some("shop-2".to_owned());
    assert_eq!(
        repo.create(other, &execution_arn(&id))
            .await
            .expect("conflict"),
        Created::Existing(first.clone())
    );
    assert_eq!(repo.get(&id).await.expect("get"), Some(first));
}

pub async fn get_of_an_unknown_order_is_none(repo: &dyn OrderRepository) {
    assert_eq!(repo.get(&order_id("unknown")).await.expect("get"), None);
}

pub async fn execution_is_recorded_once(repo: &dyn OrderRepository) {
    let order = created(repo, "exec").await;
    let arn = execution_arn(order.id());
    assert_eq!(order.execution_arn.as_deref(), Some(arn.as_str()));
    // A replay with another ARN finds the order, and keeps the first: the execution name is the
    // order id, so a second, different ARN can only come from a bug.
    let replayed = repo
        .create(order.new.clone(), "arn:other")
        .await
        .expect("replay");
    assert_eq!(replayed, Created::Existing(order.clone()));
    let stored = repo.get(order.id()).await.expect("get").expect("exists");
    assert_eq!(stored.execution_arn.as_deref(), Some(arn.as_str()));
}

pub async fn charge_is_recorded_once(repo: &dyn OrderRepository) {
    let order = created(repo, "charge-id").await;
    let id = order.id();
    let at = now() - Duration::seconds(5);
    let first = charge(id, "ch_first", at);
    let recorded = |o: &Order| (o.charge_id.clone(), o.charged_at);
    let expected = (Some("ch_first".to_owned()), Some(at));
    let after = repo.record_charge(id, &first).await.expect("record");
    assert_eq!(
        recorded(&after),
        expected,
        "id and time, to the millisecond"
    );
    assert_eq!(
        (&after.new, after.status, &after.failure),
        (&order.new, order.status, &order.failure),
        "nothing else changes"
    );
    let again = repo.record_charge(id, &first).await.expect("record again");
    assert_eq!(recorded(&again), expected);
    // Another charge changes nothing: the first is the one a refund must give back.
    let other = repo
        .record_charge(id, &charge(id, "ch_other", now()))
        .await
        .expect("record other");
    assert_eq!(recorded(&other), expected);
    let stored = repo.get(id).await.expect("get").expect("exists");
    assert_eq!(recorded(&stored), expected);
    assert!(stored.updated_at >= order.updated_at);
}

/// The refund is recorded once, with its id, amount and time; a second changes nothing.
pub async fn refund_is_recorded_once(repo: &dyn OrderRepository) {
    let order = created(repo, "refund-id").await;
    let id = order.id();
    assert_eq!(order.refund, None, "a new order has no refund");
    repo.advance(
        id,
        OrderStatus::Compensating,
        Some(failure("Payment.Declined")),
    )
    .await
    .expect("compensate");
    let at = now() - Duration::seconds(3);
    let refund = |refund_id: &str, at| Refund {
        refund_id: refund_id.to_owned(),
        idempotency_key: id.refund_key(),
        charge_id: "ch_1".to_owned(),
        order_id: id.clone(),
        amount_cents: 3499,
        created_at: at,
    };
    let expected = Some(RefundRecord {
        refund_id: "re_first".to_owned(),
        amount_cents: 3499,
        refunded_at: at,
    });
    let after = repo
        .record_refund(id, &refund("re_first", at))
        .await
        .expect("record");
    assert_eq!(
        after.refund, expected,
        "id, amount and time, to the millisecond"
    );
    assert_eq!(after.status, OrderStatus::Compensating, "the status stays");
    let other = repo
        .record_refund(id, &refund("re_other", now()))
        .await
        .expect("record other");
    assert_eq!(other.refund, expected, "the first refund is kept");
    let stored = repo.get(id).await.expect("get").expect("exists");
    assert_eq!(stored.refund, expected);
}

/// A charge step the workflow gave up on may report after the compensation started: its charge
/// is recorded all the same, so it is not forgotten, and the status stays where it is.
pub async fn charge_is_recorded_whatever_the_status(repo: &dyn OrderRepository) {
    let order = created(repo, "charge-late").await;
    let id = order.id();
    repo.advance(id, OrderStatus::Cancelled, Some(failure("States.Timeout")))
        .await
        .expect("cancel");
    let at = now();
    let after = repo
        .record_charge(id, &charge(id, "ch_late", at))
        .await
        .expect("record");
    assert_eq!(
        (after.charge_id.as_deref(), after.charged_at),
        (Some("ch_late"), Some(at))
    );
    assert_eq!(after.status, OrderStatus::Cancelled);
    assert_eq!(after.failure, Some(failure("States.Timeout")));
}

pub async fn status_moves_forward_only(repo: &dyn OrderRepository) {
    let order = created(repo, "status").await;
    let id = order.id();
    let after = repo
        .advance(id, OrderStatus::Reserved, None)
        .await
        .expect("advance");
    assert_eq!(after.status, OrderStatus::Reserved);
    let after = repo
        .advance(id, OrderStatus::Charged, None)
        .await
        .expect("advance");
    assert_eq!(after.status, OrderStatus::Charged);
    // Backwards and sideways change nothing, and say where the order is.
    for to in [
        OrderStatus::Accepted,
        OrderStatus::Reserved,
        OrderStatus::Charged,
    ] {
        let after = repo.advance(id, to, None).await.expect("advance");
        assert_eq!(after.status, OrderStatus::Charged, "moved to {to:?}");
    }
    let done = repo
        .advance(id, OrderStatus::Completed, None)
        .await
        .expect("complete");
    assert_eq!(done.status, OrderStatus::Completed);
    // No end is ever left.
    for to in [
        OrderStatus::Compensating,
        OrderStatus::Cancelled,
        OrderStatus::CompensationFailed,
    ] {
        let after = repo
            .advance(id, to, Some(failure("Late")))
            .await
            .expect("advance");
        assert_eq!(after.status, OrderStatus::Completed);
        assert_eq!(after.failure, None);
    }
    assert!(done.updated_at >= order.updated_at);
}

pub async fn failure_is_recorded_once_and_only_with_compensation(repo: &dyn OrderRepository) {
    let order = created(repo, "failure").await;
    let id = order.id();
    let after = repo
        .advance(id, OrderStatus::Reserved, Some(failure("Ignored")))
        .await
        .expect("advance");
    assert_eq!(after.failure, None, "a forward status carries no failure");
    let first = failure("Payment.Declined");
    let after = repo
        .advance(id, OrderStatus::Compensating, Some(first.clone()))
        .await
        .expect("compensate");
    assert_eq!(
        (after.status, after.failure),
        (OrderStatus::Compensating, Some(first.clone()))
    );
    // The reason that started the compensation is kept.
    let after = repo
        .advance(id, OrderStatus::Cancelled, Some(failure("Other")))
        .await
        .expect("cancel");
    assert_eq!(
        (after.status, after.failure),
        (OrderStatus::Cancelled, Some(first))
    );

    // A failure arriving with the end is recorded when none was.
    let order = created(repo, "failure-end").await;
    let end = failure("Shipment.Rejected");
    let after = repo
        .advance(
            order.id(),
            OrderStatus::CompensationFailed,
            Some(end.clone()),
        )
        .await
        .expect("fail");
    assert_eq!(after.failure, Some(end));
}

pub async fn writes_to_an_unknown_order_are_not_found(repo: &dyn OrderRepository) {
    let id = order_id("missing");
    let not_found = |r: Result<(), StoreError>| matches!(r, Err(StoreError::NotFound(_)));
    assert!(not_found(
        repo.record_charge(&id, &charge(&id, "ch_1", now()))
            .await
            .map(drop)
    ));
    assert!(not_found(
        repo.advance(&id, OrderStatus::Reserved, None)
            .await
            .map(drop)
    ));
    assert!(not_found(
        repo.park_approval(&id, "t", now(), None).await.map(drop)
    ));
    assert!(not_found(
        repo.decide(&id, Decision::Approve, "op", None, now())
            .await
            .map(drop)
    ));
    assert!(not_found(
        repo.request_cancel(&id, &cancellation(None, now()))
            .await
            .map(drop)
    ));
    assert!(not_found(repo.start_shipment(&id, now()).await.map(drop)));
    assert_eq!(
        repo.get(&id).await.expect("get"),
        None,
        "nothing was created"
    );
}

pub async fn park_keeps_first_request_time_and_latest_token(repo: &dyn OrderRepository) {
    let first_at = now();
    let order = parked(repo, "token-1", first_at).await;
    assert_eq!(order.status, OrderStatus::AwaitingApproval);
    let approval = order.approval.clone().expect("parked");
    assert_eq!(
        (approval.requested_at, approval.task_token.as_deref()),
        (first_at, Some("token-1"))
    );
    assert_eq!(approval.deadline, Some(first_at + WINDOW));
    assert_eq!(approval.decision, None);

    let later = first_at + Duration::minutes(5);
    let again = repo
        .park_approval(order.id(), "token-2", later, Some(later + WINDOW))
        .await
        .expect("repark");
    let approval = again.approval.clone().expect("parked");
    assert_eq!(
        approval.requested_at, first_at,
        "the wait is measured from the first request"
    );
    assert_eq!(
        approval.deadline,
        Some(first_at + WINDOW),
        "a re-issued task never moves the window"
    );
    assert_eq!(approval.task_token.as_deref(), Some("token-2"));
    assert_eq!(again.status, OrderStatus::AwaitingApproval);

    // An order past the approval (compensating) is not parked again.
    repo.advance(
        again.id(),
        OrderStatus::Compensating,
        Some(failure("States.Timeout")),
    )
    .await
    .expect("compensate");
    let after = repo
        .park_approval(again.id(), "token-3", later, Some(later + WINDOW))
        .await
        .expect("park late");
    assert_eq!(after.status, OrderStatus::Compensating);
    assert_eq!(
        after.approval.and_then(|a| a.task_token).as_deref(),
        Some("token-2")
    );
}

pub async fn decision_is_recorded_once(repo: &dyn OrderRepository) {
    let order = parked(repo, "token-d", now()).await;
    let id = order.id();
    let at = now();
    let Decided::Applied {
        order: decided,
        task_token,
    } = repo
        .decide(id, Decision::Approve, "op-1", Some("looks fine"), at)
        .await
        .expect("decide")
    else {
        panic!("the first decision must apply");
    };
    assert_eq!(
        task_token, "token-d",
        "the parked token is handed back to answer the workflow"
    );
    let approval = decided.approval.clone().expect("approval");
    assert_eq!(approval.decision, Some(Decision::Approve));
    assert_eq!(approval.decided_by.as_deref(), Some("op-1"));
    assert_eq!(approval.decided_at, Some(at));
    assert_eq!(approval.reason.as_deref(), Some("looks fine"));
    assert_eq!(
        approval.task_token, None,
        "a decided approval holds no token"
    );
    assert_eq!(decided.status, OrderStatus::Approved);

    let replay = repo
        .decide(id, Decision::Approve, "op-2", None, now())
        .await
        .expect("replay");
    assert_eq!(replay, Decided::Replayed(decided.clone()));
    let conflict = repo
        .decide(id, Decision::Reject, "op-2", None, now())
        .await
        .expect("conflict");
    assert_eq!(conflict, Decided::Conflict(decided.clone()));
    assert_eq!(repo.get(id).await.expect("get"), Some(decided));

    // A rejection is recorded the same way; the compensation it starts moves the status.
    let order = parked(repo, "token-r", now()).await;
    let rejected = repo
        .decide(order.id(), Decision::Reject, "op-1", Some("fraud"), now())
        .await
        .expect("reject");
    let Decided::Applied {
        order: rejected, ..
    } = rejected
    else {
        panic!("the first rejection must apply, got {rejected:?}");
    };
    assert_eq!(
        rejected.approval.and_then(|a| a.decision),
        Some(Decision::Reject)
    );
}

pub async fn decision_needs_a_parked_token(repo: &dyn OrderRepository) {
    // Not there yet.
    let order = created(repo, "not-parked").await;
    let decided = repo
        .decide(order.id(), Decision::Approve, "op", None, now())
        .await
        .expect("decide");
    assert!(
        matches!(decided, Decided::NotAwaiting(ref o) if o.approval.is_none()),
        "{decided:?}"
    );

    // Over: the approval timed out and the order is compensating.
    let order = parked(repo, "token-t", now()).await;
    repo.advance(
        order.id(),
        OrderStatus::Compensating,
        Some(failure("States.Timeout")),
    )
    .await
    .expect("compensate");
    let decided = repo
        .decide(order.id(), Decision::Approve, "op", None, now())
        .await
        .expect("decide");
    let Decided::NotAwaiting(after) = decided else {
        panic!("a decision after the timeout must not apply, got {decided:?}");
    };
    assert_eq!(after.approval.and_then(|a| a.decision), None);
}

pub async fn park_after_a_decision_changes_nothing(repo: &dyn OrderRepository) {
    let order = parked(repo, "token-p", now()).await;
    let Decided::Applied { order: decided, .. } = repo
        .decide(order.id(), Decision::Reject, "op", None, now())
        .await
        .expect("decide")
    else {
        panic!("the first decision must apply");
    };
    // A re-issued task (the answer to the engine was lost) finds the decision and no new token.
    let after = repo
        .park_approval(order.id(), "token-new", now(), Some(now() + WINDOW))
        .await
        .expect("park");
    assert_eq!(after, decided);
}

pub async fn pending_approvals_oldest_first(repo: &dyn OrderRepository) {
    let base = now() - Duration::days(3650);
    let newest = parked(repo, "pending-c", base + Duration::seconds(30)).await;
    let oldest = parked(repo, "pending-a", base).await;
    let middle = parked(repo, "pending-b", base + Duration::seconds(10)).await;
    let decided = parked(repo, "pending-d", base + Duration::seconds(5)).await;
    repo.decide(
        decided.id(),
        Decision::Approve,
        "op",
        None,
        base + Duration::seconds(6),
    )
    .await
    .expect("decide");
    created(repo, "pending-none").await;

    let mine = [oldest.id(), middle.id(), newest.id(), decided.id()];
    let listed = all_pages(2, |after| async move {
        let cursor = after.map(|a| QueueCursor::parse(&a).expect("a cursor the store made"));
        repo.pending_approvals(cursor.as_ref(), 2).await
    })
    .await;
    let pending: Vec<PendingApproval> = listed
        .into_iter()
        .filter(|p| mine.contains(&&p.order_id))
        .collect();
    let ids: Vec<&OrderId> = pending.iter().map(|p| &p.order_id).collect();
    assert_eq!(
        ids,
        [oldest.id(), middle.id(), newest.id()],
        "decided ones drop out; each once, in request order, across pages"
    );
    let first = &pending[0];
    assert_eq!((first.amount_cents, first.currency.as_str()), (3499, "EUR"));
    assert_eq!(
        (first.requested_at, first.task_token.as_str()),
        (base, "pending-a")
    );
    assert_eq!(first.deadline, Some(base + WINDOW));
}

/// A decision after the deadline fixed at the first park takes no effect and changes nothing.
pub async fn a_decision_after_the_deadline_is_expired(repo: &dyn OrderRepository) {
    let at = now() - WINDOW - Duration::minutes(1);
    let order = parked(repo, "token-late", at).await;
    let deadline = at + WINDOW;
    let decided = repo
        .decide(order.id(), Decision::Approve, "op", None, deadline)
        .await
        .expect("decide");
    assert_eq!(decided, Decided::Expired(order.clone()), "at the deadline");
    assert_eq!(
        repo.get(order.id()).await.expect("get"),
        Some(order.clone())
    );
    // Just before it, the same decision applies.
    let decided = repo
        .decide(
            order.id(),
            Decision::Approve,
            "op",
            None,
            deadline - Duration::milliseconds(1),
        )
        .await
        .expect("decide");
    assert!(matches!(decided, Decided::Applied { .. }), "{decided:?}");
}

/// The keeper's expiry: only past the deadline, only of the token parked, only without a
/// decision; it moves the order to COMPENSATING with the failure and out of the queue.
pub async fn an_expiry_closes_only_an_undecided_window_past_its_deadline(
    repo: &dyn OrderRepository,
) {
    let expired = failure("Order.ApprovalExpired");
    let at = now() - WINDOW - Duration::minutes(1);
    let deadline = at + WINDOW;
    let order = parked(repo, "token-x", at).await;
    let id = order.id();
    for (token, when) in [
        ("token-x", deadline - Duration::seconds(1)),
        ("token-other", deadline),
    ] {
        let kept = repo
            .expire_approval(id, token, when, expired.clone())
            .await
            .expect("expire");
        assert_eq!(kept, Expiry::Kept(order.clone()), "{token} at {when}");
    }
    let Expiry::Expired(after) = repo
        .expire_approval(id, "token-x", deadline, expired.clone())
        .await
        .expect("expire")
    else {
        panic!("the window must close at its deadline");
    };
    assert_eq!(after.status, OrderStatus::Compensating);
    assert_eq!(after.failure, Some(expired.clone()));
    let approval = after.approval.clone().expect("approval");
    assert_eq!((approval.task_token, approval.decision), (None, None));
    let again = repo
        .expire_approval(id, "token-x", deadline, expired.clone())
        .await
        .expect("again");
    assert_eq!(again, Expiry::Kept(after.clone()), "once");
    let decided = repo
        .decide(id, Decision::Approve, "op", None, now())
        .await
        .expect("decide");
    assert_eq!(decided, Decided::Expired(after.clone()));
    let listed = all_pages(100, |after| async move {
        let cursor = after.map(|a| QueueCursor::parse(&a).expect("a cursor the store made"));
        repo.pending_approvals(cursor.as_ref(), 100).await
    })
    .await;
    assert!(listed.iter().all(|p| &p.order_id != id), "out of the queue");

    // A decision recorded first keeps the window open for good.
    let order = parked(repo, "token-y", at).await;
    repo.decide(
        order.id(),
        Decision::Approve,
        "op",
        None,
        deadline - Duration::seconds(1),
    )
    .await
    .expect("decide");
    let kept = repo
        .expire_approval(order.id(), "token-y", now(), expired)
        .await
        .expect("expire");
    assert!(
        matches!(&kept, Expiry::Kept(o) if o.status == OrderStatus::Approved),
        "{kept:?}"
    );
}

/// Listing pages through every order once, each as it is stored.
pub async fn listing_pages_cover_every_order_once(repo: &dyn OrderRepository) {
    let mut ours = Vec::new();
    for _ in 0..7 {
        ours.push(created(repo, "listed").await);
    }
    let moved = repo
        .advance(ours[0].id(), OrderStatus::Reserved, None)
        .await
        .expect("advance");
    let listed = all_pages(3, |after| async move {
        repo.list_orders(None, after.as_deref(), 3).await
    })
    .await;
    let keys: Vec<String> = listed.iter().map(|o| o.id().to_string()).collect();
    let our_keys: Vec<String> = ours.iter().map(|o| o.id().to_string()).collect();
    covered_once(&keys, &our_keys);
    let found = |id: &OrderId| listed.iter().find(|o| o.id() == id).expect("listed");
    assert_eq!(found(moved.id()), &moved, "as it is now");
    assert_eq!(found(ours[6].id()), &ours[6]);

    // With `since`: the orders created from then on, none from before (a change since does
    // not count: `moved` was changed after it was created).
    let since = moment_apart().await;
    let mut later = Vec::new();
    for _ in 0..4 {
        later.push(created(repo, "listed").await.id().to_string());
    }
    repo.advance(ours[1].id(), OrderStatus::Reserved, None)
        .await
        .expect("advance");
    let listed = all_pages(3, |after| async move {
        repo.list_orders(Some(since), after.as_deref(), 3).await
    })
    .await;
    let keys: Vec<String> = listed.iter().map(|o| o.id().to_string()).collect();
    covered_since(&keys, &later, &our_keys);
}

/// `find_orders` lists an owner's orders newest first, each once across pages, never another
/// owner's; status and creation window filter them; without an owner, every order is listed.
pub async fn finding_orders_lists_newest_first_by_owner_status_and_window(
    repo: &dyn OrderRepository,
) {
    let (owner, other) = (unique("shop"), unique("shop"));
    // A second apart, an hour ago: the order of creation is unambiguous.
    let base = now() - Duration::hours(1);
    let at = |i: i64| base + Duration::seconds(i);
    let mut ours = Vec::new();
    for i in 0..7 {
        let id = order_id("found");
        let mut order = new_order(&id);
        order.owner = Some(owner.clone());
        order.created_at = at(2 * i);
        repo.create(order, &execution_arn(&id))
            .await
            .expect("create");
        // Another client's order in between each of ours.
        let mut theirs = new_order(&order_id("theirs"));
        theirs.owner = Some(other.clone());
        theirs.created_at = at(2 * i + 1);
        let arn = execution_arn(&theirs.order_id);
        repo.create(theirs, &arn).await.expect("create");
        ours.push(id);
    }
    for i in [1, 4] {
        repo.advance(&ours[i], OrderStatus::Reserved, None)
            .await
            .expect("advance");
    }
    let find = |filter: OrderFilter, limit: u32| async move {
        let filter = &filter;
        all_pages(limit, |after| async move {
            let after = after.map(|a| QueueCursor::parse(&a).expect("a page's next is a cursor"));
            repo.find_orders(filter, after.as_ref(), limit).await
        })
        .await
    };
    let ids =
        |orders: Vec<Order>| -> Vec<OrderId> { orders.iter().map(|o| o.id().clone()).collect() };
    let newest_first: Vec<OrderId> = ours.iter().rev().cloned().collect();
    let mine = OrderFilter {
        owner: Some(owner.clone()),
        ..OrderFilter::default()
    };
    let listed = find(mine.clone(), 3).await;
    assert!(
        listed.iter().any(|o| o.status == OrderStatus::Reserved),
        "as they are now"
    );
    assert_eq!(ids(listed), newest_first, "newest first, each once");

    let reserved = OrderFilter {
        status: Some(OrderStatus::Reserved),
        ..mine.clone()
    };
    assert_eq!(
        ids(find(reserved, 1).await),
        vec![ours[4].clone(), ours[1].clone()]
    );

    let window = OrderFilter {
        created_since: Some(at(2)),
        created_until: Some(at(8)),
        ..mine.clone()
    };
    assert_eq!(
        ids(find(window, 2).await),
        vec![ours[3].clone(), ours[2].clone(), ours[1].clone()],
        "since inclusive, until exclusive"
    );

    // A window that ends before it starts holds nothing.
    let empty = OrderFilter {
        created_since: Some(at(8)),
        created_until: Some(at(2)),
        ..mine.clone()
    };
    assert!(ids(find(empty, 5).await).is_empty());

    // Every order (an operator's listing): ours and theirs, interleaved, newest first.
    let everyone = OrderFilter {
        created_since: Some(at(0)),
        created_until: Some(at(14)),
        ..OrderFilter::default()
    };
    let listed = find(everyone, 4).await;
    let seen: Vec<OrderId> = listed
        .iter()
        .filter(|o| o.new.owner.as_deref() == Some(owner.as_str()))
        .map(|o| o.id().clone())
        .collect();
    assert_eq!(seen, newest_first);
    assert_eq!(
        listed
            .iter()
            .filter(|o| o.new.owner.as_deref() == Some(other.as_str()))
            .count(),
        7
    );
    assert!(
        listed
            .windows(2)
            .all(|w| (w[0].new.created_at, w[0].id()) > (w[1].new.created_at, w[1].id())),
        "newest first"
    );
}

/// `find_orders` with a customer prefix lists exactly the orders whose customer id starts with
/// it (case and all), newest first, for an owner or for everyone.
pub async fn finding_orders_by_customer_prefix_lists_only_theirs(repo: &dyn OrderRepository) {
    // Customer ids of this test's own, so that other orders in the store do not match.
    let tag = unique("cus");
    let shop = unique("shop");
    let base = now() - Duration::hours(2);
    let mut ids = Vec::new();
    for (i, customer) in ["acme-1", "acme-2", "beta-1", "ACME-3"].iter().enumerate() {
        let id = order_id("customer");
        let mut order = new_order(&id);
        order.customer_id = format!("{tag}-{customer}");
        order.owner = Some(shop.clone());
        order.created_at = base + Duration::seconds(i as i64);
        repo.create(order, &execution_arn(&id))
            .await
            .expect("create");
        ids.push(id);
    }
    let find = |filter: OrderFilter| async move {
        let filter = &filter;
        all_pages(1, |after| async move {
            let after = after.map(|a| QueueCursor::parse(&a).expect("a page's next is a cursor"));
            repo.find_orders(filter, after.as_ref(), 1).await
        })
        .await
        .iter()
        .map(|o| o.id().clone())
        .collect::<Vec<OrderId>>()
    };
    let acme = OrderFilter {
        customer_prefix: Some(format!("{tag}-acme-")),
        ..OrderFilter::default()
    };
    let newest_first = vec![ids[1].clone(), ids[0].clone()];
    assert_eq!(find(acme.clone()).await, newest_first, "everyone's");
    let theirs = OrderFilter {
        owner: Some(shop.clone()),
        ..acme
    };
    assert_eq!(find(theirs).await, newest_first, "the owner's");
    let none = OrderFilter {
        customer_prefix: Some(format!("{tag}-acme-%")),
        owner: Some(shop),
        ..OrderFilter::default()
    };
    assert!(find(none).await.is_empty(), "no wildcards");
}

/// `count_by_status` counts the orders in each status now. Counted exactly by every adapter:
/// `AWAITING_APPROVAL` (awaiting a decision with a token parked) and `COMPENSATION_FAILED`
/// (an open incident); the others may be `None` (not counted) or must be exact. Compared with
/// the counts before, so that other orders in the store do not matter.
pub async fn counts_by_status_are_exact_where_counted(repo: &dyn OrderRepository) {
    let before = repo.count_by_status().await.expect("count");
    for status in OrderStatus::ALL {
        assert!(
            before.0.contains_key(&status),
            "{status:?} missing: {before:?}"
        );
    }
    for _ in 0..2 {
        created(repo, "count-accepted").await;
    }
    let reserved = created(repo, "count-reserved").await;
    repo.advance(reserved.id(), OrderStatus::Reserved, None)
        .await
        .expect("reserve");
    for token in ["count-1", "count-2", "count-3"] {
        parked(repo, token, now()).await;
    }
    let approved = parked(repo, "count-approved", now()).await;
    repo.decide(approved.id(), Decision::Approve, "ops-ada", None, now())
        .await
        .expect("approve");
    for _ in 0..2 {
        with_incident(repo, "count-failed", now()).await;
    }
    let closed = with_incident(repo, "count-closed", now()).await;
    repo.advance(closed.id(), OrderStatus::Cancelled, None)
        .await
        .expect("close");
    let after = repo.count_by_status().await.expect("count");
    assert_eq!(after.0.len(), OrderStatus::ALL.len(), "{after:?}");

    let made = |status| match status {
        OrderStatus::Accepted => 2,
        OrderStatus::Reserved => 1,
        OrderStatus::AwaitingApproval => 3,
        OrderStatus::Approved => 1,
        OrderStatus::CompensationFailed => 2,
        OrderStatus::Cancelled => 1,
        _ => 0,
    };
    for status in OrderStatus::ALL {
        let must_count = matches!(
            status,
            OrderStatus::AwaitingApproval | OrderStatus::CompensationFailed
        );
        match (before.get(status), after.get(status)) {
            (Some(b), Some(a)) => assert_eq!(
                a.checked_sub(b),
                Some(made(status)),
                "{status:?}: {b} before, {a} after"
            ),
            (None, None) if !must_count => {}
            (b, a) => panic!("{status:?} counted {b:?} before, {a:?} after"),
        }
    }
}

fn incident(step: &str, since: chrono::DateTime<chrono::Utc>) -> Incident {
    Incident {
        step: step.to_owned(),
        error: "Payment.Declined".to_owned(),
        cause: format!("{step} was refused"),
        attempts: 1,
        since,
    }
}

fn action(kind: ActionKind, note: &str) -> OperatorAction {
    OperatorAction {
        action: kind,
        by: "ops-ada".to_owned(),
        note: Some(note.to_owned()),
        at: now(),
    }
}

/// An order whose compensation gave up at `step` at `since`.
async fn with_incident(
    repo: &dyn OrderRepository,
    prefix: &str,
    since: chrono::DateTime<chrono::Utc>,
) -> Order {
    let order = created(repo, prefix).await;
    repo.advance(order.id(), OrderStatus::Compensating, Some(failure("Late")))
        .await
        .expect("compensate");
    repo.record_incident(order.id(), &incident("RefundPayment", since), None)
        .await
        .expect("record incident")
}

pub async fn an_incident_keeps_its_first_time_and_closes_with_the_end(repo: &dyn OrderRepository) {
    let first = now() - Duration::minutes(5);
    let order = created(repo, "incident").await;
    let id = order.id();
    let recorded = repo
        .record_incident(
            id,
            &incident("ReleaseInventory", first),
            Some(failure("Boom")),
        )
        .await
        .expect("record");
    assert_eq!(recorded.status, OrderStatus::CompensationFailed);
    assert_eq!(recorded.incident, Some(incident("ReleaseInventory", first)));
    assert_eq!(
        recorded.failure,
        Some(failure("Boom")),
        "recorded when none was"
    );
    // A redriven compensation that fails again: the newer step and error, the first time.
    let mut again = incident("RefundPayment", now());
    again.attempts = 31;
    let recorded = repo
        .record_incident(id, &again, Some(failure("Other")))
        .await
        .expect("record again");
    again.since = first;
    assert_eq!(recorded.incident, Some(again));
    assert_eq!(
        recorded.failure,
        Some(failure("Boom")),
        "the first failure is kept"
    );
    // The redrive finishes the compensation: the order ends and the incident closes.
    let cancelled = repo
        .advance(id, OrderStatus::Cancelled, None)
        .await
        .expect("cancel");
    assert_eq!(
        (cancelled.status, cancelled.incident),
        (OrderStatus::Cancelled, None)
    );
    // No incident is opened on an order that has ended.
    let after = repo
        .record_incident(id, &incident("RefundPayment", now()), None)
        .await
        .expect("record on an ended order");
    assert_eq!(
        (after.status, after.incident),
        (OrderStatus::Cancelled, None)
    );
}

pub async fn resolving_closes_an_open_incident_once(repo: &dyn OrderRepository) {
    let order = with_incident(repo, "resolve", now()).await;
    let first = action(ActionKind::Resolve, "refunded by hand in the dashboard");
    let resolved = match repo
        .resolve_incident(order.id(), &first)
        .await
        .expect("resolve")
    {
        Resolved::Now(order) => order,
        other => panic!("an open incident resolves: {other:?}"),
    };
    assert_eq!(resolved.status, OrderStatus::Cancelled);
    assert_eq!(resolved.incident, None);
    assert_eq!(resolved.actions, std::slice::from_ref(&first));
    // Again: nothing changes, and the answer says so.
    let second = action(ActionKind::Resolve, "twice");
    match repo
        .resolve_incident(order.id(), &second)
        .await
        .expect("resolve")
    {
        Resolved::NotOpen(order) => assert_eq!(order.actions, [first]),
        other => panic!("a closed incident does not resolve again: {other:?}"),
    }
    // An order that never had one.
    let plain = created(repo, "resolve-none").await;
    match repo
        .resolve_incident(plain.id(), &second)
        .await
        .expect("resolve")
    {
        Resolved::NotOpen(order) => {
            assert_eq!(
                (order.status, order.actions),
                (OrderStatus::Accepted, vec![])
            );
        }
        other => panic!("no incident, nothing resolved: {other:?}"),
    }
    let missing = order_id("resolve-missing");
    assert!(matches!(
        repo.resolve_incident(&missing, &second).await,
        Err(StoreError::NotFound(_))
    ));
}

pub async fn actions_are_appended_in_order(repo: &dyn OrderRepository) {
    let order = with_incident(repo, "actions", now()).await;
    assert_eq!(order.actions, []);
    let a = action(ActionKind::Redrive, "first");
    let b = action(ActionKind::Redrive, "second");
    repo.record_action(order.id(), &a).await.expect("a");
    let after = repo.record_action(order.id(), &b).await.expect("b");
    assert_eq!(after.actions, [a, b]);
    assert_eq!(
        after.incident, order.incident,
        "an action leaves the incident open"
    );
    assert_eq!(repo.get(order.id()).await.expect("get"), Some(after));
}

pub async fn open_incidents_page_oldest_first(repo: &dyn OrderRepository) {
    let base = now() - Duration::days(3650);
    let mut ours = Vec::new();
    for offset in [40, 10, 30, 20, 0] {
        let order = with_incident(repo, "incidents", base + Duration::seconds(offset)).await;
        ours.push(order);
    }
    let closed = with_incident(repo, "incidents-closed", base + Duration::seconds(5)).await;
    repo.advance(closed.id(), OrderStatus::Cancelled, None)
        .await
        .expect("close");
    created(repo, "incidents-none").await;
    let listed = all_pages(2, |after| async move {
        let cursor = after.map(|a| QueueCursor::parse(&a).expect("a cursor the store made"));
        repo.open_incidents(cursor.as_ref(), 2).await
    })
    .await;
    let mine: Vec<&Order> = listed
        .iter()
        .filter(|o| ours.iter().any(|ours| ours.id() == o.id()) || o.id() == closed.id())
        .collect();
    ours.sort_by_key(|o| o.incident.as_ref().map(|i| i.since));
    let expected: Vec<&Order> = ours.iter().collect();
    assert_eq!(
        mine, expected,
        "oldest first, as stored, closed ones left out"
    );
    assert!(QueueCursor::parse("not a cursor").is_none());
}

/// A client's request to cancel, made `at`.
fn cancellation(reason: Option<&str>, at: chrono::DateTime<chrono::Utc>) -> Cancellation {
    Cancellation {
        by: "shop-1".to_owned(),
        role: Role::Client,
        reason: reason.map(str::to_owned),
        at,
    }
}

pub async fn a_cancellation_is_recorded_once_and_stops_the_shipment(repo: &dyn OrderRepository) {
    let order = created(repo, "cancel").await;
    let id = order.id();
    repo.advance(id, OrderStatus::Charged, None)
        .await
        .expect("advance");
    let first = cancellation(Some("changed my mind"), now());
    let CancelRequested::Recorded {
        order: cancelled,
        task_token,
    } = repo.request_cancel(id, &first).await.expect("cancel")
    else {
        panic!("the first cancellation must be recorded");
    };
    assert_eq!(task_token, None, "nothing was parked");
    assert_eq!(cancelled.cancellation.as_ref(), Some(&first));
    assert_eq!(
        cancelled.status,
        OrderStatus::Charged,
        "the status is the compensation's to move"
    );

    let again = repo
        .request_cancel(id, &cancellation(Some("really"), now()))
        .await
        .expect("again");
    assert_eq!(
        again,
        CancelRequested::Replayed(cancelled.clone()),
        "a repeat keeps the first request"
    );
    let shipping = repo.start_shipment(id, now()).await.expect("ship");
    assert_eq!(
        shipping, cancelled,
        "a shipment after the cancellation does not begin"
    );
}

pub async fn a_shipment_begun_refuses_a_cancellation(repo: &dyn OrderRepository) {
    let order = created(repo, "shipping").await;
    let id = order.id();
    repo.advance(id, OrderStatus::Charged, None)
        .await
        .expect("advance");
    let at = now();
    let started = repo.start_shipment(id, at).await.expect("ship");
    assert_eq!(started.shipping_started_at, Some(at));
    let again = repo
        .start_shipment(id, at + Duration::seconds(5))
        .await
        .expect("ship again");
    assert_eq!(
        again.shipping_started_at,
        Some(at),
        "a redelivered step keeps the first start"
    );
    let refused = repo
        .request_cancel(id, &cancellation(None, now()))
        .await
        .expect("cancel");
    assert_eq!(refused, CancelRequested::TooLate(again.clone()));
    assert_eq!(repo.get(id).await.expect("get"), Some(again));

    // Completed (by an execution from before the start was recorded) is too late as well.
    let order = created(repo, "completed").await;
    let done = repo
        .advance(order.id(), OrderStatus::Completed, None)
        .await
        .expect("complete");
    let refused = repo
        .request_cancel(order.id(), &cancellation(None, now()))
        .await
        .expect("cancel");
    assert_eq!(refused, CancelRequested::TooLate(done));
}

pub async fn a_cancellation_takes_the_parked_token_and_refuses_later_decisions(
    repo: &dyn OrderRepository,
) {
    let order = parked(repo, "token-c", now()).await;
    let id = order.id();
    let request = Cancellation {
        by: "op-1".to_owned(),
        role: Role::Operator,
        reason: None,
        at: now(),
    };
    let CancelRequested::Recorded {
        order: cancelled,
        task_token,
    } = repo.request_cancel(id, &request).await.expect("cancel")
    else {
        panic!("the cancellation of a parked order must be recorded");
    };
    assert_eq!(
        task_token.as_deref(),
        Some("token-c"),
        "handed back to fail"
    );
    assert_eq!(
        cancelled
            .approval
            .as_ref()
            .and_then(|a| a.task_token.as_ref()),
        None,
        "the token is taken off the order"
    );
    let queue = repo.pending_approvals(None, 1000).await.expect("queue");
    assert!(
        queue.items.iter().all(|p| p.order_id != *id),
        "a cancelled order leaves the operators' queue"
    );
    // A re-issued task parks nothing; a decision takes no effect.
    let reparked = repo
        .park_approval(id, "token-late", now(), Some(now() + WINDOW))
        .await
        .expect("park");
    assert_eq!(reparked, cancelled);
    let decided = repo
        .decide(id, Decision::Approve, "op-2", None, now())
        .await
        .expect("decide");
    assert_eq!(decided, Decided::Cancelled(cancelled.clone()));
    // An expiry of the taken token changes nothing either.
    let expired = repo
        .expire_approval(
            id,
            "token-c",
            now() + WINDOW * 2,
            failure("Order.ApprovalExpired"),
        )
        .await
        .expect("expire");
    assert_eq!(expired, Expiry::Kept(cancelled));
}

pub async fn an_order_being_undone_is_not_cancelled_again(repo: &dyn OrderRepository) {
    let order = created(repo, "undone").await;
    let undone = repo
        .advance(
            order.id(),
            OrderStatus::Compensating,
            Some(failure("Payment.Declined")),
        )
        .await
        .expect("compensate");
    let refused = repo
        .request_cancel(order.id(), &cancellation(None, now()))
        .await
        .expect("cancel");
    assert_eq!(refused, CancelRequested::Ended(undone));

    // Rejected by an operator: the compensation is on its way.
    let order = parked(repo, "token-rj", now()).await;
    let Decided::Applied {
        order: rejected, ..
    } = repo
        .decide(order.id(), Decision::Reject, "op", None, now())
        .await
        .expect("reject")
    else {
        panic!("the rejection must apply");
    };
    let refused = repo
        .request_cancel(order.id(), &cancellation(None, now()))
        .await
        .expect("cancel");
    assert_eq!(refused, CancelRequested::Ended(rejected));
}
