//! The text of a caught panic, for logs and 500 answers of the servers in this crate.

use std::any::Any;

/// The panic's message when it carried one (`panic!("…")` gives a `&str` or a `String`).
pub fn message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic")
}
