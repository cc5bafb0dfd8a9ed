//! The contract of `WebhookRepository`: the outbox holds every status an order reaches, written
//! with the change, until it is dispatched (idempotently, with its deliveries); endpoints are
//! stored, listed, replaced and deleted; deliveries come due, are saved as attempts leave them,
//! listed newest first and replayed.

use super::{Adapters, all_pages, execution_arn, new_order, now, order_id};
use chrono::Duration;
use store::domain::*;
use store::webhook::*;

fn endpoint(id: &str, owner: &str, at: chrono::DateTime<chrono::Utc>) -> WebhookEndpoint {
    WebhookEndpoint {
        id: id.to_owned(),
        owner: owner.to_owned(),
        url: format!("https://hooks.example.com/{id}"),
        event_types: vec![EventType::Completed, EventType::Cancelled],
        secrets: vec![SigningSecret {
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned(),
            created_at: at,
            expires_at: None,
        }],
        created_at: at,
        disabled: None,
        failing_since: None,
    }
}

fn delivery(event: &OrderEvent, endpoint_id: &str, state: DeliveryState) -> Delivery {
    Delivery {
        message_id: event.message_id(),
        endpoint_id: endpoint_id.to_owned(),
        order_id: event.order_id.clone(),
        event_type: EventType::of_status(event.status).unwrap_or(EventType::Accepted),
        payload: format!("{{\"type\":\"x\",\"orderId\":\"{}\"}}", event.order_id),
        created_at: event.at,
        state,
        next_attempt_at: (state == DeliveryState::Pending).then_some(event.at),
        attempts: Vec::new(),
    }
}

/// Every event the outbox holds for `id`, in order.
async fn outbox_of(adapters: &Adapters, id: &OrderId) -> Vec<OrderEvent> {
    let all = adapters
        .webhooks
        .undispatched(1000)
        .await
        .expect("undispatched");
    all.into_iter().filter(|e| &e.order_id == id).collect()
}

/// Each status an order reaches is in the outbox and its event list, in order, with its owner,
/// until dispatched; a second dispatch changes nothing.
pub async fn the_outbox_holds_each_status_change_until_dispatched(adapters: &Adapters) {
    let orders = &adapters.orders;
    let id = order_id("outbox");
    orders
        .create(new_order(&id), &execution_arn(&id))
        .await
        .expect("create");
    orders
        .advance(&id, OrderStatus::Reserved, None)
        .await
        .expect("advance");
    // Not a change: no event.
    orders
        .advance(&id, OrderStatus::Reserved, None)
        .await
        .expect("advance");
    orders
        .advance(&id, OrderStatus::Completed, None)
        .await
        .expect("advance");
    let statuses = |events: &[OrderEvent]| events.iter().map(|e| e.status).collect::<Vec<_>>();
    let expected = [
        OrderStatus::Accepted,
        OrderStatus::Reserved,
        OrderStatus::Completed,
    ];
    let events = adapters.webhooks.order_events(&id).await.expect("events");
    assert_eq!(statuses(&events), expected);
    assert!(events.iter().all(|e| e.owner.as_deref() == Some("shop-1")));
    assert!(events.windows(2).all(|w| w[0].at <= w[1].at));
    let pending = outbox_of(adapters, &id).await;
    assert_eq!(statuses(&pending), expected);

    // Dispatched with a delivery: out of the outbox, the delivery stored once.
    let completed = pending.last().expect("completed").clone();
    let first = delivery(&completed, "ep_1", DeliveryState::Pending);
    adapters
        .webhooks
        .dispatch(&completed, std::slice::from_ref(&first))
        .await
        .expect("dispatch");
    let mut again = first.clone();
    again.payload = "another".to_owned();
    adapters
        .webhooks
        .dispatch(&completed, &[again])
        .await
        .expect("dispatch again");
    let left = outbox_of(adapters, &id).await;
    assert_eq!(
        statuses(&left),
        [OrderStatus::Accepted, OrderStatus::Reserved]
    );
    let due = adapters
        .webhooks
        .due_deliveries(now() + Duration::seconds(1), 100)
        .await
        .expect("due");
    assert_eq!(due, vec![first], "the first stored is kept");
    // The event list still has it (the status stream reads it).
    let events = adapters.webhooks.order_events(&id).await.expect("events");
    assert_eq!(statuses(&events), expected);
    // Several at once, one with a delivery and one with none (nobody wants it): all out of
    // the outbox, the delivery stored; again, and nothing changes.
    let second = delivery(&left[0], "ep_2", DeliveryState::Pending);
    let batch = vec![
        (left[0].clone(), vec![second.clone()]),
        (left[1].clone(), Vec::new()),
    ];
    for _ in 0..2 {
        adapters
            .webhooks
            .dispatch_all(&batch)
            .await
            .expect("dispatch all");
    }
    assert!(outbox_of(adapters, &id).await.is_empty());
    let due = adapters
        .webhooks
        .due_deliveries(now() + Duration::seconds(1), 100)
        .await
        .expect("due");
    assert_eq!(due.len(), 2, "{due:?}");
    assert!(due.contains(&second));
}

/// Endpoints are stored, found by id, listed by owner oldest first, replaced and deleted.
pub async fn endpoints_are_stored_listed_replaced_and_deleted(adapters: &Adapters) {
    let hooks = &adapters.webhooks;
    let at = now();
    let owner = super::unique("shop");
    let a = endpoint(&super::unique("ep"), &owner, at);
    let b = endpoint(&super::unique("ep"), &owner, at + Duration::seconds(1));
    let theirs = endpoint(&super::unique("ep"), "another-shop", at);
    for e in [&b, &a, &theirs] {
        hooks.put_endpoint(e).await.expect("put");
    }
    assert_eq!(hooks.endpoint(&a.id).await.expect("get"), Some(a.clone()));
    assert_eq!(
        hooks.endpoints_of(&owner).await.expect("list"),
        vec![a.clone(), b.clone()]
    );

    let mut rotated = a.clone();
    rotated.secrets[0].expires_at = Some(at + Duration::hours(24));
    rotated.secrets.insert(
        0,
        SigningSecret {
            secret: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD".to_owned(),
            created_at: at,
            expires_at: None,
        },
    );
    rotated.disabled = Some(Disabled {
        at,
        reason: "410 Gone".to_owned(),
    });
    rotated.failing_since = Some(at);
    hooks.put_endpoint(&rotated).await.expect("replace");
    assert_eq!(hooks.endpoint(&a.id).await.expect("get"), Some(rotated));

    assert!(hooks.delete_endpoint(&b.id).await.expect("delete"));
    assert!(!hooks.delete_endpoint(&b.id).await.expect("delete again"));
    assert_eq!(hooks.endpoint(&b.id).await.expect("get"), None);
    assert_eq!(hooks.endpoints_of(&owner).await.expect("list").len(), 1);
}

/// Deliveries come due at their time, are saved as an attempt leaves them, are listed per
/// endpoint newest first across pages, and failed ones since a time are replayed.
pub async fn deliveries_come_due_are_listed_and_replayed(adapters: &Adapters) {
    let hooks = &adapters.webhooks;
    let orders = &adapters.orders;
    let endpoint_id = super::unique("ep");
    let base = now() - Duration::hours(1);
    let mut stored = Vec::new();
    for i in 0..5 {
        let id = order_id("delivered");
        let mut order = new_order(&id);
        order.created_at = base + Duration::seconds(i);
        orders
            .create(order, &execution_arn(&id))
            .await
            .expect("create");
        let event = outbox_of(adapters, &id).await.remove(0);
        let mut d = delivery(&event, &endpoint_id, DeliveryState::Pending);
        d.created_at = base + Duration::seconds(i);
        d.next_attempt_at = Some(base + Duration::seconds(10 * i));
        hooks
            .dispatch(&event, std::slice::from_ref(&d))
            .await
            .expect("dispatch");
        stored.push(d);
    }
    // Due at base + 25 s: the first three, the longest due first.
    let due = hooks
        .due_deliveries(base + Duration::seconds(25), 100)
        .await
        .expect("due");
    let ours: Vec<&Delivery> = due
        .iter()
        .filter(|d| d.endpoint_id == endpoint_id)
        .collect();
    assert_eq!(ours, stored.iter().take(3).collect::<Vec<_>>());

    // An attempt that failed for good, one delivered: neither is due again.
    let mut failed = stored[0].clone();
    failed.state = DeliveryState::Failed;
    failed.next_attempt_at = None;
    failed.attempts.push(Attempt {
        at: base,
        status: Some(503),
        error: None,
        duration_ms: 12,
    });
    hooks.save_delivery(&failed).await.expect("save");
    let mut delivered = stored[1].clone();
    delivered.state = DeliveryState::Delivered;
    delivered.next_attempt_at = None;
    hooks.save_delivery(&delivered).await.expect("save");
    let due = hooks
        .due_deliveries(base + Duration::seconds(25), 100)
        .await
        .expect("due");
    assert_eq!(
        due.iter().filter(|d| d.endpoint_id == endpoint_id).count(),
        1
    );

    let endpoint = endpoint_id.as_str();
    let listed = all_pages(2, |after| async move {
        hooks.deliveries(endpoint, after.as_deref(), 2).await
    })
    .await;
    let newest_first: Vec<String> = stored.iter().rev().map(|d| d.message_id.clone()).collect();
    assert_eq!(
        listed
            .iter()
            .map(|d| d.message_id.clone())
            .collect::<Vec<_>>(),
        newest_first
    );
    assert_eq!(listed.last(), Some(&failed), "as the attempt left it");

    // Replay since after the failed one: nothing; since before it: it, due now, attempts kept.
    let at = now();
    let none = hooks
        .replay(&endpoint_id, base + Duration::seconds(1), at)
        .await
        .expect("replay");
    assert_eq!(none, 0);
    assert_eq!(
        hooks.replay(&endpoint_id, base, at).await.expect("replay"),
        1
    );
    let due = hooks.due_deliveries(at, 100).await.expect("due");
    let replayed = due
        .iter()
        .find(|d| d.message_id == failed.message_id)
        .expect("due again");
    assert_eq!(replayed.state, DeliveryState::Pending);
    assert_eq!(replayed.attempts, failed.attempts);
}
