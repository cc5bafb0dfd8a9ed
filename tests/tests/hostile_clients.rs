//! Clients that misbehave at the connection level, against the real binary: one that connects and
//! sends nothing, one that sends its headers or body a byte at a time, one that stalls across a
//! stop, and header blocks no client should send. Each is cut off within bounded time (the
//! connection closed, or 408/431), never answered 2xx/5xx, and never holds the service.

use blackbox::raw::{Answer, Raw, RawResponse};
use blackbox::{Db, START_STOP, Server, TOKEN, order, serve_command};
use std::time::Duration;

/// The `--read-timeout` of these tests: short, so a cut-off comes quickly.
const READ_TIMEOUT: &str = "1s";
/// How slowly the slow clients send: one byte per this (a header or body takes tens of seconds).
const BYTE_EVERY: Duration = Duration::from_millis(100);
const PROBLEM_JSON: &str = "application/problem+json";

fn start(db: &Db) -> Server {
    let mut cmd = serve_command(db);
    cmd.args(["--operator-token", TOKEN, "--read-timeout", READ_TIMEOUT]);
    Server::spawn(cmd)
}

/// A well-behaved `GET`, on its own connection.
fn get(server: &Server, path: &str) -> RawResponse {
    let mut conn = Raw::connect(server.addr);
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {TOKEN}\r\n\
         Connection: close\r\n\r\n"
    );
    assert!(
        conn.send(request.as_bytes()).is_none(),
        "GET {path} refused"
    );
    match conn.answer(START_STOP) {
        Answer::Response(r) => r,
        Answer::Closed => panic!("GET {path}: the connection closed without an answer"),
    }
}

/// The head of a `POST /orders` announcing `length` bytes of JSON.
fn post_head(length: usize) -> String {
    format!(
        "POST /orders HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {TOKEN}\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// A slow client may be disconnected, or told 408; nothing else.
fn cut_off(answer: Answer, what: &str) {
    match answer {
        Answer::Closed => {}
        Answer::Response(r) => assert_eq!(r.status, 408, "{what}: {}", r.head),
    }
}

#[test]
fn a_connection_that_sends_nothing_is_closed_while_others_are_answered() {
    let db = Db::new();
    let server = start(&db);
    let mut silent: Vec<Raw> = (0..20).map(|_| Raw::connect(server.addr)).collect();
    // Held connections take nothing from anyone else.
    assert_eq!(get(&server, "/healthz").status, 200);
    for conn in &mut silent {
        cut_off(conn.answer(START_STOP), "a silent connection");
    }
    assert_eq!(get(&server, "/healthz").status, 200);
    server.stop();
}

#[test]
fn headers_sent_slower_than_the_read_timeout_are_cut_off() {
    let db = Db::new();
    let server = start(&db);
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: {}\r\n\r\n",
        "a".repeat(200)
    );
    let mut slow = Raw::connect(server.addr);
    let answer = slow.dribble(request.as_bytes(), BYTE_EVERY, START_STOP);
    cut_off(answer, "headers a byte at a time");
    server.stop();
}

#[test]
fn a_body_sent_slower_than_the_read_timeout_is_408_and_nothing_is_stored() {
    let db = Db::new();
    let server = start(&db);
    let body = order("slow-body", "book", 1, 1_000, "pm_card_visa").to_string();

    // A byte at a time: the body would take ~40 s; the read timeout is 1 s.
    let mut slow = Raw::connect(server.addr);
    assert!(slow.send(post_head(body.len()).as_bytes()).is_none());
    let answer = slow.dribble(body.as_bytes(), BYTE_EVERY, START_STOP);
    let Answer::Response(r) = answer else {
        panic!("a slow body is answered 408, not just dropped");
    };
    assert_eq!(r.status, 408, "{}", r.head);
    assert_eq!(r.header("content-type"), Some(PROBLEM_JSON), "{}", r.head);
    assert_eq!(r.header("connection"), Some("close"), "{}", r.head);
    let problem: serde_json::Value = serde_json::from_slice(&r.body).expect("a JSON problem");
    assert_eq!(
        problem["type"],
        "https://fulfillment.dev/problems/body-timeout"
    );
    assert_eq!(problem["status"], 408);
    assert!(matches!(slow.answer(START_STOP), Answer::Closed));

    // Half a body, then nothing: the same.
    let mut stalled = Raw::connect(server.addr);
    assert!(stalled.send(post_head(body.len()).as_bytes()).is_none());
    assert!(stalled.send(&body.as_bytes()[..body.len() / 2]).is_none());
    match stalled.answer(START_STOP) {
        Answer::Response(r) => assert_eq!(r.status, 408, "{}", r.head),
        Answer::Closed => panic!("a stalled body is answered 408"),
    }

    assert_eq!(get(&server, "/orders/slow-body/status").status, 404);
    server.stop();
}

#[test]
fn a_body_announced_beyond_the_limit_is_413_without_waiting_for_it() {
    let db = Db::new();
    let server = start(&db);
    // 10 GiB announced, nothing sent: answered at once, not after the read timeout (408).
    let mut conn = Raw::connect(server.addr);
    assert!(conn.send(post_head(10 << 30).as_bytes()).is_none());
    let Answer::Response(r) = conn.answer(START_STOP) else {
        panic!("an announced oversized body is answered 413");
    };
    assert_eq!(r.status, 413, "{}", r.head);
    assert_eq!(r.header("content-type"), Some(PROBLEM_JSON), "{}", r.head);
    assert_eq!(get(&server, "/orders/any/status").status, 404);
    server.stop();
}

#[test]
fn a_stalled_client_does_not_hold_up_a_stop() {
    let db = Db::new();
    let server = start(&db);
    let mut silent = Raw::connect(server.addr);
    let mut half_header = Raw::connect(server.addr);
    assert!(
        half_header
            .send(b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Half: ")
            .is_none()
    );
    let mut half_body = Raw::connect(server.addr);
    assert!(half_body.send(post_head(100).as_bytes()).is_none());
    assert!(half_body.send(b"{\"orderId\":").is_none());
    // Connections are accepted in order: once a later one is answered, these are the
    // service's to deal with.
    assert_eq!(get(&server, "/healthz").status, 200);

    // `stop` asserts a clean exit within START_STOP.
    let server = server.stop();
    assert!(
        server.stdout.text().contains("bye"),
        "{}",
        server.stdout.text()
    );
    for conn in [&mut silent, &mut half_header, &mut half_body] {
        cut_off(conn.answer(START_STOP), "a stalled connection at a stop");
    }
}

#[test]
fn a_huge_header_block_or_too_many_headers_are_refused_with_431() {
    let db = Db::new();
    let server = start(&db);
    let request = |headers: &str| format!("GET /healthz HTTP/1.1\r\nHost: test\r\n{headers}\r\n");
    let big = |bytes: usize| request(&format!("X-Big: {}\r\n", "a".repeat(bytes)));
    let many = |n: usize| request(&(0..n).map(|i| format!("X-H{i}: v\r\n")).collect::<String>());

    for (what, refused) in [
        ("a 1 MiB header", big(1024 * 1024)),
        ("a header block just over 16 KiB", big(16 * 1024)),
        ("101 headers", many(100)),
        ("10,000 headers", many(10_000)),
    ] {
        let mut conn = Raw::connect(server.addr);
        let answer = conn
            .send(refused.as_bytes())
            .unwrap_or_else(|| conn.answer(START_STOP));
        match answer {
            Answer::Closed => {}
            Answer::Response(r) => assert_eq!(r.status, 431, "{what}: {}", r.head),
        }
    }
    // Just within the limits, a request is answered.
    for (what, fine) in [
        ("a 12 KiB header", big(12 * 1024)),
        ("99 headers", many(98)),
    ] {
        let mut conn = Raw::connect(server.addr);
        assert!(conn.send(fine.as_bytes()).is_none(), "{what}");
        match conn.answer(START_STOP) {
            Answer::Response(r) => assert_eq!(r.status, 200, "{what}: {}", r.head),
            Answer::Closed => panic!("{what}: closed without an answer"),
        }
    }
    server.stop();
}
