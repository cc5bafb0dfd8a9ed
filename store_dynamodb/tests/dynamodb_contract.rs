//! The repository and gateway contract against `DynamoStore` on `moto_server`, and what only
//! DynamoDB has: the table's creation and shape, the items' layout, the sparse index.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, ScalarAttributeType, TableDescription,
};
use std::collections::HashMap;
use std::sync::Arc;
use store::{ApprovalRepository, OrderRecords};
use store::{Decision, InventoryRepository, KeyRepository, OrderStatus, StoreError};
use store_dynamodb::DynamoStore;
use store_dynamodb::create_table;
use testkit::{
    Adapters, execution_arn, failure, keys, line, moto, new_order, now, order_id, unique,
};

/// A store over a table of its own. Moto undoes a cancelled transaction by restoring a copy of
/// the whole table taken when the transaction began, which would also undo what other tests
/// wrote meanwhile; a table per test keeps them apart.
async fn fresh_store() -> (Client, DynamoStore) {
    let client = moto::shared().client();
    let table = unique("fulfillment");
    create_table(&client, &table).await.expect("create table");
    (client.clone(), DynamoStore::new(client, table))
}

async fn fresh() -> Adapters {
    let (_, store) = fresh_store().await;
    Adapters {
        orders: Arc::new(store.clone()),
        inventory: Arc::new(store.clone()),
        payments: Arc::new(providers::SandboxPayments::new(store.clone())),
        shipping: Arc::new(providers::SandboxShipping::new(store.clone())),
        keys: Arc::new(store.clone()),
        webhooks: Arc::new(store.clone()),
        guard: Box::new(()),
    }
}

testkit::contract_suite!(fresh);

async fn raw_item(
    client: &Client,
    store: &DynamoStore,
    pk: &str,
) -> HashMap<String, AttributeValue> {
    client
        .get_item()
        .table_name(store.table())
        .key(
            store_dynamodb::PARTITION_KEY,
            AttributeValue::S(pk.to_owned()),
        )
        .consistent_read(true)
        .send()
        .await
        .expect("get item")
        .item
        .unwrap_or_else(|| panic!("no item {pk}"))
}

/// Order ids in the pending-approvals index, read straight from it, every shard.
async fn indexed(client: &Client, store: &DynamoStore) -> Vec<String> {
    let mut ids = Vec::new();
    for shard in 0..store_dynamodb::APPROVAL_SHARDS {
        let page = client
            .query()
            .table_name(store.table())
            .index_name(store_dynamodb::PENDING_APPROVALS_INDEX)
            .key_condition_expression("#q = :pending")
            .expression_attribute_names("#q", store_dynamodb::APPROVAL_QUEUE)
            .expression_attribute_values(
                ":pending",
                AttributeValue::S(store_dynamodb::approval_queue(shard)),
            )
            .send()
            .await
            .expect("query index");
        ids.extend(page.items().iter().map(|item| {
            item[store_dynamodb::PARTITION_KEY]
                .as_s()
                .expect("pk")
                .clone()
        }));
    }
    ids
}

#[tokio::test]
async fn create_table_is_idempotent_and_makes_the_documented_shape() {
    let (client, store) = fresh_store().await;
    create_table(&client, store.table()).await.expect("again");
    let table = client
        .describe_table()
        .table_name(store.table())
        .send()
        .await
        .expect("describe")
        .table
        .expect("table");
    let keys = |schema: &[KeySchemaElement]| -> Vec<(String, KeyType)> {
        schema
            .iter()
            .map(|k| (k.attribute_name().to_owned(), k.key_type().clone()))
            .collect()
    };
    assert_eq!(
        keys(table.key_schema()),
        [(store_dynamodb::PARTITION_KEY.to_owned(), KeyType::Hash)]
    );
    let mut attributes: Vec<(String, ScalarAttributeType)> = table
        .attribute_definitions()
        .iter()
        .map(|a: &AttributeDefinition| (a.attribute_name().to_owned(), a.attribute_type().clone()))
        .collect();
    attributes.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![(
        store_dynamodb::PARTITION_KEY.to_owned(),
        ScalarAttributeType::S,
    )];
    for (_, hash, range) in store_dynamodb::INDEXES {
        expected.push((hash.to_owned(), ScalarAttributeType::S));
        expected.push((range.to_owned(), ScalarAttributeType::S));
    }
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    expected.dedup();
    assert_eq!(attributes, expected);
    assert_eq!(
        table.billing_mode_summary().and_then(|b| b.billing_mode()),
        Some(&BillingMode::PayPerRequest)
    );
    assert_documented_indexes(&table);
    assert_eq!(
        store_dynamodb::PENDING_APPROVALS_PROJECTION,
        ProjectionType::KeysOnly
    );
    let ttl = client
        .describe_time_to_live()
        .table_name(store.table())
        .send()
        .await
        .expect("describe time to live")
        .time_to_live_description
        .expect("a time to live");
    assert_eq!(
        ttl.attribute_name(),
        Some(store_dynamodb::table::RETAIN_UNTIL),
        "finished deliveries expire"
    );
    assert_eq!(
        ttl.time_to_live_status(),
        Some(&aws_sdk_dynamodb::types::TimeToLiveStatus::Enabled)
    );
}

/// The table has exactly the indexes of `store_dynamodb::INDEXES`, each projecting its keys.
fn assert_documented_indexes(table: &TableDescription) {
    let keys = |schema: &[KeySchemaElement]| -> Vec<(String, KeyType)> {
        schema
            .iter()
            .map(|k| (k.attribute_name().to_owned(), k.key_type().clone()))
            .collect()
    };
    let indexes = table.global_secondary_indexes();
    assert_eq!(indexes.len(), store_dynamodb::INDEXES.len(), "{indexes:?}");
    for (name, hash, range) in store_dynamodb::INDEXES {
        let index = indexes
            .iter()
            .find(|i| i.index_name() == Some(name))
            .unwrap_or_else(|| panic!("no index {name}: {indexes:?}"));
        assert_eq!(
            keys(index.key_schema()),
            [
                (hash.to_owned(), KeyType::Hash),
                (range.to_owned(), KeyType::Range),
            ]
        );
        assert_eq!(
            index.projection().and_then(|p| p.projection_type()),
            Some(&ProjectionType::KeysOnly)
        );
    }
}

/// A table made by a build from before the incidents index (and the created index) gets them
/// added, and is then used.
#[tokio::test]
async fn a_table_from_before_the_incidents_index_gets_it_added() {
    let client = moto::shared().client();
    let table = unique("before-incidents");
    let key = |name: &str, key_type| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build()
            .unwrap()
    };
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    client
        .create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(store_dynamodb::PARTITION_KEY, KeyType::Hash))
        .attribute_definitions(attribute(store_dynamodb::PARTITION_KEY))
        .attribute_definitions(attribute(store_dynamodb::APPROVAL_QUEUE))
        .attribute_definitions(attribute(store_dynamodb::APPROVAL_REQUESTED_AT))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(store_dynamodb::PENDING_APPROVALS_INDEX)
                .key_schema(key(store_dynamodb::APPROVAL_QUEUE, KeyType::Hash))
                .key_schema(key(store_dynamodb::APPROVAL_REQUESTED_AT, KeyType::Range))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::KeysOnly)
                        .build(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("create the old shape");
    create_table(&client, &table).await.expect("index added");
    let described = client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .expect("describe")
        .table
        .expect("table");
    assert_documented_indexes(&described);
}

#[tokio::test]
async fn an_existing_table_of_another_shape_is_refused() {
    let client = moto::shared().client();
    let table = unique("other-shape");
    client
        .create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("id")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("id")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("create another table");
    let err = create_table(&client, &table).await.expect_err("refused");
    assert!(
        matches!(err, StoreError::Internal(ref m) if m.contains("key schema")),
        "{err:?}"
    );
}

#[tokio::test]
async fn items_have_the_documented_shape() {
    let (client, store) = fresh_store().await;
    let id = order_id("shape");
    store
        .create(new_order(&id), &execution_arn(&id))
        .await
        .expect("create");
    let order = raw_item(&client, &store, &format!("ORDER#{id}")).await;
    assert_eq!(order["order_id"].as_s().unwrap(), id.as_str());
    assert_eq!(order["amount_cents"].as_n().unwrap(), "3499");
    assert_eq!(order["requires_approval"].as_bool().unwrap(), &false);
    assert_eq!(order["status"].as_s().unwrap(), "ACCEPTED");
    assert!(
        order["items"].as_s().unwrap().contains("SKU-A"),
        "JSON text"
    );
    assert!(!order.contains_key(store_dynamodb::APPROVAL_QUEUE));
    // In the created index, by kind, day and shard.
    let shard = |item: &HashMap<String, AttributeValue>| {
        item[store_dynamodb::CREATED_SHARD].as_s().unwrap().clone()
    };
    let day = order["created_at"].as_s().unwrap()[..10].to_owned();
    assert_eq!(
        shard(&order),
        format!("ORDER#{day}#{}", store_dynamodb::shard_of(id.as_str()))
    );

    let sku = unique("sku");
    store.set_available(&sku, 5).await.expect("stock");
    store.reserve(&id, &[line(&sku, 2)]).await.expect("reserve");
    let stock = raw_item(&client, &store, &format!("STOCK#{sku}")).await;
    let counts: Vec<&str> = ["available", "reserved", "shipped", "stocked"]
        .iter()
        .map(|a| stock[*a].as_n().unwrap().as_str())
        .collect();
    assert_eq!(counts, ["3", "2", "0", "5"]);
    let reservation = raw_item(&client, &store, &format!("RESERVATION#{id}")).await;
    assert_eq!(reservation["status"].as_s().unwrap(), "HELD");
    assert!(
        shard(&reservation).starts_with("RESERVATION#"),
        "{reservation:?}"
    );
}

/// A session's item carries the table's time to live at its expiry (rounded up to the second,
/// so never before it), and DynamoDB deletes it after.
#[tokio::test]
async fn a_session_item_expires_with_the_session() {
    let (client, store) = fresh_store().await;
    let mut session = keys::session("ops-ada", "key-hash");
    session.expires_at += chrono::Duration::milliseconds(1);
    store.open_session(&session).await.expect("open");
    let item = raw_item(
        &client,
        &store,
        &format!("SESSION#{}", session.session_hash),
    )
    .await;
    assert_eq!(item["key_hash"].as_s().unwrap(), "key-hash");
    assert_eq!(
        item[store_dynamodb::table::RETAIN_UNTIL].as_n().unwrap(),
        &(session.expires_at.timestamp() + 1).to_string()
    );
}

#[tokio::test]
async fn the_pending_approvals_index_holds_only_orders_awaiting_a_decision() {
    let (client, store) = fresh_store().await;
    let (parked, decided, timed_out) = (order_id("p"), order_id("d"), order_id("t"));
    for id in [&parked, &decided, &timed_out] {
        store
            .create(new_order(id), &execution_arn(id))
            .await
            .expect("create");
        store
            .park_approval(id, "token", now(), None)
            .await
            .expect("park");
    }
    store
        .create(new_order(&order_id("never")), "arn:never")
        .await
        .expect("create");
    store
        .decide(&decided, Decision::Approve, "op", None, now())
        .await
        .expect("decide");
    store
        .advance(
            &timed_out,
            OrderStatus::Compensating,
            Some(failure("States.Timeout")),
        )
        .await
        .expect("time out");
    assert_eq!(indexed(&client, &store).await, [format!("ORDER#{parked}")]);
    let pending = store
        .pending_approvals(None, 10)
        .await
        .expect("pending")
        .items;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].order_id, parked);
    // What stays on a decided order is the record of the approval, not the queue.
    let item = raw_item(&client, &store, &format!("ORDER#{decided}")).await;
    assert!(item.contains_key(store_dynamodb::APPROVAL_REQUESTED_AT));
    assert!(!item.contains_key(store_dynamodb::APPROVAL_QUEUE));
}

/// The queue is split into shards by order id: each shard pages in request order, every
/// waiting order is in the shard of its id once, and the operators' list merges them all.
#[tokio::test]
async fn the_approvals_queue_is_sharded_by_order_id_and_read_a_shard_at_a_time() {
    use store::QueueCursor;
    let (_, store) = fresh_store().await;
    let base = now() - chrono::Duration::days(1);
    let mut ids = Vec::new();
    for i in 0..40 {
        let id = order_id("sharded");
        store
            .create(new_order(&id), &execution_arn(&id))
            .await
            .expect("create");
        let at = base + chrono::Duration::seconds(i);
        store
            .park_approval(&id, &format!("token-{i}"), at, None)
            .await
            .expect("park");
        ids.push(id);
    }
    assert_eq!(store.approval_shards(), store_dynamodb::APPROVAL_SHARDS);
    let mut seen = Vec::new();
    let mut used = 0;
    for shard in 0..store.approval_shards() {
        let mut in_shard = Vec::new();
        let mut after: Option<QueueCursor> = None;
        loop {
            let page = store
                .pending_approvals_in(shard, after.as_ref(), 3)
                .await
                .expect("a page");
            in_shard.extend(page.items);
            match page.next {
                Some(next) => after = Some(QueueCursor::parse(&next).expect("a cursor")),
                None => break,
            }
        }
        let times: Vec<_> = in_shard.iter().map(|p| p.requested_at).collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "shard {shard}: {times:?}"
        );
        for p in &in_shard {
            let expected = store_dynamodb::approval_shard(p.order_id.as_str());
            assert_eq!(shard, expected, "{}", p.order_id);
        }
        used += u32::from(!in_shard.is_empty());
        seen.extend(in_shard.into_iter().map(|p| p.order_id));
    }
    assert!(used > 5, "40 orders spread over {used} shards");
    let mut expected = ids.clone();
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected, "every waiting order once");

    // The operators' list: all of them, oldest first, across pages.
    let listed = testkit::all_pages(7, |after| {
        let store = store.clone();
        async move {
            let cursor = after.map(|a| QueueCursor::parse(&a).expect("a cursor"));
            store.pending_approvals(cursor.as_ref(), 7).await
        }
    })
    .await;
    let listed: Vec<_> = listed.into_iter().map(|p| p.order_id).collect();
    assert_eq!(listed, ids);
}

/// Orders in the sparse outbox index, read straight from it, every shard.
async fn in_outbox(client: &Client, store: &DynamoStore) -> Vec<String> {
    let mut pks = Vec::new();
    for shard in 0..store_dynamodb::CREATED_SHARDS {
        let page = client
            .query()
            .table_name(store.table())
            .index_name(store_dynamodb::table::OUTBOX_INDEX)
            .key_condition_expression("#s = :shard")
            .expression_attribute_names("#s", store_dynamodb::table::OUTBOX_SHARD)
            .expression_attribute_values(
                ":shard",
                AttributeValue::S(store_dynamodb::table::outbox_shard(shard)),
            )
            .send()
            .await
            .expect("query index");
        pks.extend(page.items().iter().map(|item| {
            item[store_dynamodb::PARTITION_KEY]
                .as_s()
                .expect("pk")
                .clone()
        }));
    }
    pks
}

/// The outbox index holds an order exactly while a status it reached is not dispatched; a
/// re-park, which reaches nothing new but marks the order again, is taken out by the next read.
#[tokio::test]
async fn the_outbox_index_holds_an_order_only_while_an_event_waits() {
    use store::WebhookRepository;
    let (client, store) = fresh_store().await;
    let id = order_id("outbox");
    let pk = format!("ORDER#{id}");
    store
        .create(new_order(&id), &execution_arn(&id))
        .await
        .expect("create");
    assert_eq!(in_outbox(&client, &store).await, std::slice::from_ref(&pk));
    let dispatch_all = || async {
        for event in store.undispatched(100).await.expect("undispatched") {
            store.dispatch(&event, &[]).await.expect("dispatch");
        }
    };
    dispatch_all().await;
    assert!(in_outbox(&client, &store).await.is_empty());

    store
        .park_approval(&id, "token-1", now(), None)
        .await
        .expect("park");
    assert_eq!(in_outbox(&client, &store).await, std::slice::from_ref(&pk));
    dispatch_all().await;
    assert!(in_outbox(&client, &store).await.is_empty());

    store
        .park_approval(&id, "token-2", now(), None)
        .await
        .expect("park again");
    assert_eq!(in_outbox(&client, &store).await, std::slice::from_ref(&pk));
    assert!(store.undispatched(100).await.expect("read").is_empty());
    assert!(in_outbox(&client, &store).await.is_empty(), "tidied");
    let events = store.order_events(&id).await.expect("events");
    assert_eq!(
        events.iter().map(|e| e.status).collect::<Vec<_>>(),
        [OrderStatus::Accepted, OrderStatus::AwaitingApproval],
        "a re-park reaches nothing new"
    );
}

#[test]
fn ci_installs_the_moto_version_these_tests_were_checked_against() {
    let ci = include_str!("../../.ci/run");
    let pin = format!("'moto[server]=={}'", moto::MOTO_VERSION);
    assert!(ci.contains(&pin), ".ci/run must install {pin}");
}
