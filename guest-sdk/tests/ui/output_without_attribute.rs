use toolhost_sdk::prelude::*;

struct EchoOutput {
    message: String,
}

/// Repeat a message back.
#[tool]
fn echo(input: String) -> ToolResult<EchoOutput> {
    Ok(EchoOutput { message: input }.into())
}

fn main() {}
