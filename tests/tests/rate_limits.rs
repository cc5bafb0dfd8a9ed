//! Rate limits over HTTP against the binary: a key past its bucket is answered `429` with
//! `Retry-After` while another key is served in full, and an address guessing keys is throttled
//! without locking out the keys it already used.

use blackbox::{Db, Reply, Server, TOKEN, keys_create, serve_command};
use reqwest::{Method, StatusCode};
use std::time::Duration;

fn retry_after(reply: &Reply) -> u64 {
    reply
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "a whole number of seconds in Retry-After: {:?}",
                reply.headers
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_at_its_limit_is_refused_while_another_is_served() {
    let db = Db::new();
    let mut cmd = serve_command(&db);
    cmd.args([
        "--operator-token",
        TOKEN,
        "--rate-limit",
        "1",
        "--rate-limit-burst",
        "10",
    ]);
    let server = Server::spawn(cmd);
    let alice = keys_create(&db, "alice", "client");
    let bob = keys_create(&db, "bob", "client");

    // Alice sends far more than her bucket holds, as fast as she can.
    let refused = server
        .until_refused("/inventory", &alice, 60)
        .await
        .expect("a key past its burst is refused");
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.text
    );
    assert_eq!(refused.problem().as_deref(), Some("rate-limited"));
    assert_eq!(
        refused.header("content-type"),
        Some("application/problem+json")
    );
    let wait = retry_after(&refused);
    assert!((1..=2).contains(&wait), "one token a second: {wait}");

    // Bob's bucket is his own: all of his burst is served while Alice is refused.
    for n in 0..10 {
        let r = server
            .send(Method::GET, "/inventory", None, Some(&bob))
            .await;
        assert_eq!(r.status, StatusCode::OK, "bob's request {n}: {}", r.text);
    }
    let still = server
        .send(Method::GET, "/inventory", None, Some(&alice))
        .await;
    assert_eq!(
        still.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        still.text
    );

    // After the time Retry-After gave, Alice is served again.
    tokio::time::sleep(Duration::from_secs(retry_after(&still))).await;
    let again = server
        .send(Method::GET, "/inventory", None, Some(&alice))
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_keys_is_throttled_per_address_and_keys_in_use_keep_working() {
    let db = Db::new();
    let mut cmd = serve_command(&db);
    cmd.args(["--operator-token", TOKEN, "--failed-auth-limit", "3"]);
    let server = Server::spawn(cmd);
    let shop = keys_create(&db, "shop", "client");
    let fresh = keys_create(&db, "fresh", "client");
    // The shop's key is in use: this replica checked it a moment ago.
    let r = server
        .send(Method::GET, "/inventory", None, Some(&shop))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    for n in 0..3 {
        let guess = format!("fk_{n:016x}_not-a-key-at-all-aaaaaaaaaaaaaaaaaaaaaaaa");
        let r = server
            .send(Method::GET, "/inventory", None, Some(&guess))
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "guess {n}: {}", r.text);
    }
    // The fourth guess from this address is not even looked up.
    let r = server
        .send(Method::GET, "/inventory", None, Some("fk_0_another-guess"))
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    assert_eq!(r.problem().as_deref(), Some("rate-limited"));
    let wait = retry_after(&r);
    assert!((1..=20).contains(&wait), "three a minute: {wait}");
    // A key in use from the same address is still served; a key this replica has not seen yet
    // waits like a guess (it would cost a lookup).
    let r = server
        .send(Method::GET, "/inventory", None, Some(&shop))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = server
        .send(Method::GET, "/inventory", None, Some(&fresh))
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    // No credential at all is still a 401: there is nothing to guess.
    let r = server.anonymous(Method::GET, "/inventory", None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    server.stop();
}
