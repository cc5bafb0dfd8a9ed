//! The `fulfillment` binary (to come with the HTTP API).

fn main() {}
