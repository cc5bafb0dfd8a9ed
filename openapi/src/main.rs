//! Regenerates `openapi/openapi.json` from the code: `cargo run --release -p openapi`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let path = openapi::path();
    let json = openapi::render();
    let unchanged = std::fs::read_to_string(&path).is_ok_and(|old| old == json);
    if unchanged {
        println!("{} is up to date", path.display());
        return ExitCode::SUCCESS;
    }
    match std::fs::write(&path, json) {
        Ok(()) => {
            println!("wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
