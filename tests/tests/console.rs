//! The operator console (`/console`) against the real binary.
//!
//! Over plain HTTP: a session needs an operator's key, every action its session's CSRF token
//! and the console's own origin, signing out ends the session, and revoking the key it was
//! opened with ends it too.
//!
//! In a real browser (headless Chromium through chromedriver; `.ci/run console`, which installs
//! them and axe-core): an operator signs in with the keyboard, finds an order, approves it and
//! watches it ship, cancels another, rejects three with a bulk action after its dry run, and
//! signs out; every page passes axe-core's WCAG 2 A/AA rules, and each step leaves a
//! screenshot under `target/console-screenshots/`.

use blackbox::console::{csrf_of, get, http, post, sign_in};
use blackbox::{Db, Server, command_on_store, keys_create, order};
use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, ORIGIN};
use serde_json::json;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A service with stock, an operator `alice` and orders `ids` waiting for approval.
async fn service_with_orders(ids: &[&str]) -> (Db, Server, String) {
    let db = Db::new();
    let server = Server::start(&db);
    let alice = keys_create(&db, "alice", "operator");
    server.stock("piano", 100, 450_000).await;
    server.stock("book", 100, 1_500).await;
    for id in ids {
        let r = server
            .place(&order(id, "piano", 1, 450_000, "pm_card_visa"))
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    }
    for id in ids {
        server.reaches(id, "AWAITING_APPROVAL").await;
    }
    (db, server, alice)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_sessions_need_an_operator_key_and_every_action_its_token() {
    let (db, server, alice) = service_with_orders(&["csrf-1"]).await;
    let shop = keys_create(&db, "shop", "client");

    // No session: every page sends the browser to the sign-in page.
    let (status, location, _) = get(&server, "fulfillment_console=forged", "/console/orders").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(location, "/console/sign-in");

    // A client's key, an unknown key and no key open no session, and say why in the page.
    for key in [shop.as_str(), "fk_0000000000000000_nope", ""] {
        let (status, cookie) = sign_in(&server, key).await;
        assert!(status.is_client_error(), "{key:?}: {status}");
        assert_eq!(cookie, None, "{key:?}");
    }

    let (status, cookie) = sign_in(&server, &alice).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = cookie.expect("a session cookie");
    let (status, _, page) = get(&server, &cookie, "/console/orders/csrf-1").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("Signed in as <strong>alice</strong>"),
        "{page}"
    );
    let token = csrf_of(&page);

    // Without the token, with another session's, or from another site: refused, nothing done.
    let cancel = server.url("/console/orders/csrf-1/cancel");
    for (form, origin) in [
        (vec![("note", "no token")], None),
        (vec![("csrf", "not-the-token"), ("note", "wrong")], None),
        (vec![("csrf", token.as_str())], Some("https://evil.example")),
    ] {
        let mut request = http().post(&cancel).header(COOKIE, &cookie).form(&form);
        if let Some(origin) = origin {
            request = request.header(ORIGIN, origin);
        }
        let r = request.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{form:?}");
    }
    let status = server.status("csrf-1").await;
    assert!(status["cancellation"].is_null(), "{status}");

    // With it: done, recorded with the operator's name.
    let r = http()
        .post(&cancel)
        .header(COOKIE, &cookie)
        .header(ORIGIN, server.base.as_str())
        .form(&[("csrf", token.as_str()), ("note", "customer called")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    server.reaches("csrf-1", "CANCELLED").await;
    let (_, _, page) = get(&server, &cookie, "/console/orders/csrf-1").await;
    assert!(
        page.contains("Cancellation asked by <strong>alice</strong> (operator)"),
        "{page}"
    );
    assert!(page.contains("customer called"), "{page}");

    // A notice only this session's redirect signed is shown; a crafted link's is not.
    let (_, _, page) = get(
        &server,
        &cookie,
        "/console/orders/csrf-1?failed=Call%20%2B1%20555%200100&sig=forged",
    )
    .await;
    assert!(!page.contains("Call +1 555 0100"), "{page}");

    // Signing out ends the session on the server, not only in this browser.
    let (status, _) = post(&server, &cookie, "/console/sign-out", &[("csrf", &token)]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, location, _) = get(&server, &cookie, "/console").await;
    assert_eq!(
        (status, location.as_str()),
        (StatusCode::SEE_OTHER, "/console/sign-in")
    );

    // Revoking the key ends the sessions opened with it, within the key cache's seconds.
    let (_, cookie) = sign_in(&server, &alice).await;
    let cookie = cookie.unwrap();
    assert_eq!(get(&server, &cookie, "/console").await.0, StatusCode::OK);
    let key_id = alice.split('_').nth(1).unwrap();
    let revoked = command_on_store(&db, &["keys", "revoke", key_id])
        .output()
        .unwrap();
    assert!(revoked.status.success());
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, location, _) = get(&server, &cookie, "/console").await;
        if status == StatusCode::SEE_OTHER && location == "/console/sign-in" {
            break;
        }
        assert!(
            Instant::now() < until,
            "a revoked key's session still works"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // The JSON API keeps its bearer keys: a console cookie is no credential there.
    let r = http()
        .get(server.url("/orders/csrf-1/status"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

/// chromedriver and a headless Chromium session, closed on drop.
struct Browser {
    driver: Child,
    client: Option<Client>,
    _profile: tempfile::TempDir,
    shots: PathBuf,
    axe: String,
}

impl Browser {
    async fn start() -> Browser {
        let chromedriver =
            std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
        let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let axe_path = std::env::var("AXE_CORE")
            .expect("AXE_CORE names axe-core's axe.min.js (.ci/run console installs it)");
        let axe = std::fs::read_to_string(&axe_path).expect("read axe.min.js");
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {chromedriver}: {e}"));
        let profile = tempfile::tempdir().unwrap();
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--disable-quic",
                    "--window-size=1366,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let until = Instant::now() + Duration::from_secs(30);
        let client = loop {
            match ClientBuilder::rustls()
                .unwrap()
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) if Instant::now() < until => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("no WebDriver session: {e}"),
            }
        };
        let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots");
        std::fs::create_dir_all(&shots).unwrap();
        Browser {
            driver,
            client: Some(client),
            _profile: profile,
            shots,
            axe,
        }
    }

    fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    async fn shot(&self, name: &str) {
        let png = self.c().screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    /// The page's text as a person reads it (empty while a page is loading).
    async fn text(&self) -> String {
        self.c()
            .execute(
                "return document.body ? document.body.innerText : '';",
                vec![],
            )
            .await
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// Waits until the page (refreshing itself, or reloaded) shows `needle`.
    async fn until_text(&self, needle: &str, reload: bool) -> String {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let text = self.text().await;
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < until,
                "the page never showed {needle:?}:\n{text}"
            );
            if reload {
                self.c().refresh().await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Runs axe-core's WCAG 2 A and AA rules on the page: no violation.
    async fn accessible(&self, page: &str) {
        self.c()
            .execute(&format!("{}\nreturn 0;", self.axe), vec![])
            .await
            .unwrap();
        let found = self
            .c()
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, { runOnly: ['wcag2a', 'wcag2aa'] })
                    .then(r => done({
                        passes: r.passes.length,
                        violations: r.violations.map(v => v.id + ' (' + v.impact + '): '
                            + v.nodes.map(n => n.target.join(' ')).join(', ')),
                    }))
                    .catch(e => done({ passes: 0, violations: ['axe failed: ' + e] }));",
                vec![],
            )
            .await
            .unwrap();
        let violations = found["violations"].as_array().expect("axe's answer");
        assert!(violations.is_empty(), "{page}: {violations:#?}");
        // The rules ran (a page that axe could not read would pass nothing).
        assert!(found["passes"].as_u64().unwrap_or(0) > 5, "{page}: {found}");
    }

    /// Whether the browser is on the sign-in page.
    async fn at_sign_in(&self) -> bool {
        self.c()
            .current_url()
            .await
            .unwrap()
            .path()
            .ends_with("/console/sign-in")
    }

    async fn click(&self, css: &str) {
        self.c()
            .find(Locator::Css(css))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    async fn click_link(&self, text: &str) {
        self.c()
            .find(Locator::LinkText(text))
            .await
            .unwrap_or_else(|e| panic!("no link {text:?}: {e}"))
            .click()
            .await
            .unwrap();
    }

    async fn type_into(&self, css: &str, text: &str) {
        let field = self.c().find(Locator::Css(css)).await.unwrap();
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let _ =
                std::thread::scope(|s| s.spawn(|| handle.block_on(client.close()).is_ok()).join());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium, chromedriver and axe-core: `.ci/run console` installs them"]
async fn an_operator_signs_in_approves_cancels_bulk_rejects_and_signs_out_in_a_browser() {
    let ids = [
        "web-ship",
        "web-cancel",
        "web-bulk-1",
        "web-bulk-2",
        "web-bulk-3",
    ];
    let (_db, server, alice) = service_with_orders(&ids).await;
    let browser = Browser::start().await;
    let b = &browser;

    // Sign in, with the keyboard only.
    b.c().goto(&server.url("/console")).await.unwrap();
    assert!(b.at_sign_in().await);
    b.accessible("sign-in").await;
    b.shot("01-sign-in").await;
    b.type_into("#key", &format!("{alice}\u{E007}")).await;
    let text = b.until_text("Signed in as alice", false).await;
    assert!(text.contains("Approvals waiting"), "{text}");
    b.accessible("dashboard").await;
    b.shot("02-dashboard").await;

    // Find an order by its id.
    b.click_link("Orders").await;
    b.until_text("Order id or customer prefix", false).await;
    b.accessible("orders").await;
    b.shot("03-orders").await;
    b.type_into("#f-q", "web-ship").await;
    b.click("form.filters button[type=submit]").await;
    let text = b.until_text("Order web-ship", false).await;
    assert!(text.contains("AWAITING_APPROVAL"), "{text}");
    assert!(text.contains("4500.00 EUR"), "{text}");
    b.accessible("order").await;

    // Approve it (confirm, with a note), and watch it ship.
    b.click_link("Approve…").await;
    b.until_text("Approve order web-ship?", false).await;
    b.accessible("confirm").await;
    b.type_into("#note", "checked the address").await;
    b.click("form button.primary").await;
    b.until_text("Order web-ship approved", false).await;
    let text = b.until_text("COMPLETED", false).await;
    assert!(text.contains("Approved by alice"), "{text}");
    assert!(text.contains("checked the address"), "{text}");
    assert!(text.contains("shipmentId"), "{text}");
    let current = b
        .c()
        .find(Locator::Css("svg g.current, svg .state.current"))
        .await;
    let visited = b.c().find_all(Locator::Css("svg .visited")).await.unwrap();
    assert!(
        visited.len() >= 5,
        "the saga's path is drawn: {} states",
        visited.len()
    );
    let _ = current;
    b.shot("04-order-completed").await;
    server.reaches("web-ship", "COMPLETED").await;

    // Cancel another.
    b.c()
        .goto(&server.url("/console/orders/web-cancel"))
        .await
        .unwrap();
    b.click_link("Cancel order…").await;
    b.until_text("Cancel order web-cancel?", false).await;
    b.click("form button.danger").await;
    b.until_text("Cancellation of order web-cancel requested", false)
        .await;
    let text = b.until_text("CANCELLED", false).await;
    assert!(
        text.contains("Cancellation asked by alice (operator)"),
        "{text}"
    );
    b.shot("05-order-cancelled").await;
    server.reaches("web-cancel", "CANCELLED").await;

    // Reject the rest in bulk: a filter, a dry run with its count, then the run's progress.
    b.c()
        .goto(&server.url("/console/orders?status=AWAITING_APPROVAL"))
        .await
        .unwrap();
    b.c()
        .find(Locator::Css("#bulk-action"))
        .await
        .unwrap()
        .select_by_value("reject")
        .await
        .unwrap();
    b.type_into("#bulk-note", "duplicate test orders").await;
    b.click(".bulk button[value=dry-run]").await;
    let text = b.until_text("Reject 3 orders?", false).await;
    assert!(text.contains("The filter selects 3 orders"), "{text}");
    b.accessible("bulk dry run").await;
    b.shot("06-bulk-dry-run").await;
    for id in ["web-bulk-1", "web-bulk-2", "web-bulk-3"] {
        // The dry run changed nothing.
        assert_eq!(server.status(id).await["status"], "AWAITING_APPROVAL");
    }
    b.click("button[value=run]").await;
    let text = b.until_text("Finished: 3 of 3 orders", false).await;
    assert!(text.contains("Succeeded\n3"), "{text}");
    b.accessible("bulk progress").await;
    b.shot("07-bulk-finished").await;
    for id in ["web-bulk-1", "web-bulk-2", "web-bulk-3"] {
        let s = server.reaches(id, "CANCELLED").await;
        assert_eq!(s["approval"]["decidedBy"], "alice", "{s}");
        assert_eq!(s["approval"]["reason"], "duplicate test orders", "{s}");
    }

    // The queues and the stock page.
    for (link, needle) in [
        ("Approvals", "No order is waiting for approval."),
        ("Incidents", "No incident is open."),
        ("Stock", "piano"),
    ] {
        b.click_link(link).await;
        b.until_text(needle, false).await;
        b.accessible(link).await;
    }

    // Sign out: back to the sign-in page, and the console is closed to this browser.
    b.click("form.who button").await;
    b.until_text("Operator API key", false).await;
    b.c().goto(&server.url("/console/orders")).await.unwrap();
    assert!(b.at_sign_in().await);
    b.shot("08-signed-out").await;
}
