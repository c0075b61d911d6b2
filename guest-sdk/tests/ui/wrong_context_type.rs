use toolhost_sdk::prelude::*;

/// Repeat a message back.
#[tool]
fn echo(input: String, cx: &String) -> ToolResult<String> {
    Ok(format!("{cx}{input}").into())
}

fn main() {}
