use toolhost_sdk::prelude::*;

/// Repeat a message back.
#[tool]
fn echo(input: String) -> String {
    input
}

fn main() {}
