//! The README and the pages under `docs/` are where users read the saga's error names, sandbox
//! values and settings: together they must name every one the code has.

use clap::CommandFactory;
use providers::sandbox::{
    PM_DECLINED, PM_LOST_RESPONSE, PM_SUCCEEDS, PM_UNAVAILABLE_ONCE, POSTAL_REJECTED,
    POSTAL_UNAVAILABLE_ONCE,
};
use service::config::Cli;
use workflow::ErrorName;

/// README.md and every page of `docs/`, as one text.
fn readme() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut text = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut pages: Vec<_> = std::fs::read_dir(root.join("docs"))
        .expect("the docs/ pages")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    assert!(!pages.is_empty(), "no pages in docs/");
    for page in pages {
        text.push_str(&std::fs::read_to_string(page).unwrap());
    }
    text
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

#[test]
fn the_readme_documents_every_setting_of_serve() {
    let readme = readme();
    let cli = Cli::command();
    let serve = cli.find_subcommand("serve").expect("serve");
    let mut checked = 0;
    for arg in serve.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if ["help", "version"].contains(&long) {
            continue;
        }
        assert!(
            readme.contains(&format!("`--{long}`")) || readme.contains(&format!("`--{long} ")),
            "README lacks --{long}"
        );
        if let Some(env) = arg.get_env() {
            let env = env.to_string_lossy();
            assert!(readme.contains(&format!("`{env}`")), "README lacks {env}");
        }
        checked += 1;
    }
    assert!(checked > 15, "{checked} settings");
}
