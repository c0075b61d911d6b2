use toolhost_sdk::prelude::*;

/// Runs code.
#[tool]
fn execute(input: String) -> ToolResult<String> {
    Ok(input.into())
}

/// Has no name.
#[tool(name = "")]
fn nameless(input: String) -> ToolResult<String> {
    Ok(input.into())
}

/// Has a long name.
#[tool(name = "a_name_that_goes_on_and_on_and_on_far_beyond_what_the_host_accepts")]
fn long(input: String) -> ToolResult<String> {
    Ok(input.into())
}

fn main() {}
