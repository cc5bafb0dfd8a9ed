//! Who may do what, against the real binary over HTTP: keys made with `fulfillment keys` beside
//! the running service, a client that sees and acts on its own orders only (another client's
//! order is a 404, its id a bare 409), operators who decide under their own names, a history
//! without our workers' names for a client, and a revoked key refused within seconds.

use blackbox::{Db, Server, command_on_store, keys_create, order};
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sees_and_acts_on_its_own_orders_only() {
    let db = Db::new();
    let server = Server::start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    let bob = keys_create(&db, "bob-shop", "client");
    let grace = keys_create(&db, "grace", "operator");
    server.stock("book", 10, 1_500).await;
    server.stock("piano", 1, 450_000).await;

    let placed = server
        .place_as(&order("alice-1", "book", 1, 1_500, "pm_card_visa"), &alice)
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    for path in [
        "/orders/alice-1",
        "/orders/alice-1/status",
        "/orders/alice-1/history",
    ] {
        let mine = server.send(Method::GET, path, None, Some(&alice)).await;
        assert_eq!(mine.status, StatusCode::OK, "{path}: {}", mine.text);
        // Another client's order does not exist for bob: the same answer as a made-up id.
        let theirs = server.send(Method::GET, path, None, Some(&bob)).await;
        let none = server
            .send(
                Method::GET,
                &path.replace("alice-1", "nobody-1"),
                None,
                Some(&bob),
            )
            .await;
        assert_eq!(
            theirs.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            theirs.text
        );
        assert_eq!(theirs.problem(), none.problem());
        let seen = server.send(Method::GET, path, None, Some(&grace)).await;
        assert_eq!(
            seen.status,
            StatusCode::OK,
            "operators see every order: {path}"
        );
    }
    // The id is global (it names the execution): bob cannot take it, and learns nothing of it.
    let taken = server
        .place_as(&order("alice-1", "book", 1, 1_500, "pm_card_visa"), &bob)
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{}", taken.text);
    assert_eq!(taken.problem().as_deref(), Some("order-id-taken"));
    assert!(!taken.text.contains("alice-shop"), "{}", taken.text);
    assert!(!taken.replayed());
    // Alice's own retry replays.
    let again = server
        .place_as(&order("alice-1", "book", 1, 1_500, "pm_card_visa"), &alice)
        .await;
    assert!(again.replayed(), "{}", again.text);

    // A client key opens no operator endpoint.
    for (method, path, body) in [
        (Method::GET, "/approvals", None),
        (
            Method::PUT,
            "/inventory/book",
            Some(json!({"available": 99})),
        ),
        (
            Method::POST,
            "/orders/alice-1/approval",
            Some(json!({"decision": "approve"})),
        ),
    ] {
        let r = server.send(method, path, body.as_ref(), Some(&alice)).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}: {}", r.text);
        assert_eq!(r.problem().as_deref(), Some("forbidden"));
    }
    // The refused count changed nothing: the one book alice's order took is all that moved.
    server.reaches("alice-1", "COMPLETED").await;
    assert_eq!(
        server
            .request(Method::GET, "/inventory/book", None)
            .await
            .json()["available"],
        9
    );

    // A large order: grace approves it under her own name, which alice does not see.
    let large = order("alice-2", "piano", 1, 450_000, "pm_card_visa");
    server.place_as(&large, &alice).await;
    server.reaches("alice-2", "AWAITING_APPROVAL").await;
    let decided = server
        .send(
            Method::POST,
            "/orders/alice-2/approval",
            Some(&json!({"decision": "approve"})),
            Some(&grace),
        )
        .await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.text);
    let ops_view = server.ends("alice-2", "COMPLETED", "SUCCEEDED").await;
    assert_eq!(ops_view["approval"]["decidedBy"], "grace", "{ops_view}");
    let alice_view = server
        .send(Method::GET, "/orders/alice-2/status", None, Some(&alice))
        .await
        .json();
    assert_eq!(alice_view["approval"]["decision"], "approve");
    assert!(
        alice_view["approval"]["decidedBy"].is_null(),
        "{alice_view}"
    );
    // Her history names no worker of ours and no operator.
    let history = server
        .send(
            Method::GET,
            "/orders/alice-2/history?maxResults=1000",
            None,
            Some(&alice),
        )
        .await;
    assert_eq!(history.status, StatusCode::OK);
    assert!(!history.text.contains("workerName"), "{}", history.text);
    assert!(!history.text.contains("grace"), "{}", history.text);
    let ops_history = server
        .send(
            Method::GET,
            "/orders/alice-2/history?maxResults=1000",
            None,
            Some(&grace),
        )
        .await;
    assert!(
        ops_history.text.contains("workerName"),
        "operators see the workers"
    );
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_key_is_refused_within_seconds_and_the_principal_s_other_key_goes_on() {
    let db = Db::new();
    let server = Server::start(&db);
    let old = keys_create(&db, "rotating-shop", "client");
    let new = keys_create(&db, "rotating-shop", "client");
    server.stock("book", 5, 1_500).await;
    server
        .place_as(&order("rot-1", "book", 1, 1_500, "pm_card_visa"), &old)
        .await;
    let ok = server
        .send(Method::GET, "/orders/rot-1/status", None, Some(&old))
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);

    // The key's id is the part after `fk_`; `keys list` shows it with its principal.
    let key_id = old.split('_').nth(1).unwrap();
    let listed = command_on_store(&db, &["keys", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(key_id) && l.contains("rotating-shop\tclient")),
        "{listed}"
    );
    assert!(!listed.contains(&old), "a key is never shown again");
    let revoked = command_on_store(&db, &["keys", "revoke", key_id])
        .output()
        .unwrap();
    assert!(
        revoked.status.success(),
        "{}",
        String::from_utf8_lossy(&revoked.stderr)
    );

    // Refused within the cache's few seconds (10 s at most, as promised).
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let r = server
            .send(Method::GET, "/orders/rot-1/status", None, Some(&old))
            .await;
        if r.status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            Instant::now() < until,
            "a revoked key still works: {}",
            r.text
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The principal's other key still reaches its order: rotation without downtime.
    let other = server
        .send(Method::GET, "/orders/rot-1/status", None, Some(&new))
        .await;
    assert_eq!(other.status, StatusCode::OK, "{}", other.text);

    // A name keeps its role; a bad name or an unknown key is a clear error (exit 2).
    for words in [
        &[
            "keys",
            "create",
            "--name",
            "rotating-shop",
            "--role",
            "operator",
        ][..],
        &["keys", "create", "--name", "no spaces", "--role", "client"][..],
        &["keys", "revoke", "0000000000000000"][..],
    ] {
        let out = command_on_store(&db, words).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{words:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    server.stop();
}
