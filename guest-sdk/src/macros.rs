//! The attribute macros (from `toolhost-sdk-macros`), documented here where
//! their examples can use this crate, and the trait their expansion uses.

use crate::ToolResult;

/// Turns a function into a [`Tool`](crate::Tool).
///
/// ```
/// use toolhost_sdk::prelude::*;
///
/// #[input]
/// struct Input {
///     /// The text to count.
///     text: String,
/// }
///
/// #[output]
/// struct Counts {
///     /// Runs of non-whitespace characters.
///     words: u64,
/// }
///
/// /// Count the words of a text.
/// #[tool]
/// fn word_count(input: Input) -> ToolResult<Counts> {
///     let words = input.text.split_whitespace().count() as u64;
///     Ok(Counts { words }.into())
/// }
///
/// toolhost_sdk::plugin!([word_count]);
///
/// // The function is still an ordinary function, handy in unit tests.
/// # fn main() {
/// let counts = word_count(Input { text: "one two".into() }).unwrap();
/// # let _ = counts;
/// assert_eq!(<word_count as Tool>::NAME, "word_count");
/// assert_eq!(<word_count as Tool>::DESCRIPTION, "Count the words of a text.");
/// # }
/// ```
///
/// - **Description**: the doc comment, which is required: the model reads
///   it to decide when to call the tool.
/// - **Name**: the function's name; `#[tool(name = "text.count")]` gives
///   another. Names the host would refuse (empty, over 64 characters,
///   `execute`) are compile errors.
/// - **Parameters**: the input by value, any type with [`#[input]`](input)
///   (or [`NoInput`](crate::NoInput) when there is no input parameter), then
///   `&Context` when the tool needs it ([`Context`](crate::Context): progress,
///   permissions, configuration). Both are optional, in that order.
/// - **Return type**: [`ToolResult<O>`](crate::ToolResult), where `O` has
///   [`#[output]`](output), or is [`NoOutput`](crate::NoOutput) for a tool
///   that returns only content.
///
/// The function stays as written. Beside it the macro declares a struct of
/// the same name, `struct word_count {}`: a braced struct, which lives only
/// in the type namespace, so it does not clash with the function. It
/// implements [`Tool`](crate::Tool) by calling the function, and it is what
/// [`plugin!`](crate::plugin) lists. It has the function's visibility, doc
/// comment and `#[cfg]`s.
///
/// A tool that needs no input and reads the context:
///
/// ```
/// use toolhost_sdk::prelude::*;
///
/// /// Say which agent is calling.
/// #[tool(name = "who.am_i")]
/// pub fn who_am_i(cx: &Context) -> ToolResult<NoOutput> {
///     Ok(Response::text(format!("You are {}.", cx.agent())))
/// }
///
/// toolhost_sdk::plugin!([who_am_i]);
/// # fn main() {
/// assert_eq!(<who_am_i as Tool>::NAME, "who.am_i");
/// # }
/// ```
#[doc(inline)]
pub use toolhost_sdk_macros::tool;

/// Makes a struct or an enum a tool's input: derives `Deserialize` and
/// `JsonSchema` through this crate's re-exports, so the plugin needs no
/// `serde` or `schemars` dependency of its own.
///
/// Doc comments on the fields become the schema's descriptions, which the
/// model reads. `#[serde(...)]` and `#[schemars(...)]` attributes work as
/// usual. A type used both as input and as output takes both attributes.
///
/// ```
/// use toolhost_sdk::prelude::*;
///
/// #[input]
/// #[serde(rename_all = "camelCase")]
/// struct SearchInput {
///     /// What to look for.
///     query: String,
///     /// How many results at most (default 10).
///     #[serde(default = "ten")]
///     #[schemars(range(min = 1, max = 100))]
///     max_results: u32,
/// }
///
/// fn ten() -> u32 {
///     10
/// }
///
/// let schema = toolhost_sdk::schemars::schema_for!(SearchInput);
/// assert_eq!(schema.get("required"), Some(&json!(["query"])));
/// let max = &schema.get("properties").unwrap()["maxResults"];
/// assert_eq!(max["description"], "How many results at most (default 10).");
///
/// let input: SearchInput = serde_json::from_str(r#"{"query": "wasm"}"#).unwrap();
/// assert_eq!((input.query.as_str(), input.max_results), ("wasm", 10));
/// ```
#[doc(inline)]
pub use toolhost_sdk_macros::input;

/// Makes a struct or an enum a tool's output: derives `Serialize` and
/// `JsonSchema` through this crate's re-exports, so the plugin needs no
/// `serde` or `schemars` dependency of its own. The host validates every
/// output against the derived schema.
///
/// ```
/// use toolhost_sdk::prelude::*;
///
/// #[output]
/// struct Match {
///     /// The 1-based line of the match.
///     line: u64,
///     /// The matched text.
///     #[serde(rename = "match")]
///     text: String,
/// }
///
/// let json = serde_json::to_value(Match { line: 3, text: "fn".into() }).unwrap();
/// assert_eq!(json, json!({ "line": 3, "match": "fn" }));
/// ```
#[doc(inline)]
pub use toolhost_sdk_macros::output;

/// What a `#[tool]` function returns: [`ToolResult<O>`](crate::ToolResult).
/// The expansion of `#[tool]` takes the tool's output type from it, so the
/// author may spell the return type any way (an alias, a full path).
#[diagnostic::on_unimplemented(
    message = "a #[tool] function returns `ToolResult<OUTPUT>`, not `{Self}`",
    label = "return `ToolResult<OUTPUT>`, where OUTPUT has #[output] or is `NoOutput`"
)]
pub trait ToolReturn {
    /// The tool's output type. Unbounded here, so that an output type that
    /// is not a [`ToolOutput`](crate::ToolOutput) is reported once, by
    /// [`Tool::Output`](crate::Tool::Output).
    type Output;

    /// The function's result, as [`Tool::execute`](crate::Tool::execute)
    /// returns it.
    fn into_result(self) -> ToolResult<Self::Output>;
}

impl<O> ToolReturn for ToolResult<O> {
    type Output = O;

    fn into_result(self) -> ToolResult<O> {
        self
    }
}
