use toolhost_sdk::prelude::*;

struct EchoInput {
    message: String,
}

/// Repeat a message back.
#[tool]
fn echo(input: EchoInput) -> ToolResult<NoOutput> {
    Ok(Response::text(input.message))
}

fn main() {}
