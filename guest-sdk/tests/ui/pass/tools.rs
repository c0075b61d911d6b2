//! Every form `#[tool]` accepts, in a crate that denies missing docs and
//! warnings, exported with `plugin!`.
#![deny(missing_docs, warnings)]

use toolhost_sdk::prelude::*;

/// The input of `echo`.
#[input]
pub struct EchoInput {
    /// The message to repeat.
    pub message: String,
}

/// Repeat a message back.
#[tool]
pub fn echo(input: EchoInput) -> ToolResult<NoOutput> {
    Ok(Response::text(input.message))
}

/// Takes input and context, returns a full path's `ToolResult`.
#[tool(name = "text.echo")]
fn echo_with_context(input: EchoInput, cx: &Context) -> toolhost_sdk::ToolResult<String> {
    Ok(format!("{} says {}", cx.agent(), input.message).into())
}

/// Takes only the context; destructures nothing.
#[tool]
fn agent(cx: &toolhost_sdk::Context) -> Result<Response<NoOutput>, ToolError> {
    Ok(Response::text(cx.agent().to_owned()))
}

/// Takes nothing at all.
#[tool]
fn nothing() -> ToolResult<u32> {
    Ok(42.into())
}

/// Takes a destructured input and ignores the context.
#[tool]
fn destructured(EchoInput { message }: EchoInput, _: &Context) -> ToolResult<NoOutput> {
    Ok(Response::text(message))
}

/// A raw identifier is named without `r#`.
#[tool]
fn r#type(input: NoInput) -> ToolResult<NoOutput> {
    let NoInput {} = input;
    Ok(Response::text("type"))
}

#[doc = "A description from an expression: "]
#[doc = concat!("built", " at compile time.")]
#[tool]
fn computed() -> ToolResult<NoOutput> {
    Ok(Response::text("computed"))
}

/// Compiled out with its function.
#[cfg(any())]
#[tool]
fn never() -> ToolResult<NoOutput> {
    Ok(Response::text("never"))
}

/// Tools in a module are named by path.
pub mod nested {
    use toolhost_sdk::prelude::*;

    /// A tool in a module.
    #[tool]
    pub fn inner() -> ToolResult<NoOutput> {
        Ok(Response::text("inner"))
    }
}

toolhost_sdk::plugin!([
    echo,
    echo_with_context,
    agent,
    nothing,
    destructured,
    r#type,
    computed,
    nested::inner,
]);

fn main() {
    assert_eq!(<r#type as Tool>::NAME, "type");
    assert_eq!(<echo_with_context as Tool>::NAME, "text.echo");
    assert_eq!(
        <computed as Tool>::DESCRIPTION,
        "A description from an expression:\nbuilt at compile time."
    );
}
