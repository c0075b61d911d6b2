//! The attribute macros of [`toolhost-sdk`](https://docs.rs/toolhost-sdk):
//! `#[tool]`, `#[input]` and `#[output]`.
//!
//! Depend on `toolhost-sdk`, not on this crate: it re-exports the macros
//! (with examples), and the code they generate names `::toolhost_sdk`.

use proc_macro::TokenStream;

mod doc;
mod name;
mod schema;
mod tool;

/// Turns a function into a tool: the doc comment is the description, the
/// function's name is the tool's name (`#[tool(name = "...")]` overrides it).
///
/// The function stays as written. Beside it the macro declares a braced
/// struct of the same name (`struct word_count {}`), which lives only in the
/// type namespace and implements `toolhost_sdk::Tool` by calling the
/// function; name that struct in `toolhost_sdk::plugin!`.
///
/// The function takes the input by value (a type with `#[input]`; none means
/// `NoInput`), then optionally `&Context`, and returns `ToolResult<O>`.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    keep_item_on_error(tool::expand(args.into(), item.clone()), item)
}

/// Makes a struct or enum usable as a tool's input: derives `Deserialize`
/// and `JsonSchema` through `toolhost_sdk`'s re-exports of serde and schemars.
#[proc_macro_attribute]
pub fn input(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    keep_item_on_error(
        schema::expand(schema::Direction::Input, args.into(), item.clone()),
        item,
    )
}

/// Makes a struct or enum usable as a tool's output: derives `Serialize`
/// and `JsonSchema` through `toolhost_sdk`'s re-exports of serde and schemars.
#[proc_macro_attribute]
pub fn output(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    keep_item_on_error(
        schema::expand(schema::Direction::Output, args.into(), item.clone()),
        item,
    )
}

/// On an error, the item stays as written next to the error, so the author
/// sees this one error rather than a cascade about a missing item.
fn keep_item_on_error(
    expanded: syn::Result<proc_macro2::TokenStream>,
    item: proc_macro2::TokenStream,
) -> TokenStream {
    match expanded {
        Ok(expanded) => expanded.into(),
        Err(error) => {
            let mut tokens = error.into_compile_error();
            tokens.extend(item);
            tokens.into()
        }
    }
}
