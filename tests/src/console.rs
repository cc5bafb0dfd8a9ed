//! The operator console over plain HTTP: sign in with a key into a session cookie, read pages
//! with it (redirects shown, not followed), and the CSRF token its forms carry.

use crate::Server;
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};

/// A client that shows redirects instead of following them.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Signs in with `key`: the answer's status and the session cookie (`name=value`), if one was
/// set.
pub async fn sign_in(server: &Server, key: &str) -> (StatusCode, Option<String>) {
    let r = http()
        .post(server.url("/console/sign-in"))
        .form(&[("key", key)])
        .send()
        .await
        .unwrap();
    let cookie = r
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("fulfillment_console=") && !c.starts_with("fulfillment_console=;"))
        .map(|c| c.split(';').next().unwrap().to_owned());
    (r.status(), cookie)
}

/// `GET path` with the session cookie: status, `Location` (or empty), body.
pub async fn get(server: &Server, cookie: &str, path: &str) -> (StatusCode, String, String) {
    let r = http()
        .get(server.url(path))
        .header(COOKIE, cookie)
        .send()
        .await
        .unwrap();
    let location = location(&r);
    (r.status(), location, r.text().await.unwrap())
}

/// `POST path` with the session cookie and `form`: status and `Location`.
pub async fn post(
    server: &Server,
    cookie: &str,
    path: &str,
    form: &[(&str, &str)],
) -> (StatusCode, String) {
    let r = http()
        .post(server.url(path))
        .header(COOKIE, cookie)
        .form(form)
        .send()
        .await
        .unwrap();
    let location = location(&r);
    (r.status(), location)
}

/// The answer's `Location`, or empty.
fn location(r: &reqwest::Response) -> String {
    r.headers()
        .get(LOCATION)
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// The CSRF token a console page's forms carry.
pub fn csrf_of(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    page[at..].split('"').next().unwrap().to_owned()
}
