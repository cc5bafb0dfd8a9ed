//! The README is the one place users read the saga's error names, sandbox values and settings:
//! it must name every one the code has.

use api::config::Cli;
use clap::CommandFactory;
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
