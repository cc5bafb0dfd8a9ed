//! The README is the one place users read the saga's error names and sandbox values: it must
//! name every one the code has.

use store::ErrorName;
use store::sandbox::{
    PM_DECLINED, PM_LOST_RESPONSE, PM_SUCCEEDS, PM_UNAVAILABLE_ONCE, POSTAL_REJECTED,
    POSTAL_UNAVAILABLE_ONCE,
};

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap()
}

#[test]
fn the_readme_documents_every_error_name() {
    let readme = readme();
    for name in ErrorName::ALL {
        assert!(
            readme.contains(&format!("`{}`", name.as_str())),
            "README lacks {name}"
        );
    }
}

#[test]
fn the_readme_documents_every_sandbox_value() {
    let readme = readme();
    for value in [
        PM_SUCCEEDS,
        PM_DECLINED,
        PM_UNAVAILABLE_ONCE,
        PM_LOST_RESPONSE,
        POSTAL_REJECTED,
        POSTAL_UNAVAILABLE_ONCE,
    ] {
        assert!(
            readme.contains(&format!("`{value}`")),
            "README lacks {value}"
        );
    }
}
