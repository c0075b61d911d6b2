use toolhost_sdk::prelude::*;

#[tool]
fn echo(input: String) -> ToolResult<String> {
    Ok(input.into())
}

fn main() {}
