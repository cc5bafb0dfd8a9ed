//! The service's published contract. `openapi.json` beside this crate is generated from the
//! HTTP API's annotations ([`api::http::openapi::document`]); `cargo run --release -p openapi`
//! rewrites it, and the drift test fails when the checked-in file and the code disagree.

use std::path::PathBuf;

/// The command that regenerates the file (named in the drift test's failure).
pub const REGENERATE: &str = "cargo run --release -p openapi";

/// Where the checked-in document lives.
pub fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openapi.json")
}

/// The document as it is checked in: pretty JSON with a final newline.
pub fn render() -> String {
    let mut json = api::http::openapi::document()
        .to_pretty_json()
        .expect("the OpenAPI document serializes");
    json.push('\n');
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_in_openapi_json_matches_the_code() {
        let expected = render();
        let actual = std::fs::read_to_string(path()).unwrap_or_default();
        // Line endings may be changed by a checkout; the content may not.
        assert!(
            actual.replace("\r\n", "\n") == expected,
            "{} is out of date with the HTTP API's annotations; regenerate it with `{REGENERATE}` and commit it",
            path().display()
        );
    }

    #[test]
    fn the_document_is_openapi_3_1() {
        let doc = render();
        assert!(
            doc.contains("\"openapi\": \"3.1"),
            "not an OpenAPI 3.1 document"
        );
    }
}
