use toolhost_sdk::prelude::*;

/// Repeat a message back.
#[tool]
struct Echo;

fn main() {}
