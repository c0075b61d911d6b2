use toolhost_sdk::prelude::*;

/// Repeat a message back.
#[tool(title = "Echo")]
fn echo(input: String) -> ToolResult<String> {
    Ok(input.into())
}

/// Repeat a message back.
#[tool(name = "echo", name = "again")]
fn echo_twice(input: String) -> ToolResult<String> {
    Ok(input.into())
}

fn main() {}
