//! The console's page shell (navigation, the signed-in operator, the sign-out form, a notice
//! region), its error pages, and the formatting every page shares. Every page is answered
//! `no-store` under a Content-Security-Policy that loads only the console's own files.

use super::session::{CSRF_FIELD, ConsoleOperator};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use sha2::Digest as _;
use std::sync::LazyLock;
use store::StoreError;

/// What the console's pages may load: their own scripts, styles and images, nothing inline but
/// the saga drawing's one stylesheet (allowed by its hash), no frames, forms only to the console.
static CSP: LazyLock<HeaderValue> = LazyLock::new(|| {
    let style = base64::engine::general_purpose::STANDARD
        .encode(sha2::Sha256::digest(super::graph::STYLE.as_bytes()));
    let policy = format!(
        "default-src 'none'; script-src 'self'; style-src 'self' 'sha256-{style}'; \
         img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
         base-uri 'none'"
    );
    HeaderValue::from_str(&policy).expect("a header value")
});

/// The console's sections, for the navigation: (path, label).
const SECTIONS: [(&str, &str); 5] = [
    ("/console", "Dashboard"),
    ("/console/orders", "Orders"),
    ("/console/approvals", "Approvals"),
    ("/console/incidents", "Incidents"),
    ("/console/stock", "Stock"),
];

/// A notice shown at the top of a page: what an action did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    Done(String),
    Failed(String),
}

/// An HTML answer with the console's headers.
pub fn respond(status: StatusCode, page: Markup) -> Response {
    let mut response = (status, page.into_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::CONTENT_SECURITY_POLICY, CSP.clone());
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// The shell of a signed-in page: `section` is the navigation entry it belongs to.
pub fn page(
    operator: &ConsoleOperator,
    section: &str,
    title: &str,
    notice: Option<&Notice>,
    body: Markup,
) -> Response {
    respond(
        StatusCode::OK,
        shell(operator, section, title, notice, body),
    )
}

/// The markup of [`page`].
fn shell(
    operator: &ConsoleOperator,
    section: &str,
    title: &str,
    notice: Option<&Notice>,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · fulfillment console" }
                link rel="stylesheet" href="/console/assets/console.css";
                script src="/console/assets/console.js" defer {}
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header class="top" {
                    span class="brand" { "fulfillment" }
                    nav aria-label="Console" {
                        ul {
                            @for (path, label) in SECTIONS {
                                li {
                                    @if path == section {
                                        a href=(path) aria-current="page" { (label) }
                                    } @else {
                                        a href=(path) { (label) }
                                    }
                                }
                            }
                        }
                    }
                    form class="who" method="post" action="/console/sign-out" {
                        span { "Signed in as " strong { (operator.name) } }
                        input type="hidden" name=(CSRF_FIELD) value=(operator.csrf);
                        button type="submit" { "Sign out" }
                    }
                }
                main id="main" tabindex="-1" {
                    h1 { (title) }
                    div role="status" class="notices" {
                        @match notice {
                            Some(Notice::Done(text)) => p class="notice done" { (text) },
                            Some(Notice::Failed(text)) => p class="notice failed" { (text) },
                            None => {},
                        }
                    }
                    (body)
                }
            }
        }
    }
}

/// The sign-in page, with what went wrong with the last attempt.
pub fn sign_in(error: Option<&str>, status: StatusCode) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Sign in · fulfillment console" }
                link rel="stylesheet" href="/console/assets/console.css";
            }
            body {
                main id="main" class="sign-in" {
                    h1 { "fulfillment console" }
                    p { "Sign in with an operator API key (" code { "fulfillment keys create --role operator" } ")." }
                    @if let Some(error) = error {
                        p class="notice failed" role="alert" id="sign-in-error" { (error) }
                    }
                    form method="post" action="/console/sign-in" {
                        label for="key" { "Operator API key" }
                        input id="key" name="key" type="password" autocomplete="off" required
                            aria-describedby=[error.map(|_| "sign-in-error")];
                        button type="submit" { "Sign in" }
                    }
                }
            }
        }
    };
    respond(status, markup)
}

/// A page that stands alone (no session needed to read it): an error.
fn bare(status: StatusCode, title: &str, text: &str) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) " · fulfillment console" }
                link rel="stylesheet" href="/console/assets/console.css";
            }
            body {
                main id="main" {
                    h1 { (title) }
                    p { (text) }
                    p { a href="/console" { "Back to the console" } }
                }
            }
        }
    };
    respond(status, markup)
}

/// `403`: a form without this session's token, or from another site.
pub fn forbidden(text: &str) -> Response {
    bare(StatusCode::FORBIDDEN, "Refused", text)
}

/// `404`.
pub fn not_found(text: &str) -> Response {
    bare(StatusCode::NOT_FOUND, "Not found", text)
}

/// `400`: a filter or form the console cannot read.
pub fn bad_request(text: &str) -> Response {
    bare(StatusCode::BAD_REQUEST, "Cannot do that", text)
}

/// `503`: a backend failed; nothing was changed by this page.
pub fn unavailable(error: &StoreError) -> Response {
    tracing::warn!(error = %error, "console: a backend is unavailable");
    bare(
        StatusCode::SERVICE_UNAVAILABLE,
        "Unavailable",
        "a backend is unavailable; try again in a moment",
    )
}

/// `503` for any other backend failure, with words fit to show.
pub fn unavailable_text(text: &str) -> Response {
    bare(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", text)
}

/// A time as operators read it: UTC, to the second.
pub fn time(t: DateTime<Utc>) -> Markup {
    let text = t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    html! { time datetime=(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)) { (text) } }
}

/// An amount in a currency's minor unit, as `12.50 EUR` (two decimals: the catalog's
/// currencies all have two).
pub fn money(cents: u64, currency: &str) -> String {
    format!("{}.{:02} {currency}", cents / 100, cents % 100)
}

/// A span of time as "3 h 12 min", "45 s".
pub fn span(d: chrono::Duration) -> String {
    let secs = d.num_seconds();
    if secs < 0 {
        return "past".to_owned();
    }
    let (days, hours, mins) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60);
    if days > 0 {
        format!("{days} d {hours} h")
    } else if hours > 0 {
        format!("{hours} h {mins} min")
    } else if mins > 0 {
        format!("{mins} min")
    } else {
        format!("{secs} s")
    }
}

/// A status as a badge (its class names the status, for colour; the text says it).
pub fn status_badge(status: store::OrderStatus) -> Markup {
    html! { span class={ "badge s-" (status.as_str().to_ascii_lowercase()) } { (status.as_str()) } }
}

/// JSON shown as preformatted text (escaped like every other text).
pub fn json_block(value: &serde_json::Value) -> Markup {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    html! { pre class="json" { (text) } }
}

/// The hidden CSRF field of a form.
pub fn csrf(operator: &ConsoleOperator) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(operator.csrf); }
}

/// Markup the caller built as a string already (the saga's SVG, whose text it escaped).
pub fn trusted(svg: String) -> PreEscaped<String> {
    PreEscaped(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_and_spans_read_as_people_write_them() {
        assert_eq!(money(1250, "EUR"), "12.50 EUR");
        assert_eq!(money(5, "USD"), "0.05 USD");
        assert_eq!(span(chrono::Duration::seconds(45)), "45 s");
        assert_eq!(
            span(chrono::Duration::seconds(3 * 3600 + 720)),
            "3 h 12 min"
        );
        assert_eq!(span(chrono::Duration::days(2)), "2 d 0 h");
        assert_eq!(span(chrono::Duration::seconds(-1)), "past");
    }

    #[test]
    fn text_put_in_a_page_is_escaped() {
        let op = ConsoleOperator::for_tests("<script>");
        let text = shell(&op, "/console", "a <b> title", None, html! {}).into_string();
        assert!(
            !text.contains("<script>") && !text.contains("<b>"),
            "{text}"
        );
        assert!(text.contains("&lt;script&gt;"), "{text}");
        let r = page(&op, "/console", "t", None, html! {});
        let csp = r.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(csp.contains("script-src 'self'"));
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-store");
    }
}
