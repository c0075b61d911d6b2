use toolhost_sdk::prelude::*;

/// Waits.
#[tool]
async fn waits(input: String) -> ToolResult<String> {
    Ok(input.into())
}

/// Is generic.
#[tool]
fn generic<T>(input: String) -> ToolResult<String> {
    Ok(input.into())
}

/// Takes two inputs.
#[tool]
fn two_inputs(a: String, b: String) -> ToolResult<String> {
    Ok(format!("{a}{b}").into())
}

/// Takes the context first.
#[tool]
fn context_first(cx: &Context, input: String) -> ToolResult<String> {
    Ok(format!("{}{input}", cx.agent()).into())
}

/// Takes the context mutably.
#[tool]
fn mutable_context(input: String, cx: &mut Context) -> ToolResult<String> {
    Ok(format!("{}{input}", cx.agent()).into())
}

/// Returns nothing.
#[tool]
fn returns_nothing(input: String) {
    let _ = input;
}

fn main() {}
