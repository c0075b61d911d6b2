//! The typed tool trait and its input/output markers.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{Context, ToolResult};

/// A tool: a name, a description, typed input and output, and `execute`.
///
/// The input and output JSON Schemas (draft 2020-12) are derived from
/// `Input` and `Output` with `schemars`, so the doc comments on their fields
/// become the descriptions the model reads.
///
/// A tool is a type, not a value: every call runs in a fresh instance of the
/// plugin, so there is no state to hold. Register tools with
/// [`plugin!`](crate::plugin).
pub trait Tool {
    /// The authored name. The host replaces every character outside
    /// `[A-Za-z0-9_-]` with `_`; the result must be 1-64 characters and must
    /// not be `execute`.
    const NAME: &'static str;

    /// What the tool does, written for a model.
    const DESCRIPTION: &'static str;

    /// The arguments, deserialized from the model's JSON: any
    /// `Deserialize + JsonSchema` type (see [`ToolInput`]). Use [`NoInput`]
    /// for a tool without arguments.
    type Input: ToolInput;

    /// The machine output, any `Serialize + JsonSchema` type. Use [`NoOutput`]
    /// for a tool that returns only content (it then has no output schema).
    type Output: ToolOutput;

    /// Run the tool. Return [`ToolError`](crate::ToolError) for failures the
    /// model should see; a panic is reported as a defect of the plugin.
    fn execute(input: Self::Input, cx: &Context) -> ToolResult<Self::Output>;
}

/// The input of a tool without arguments: a JSON object with no properties
/// (other properties are ignored).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct NoInput {}

// By hand, so this type's documentation does not end up in every tool's
// schema, where the model would read it.
impl JsonSchema for NoInput {
    fn schema_name() -> Cow<'static, str> {
        "NoInput".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "object", "properties": {} })
    }
}

/// The output of a tool that returns only content: such a tool has no output
/// schema and must return non-empty content (see [`Response`](crate::Response)).
///
/// It has no values, so a `Response<NoOutput>` can never carry typed output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoOutput {}

/// A type usable as [`Tool::Input`]: every `Deserialize + JsonSchema` type,
/// such as a type with [`#[input]`](crate::input). Never implement it
/// yourself.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's input",
    label = "add #[input] to `{Self}` (it derives `Deserialize` and `JsonSchema`)"
)]
// Methods, not supertraits: with supertraits the compiler reports the
// missing `Deserialize` or `JsonSchema` instead of the message above.
pub trait ToolInput: Sized {
    #[doc(hidden)]
    fn __input_schema(generator: SchemaGenerator) -> Schema;

    #[doc(hidden)]
    fn __from_json(json: &str) -> serde_json::Result<Self>;
}

impl<T: DeserializeOwned + JsonSchema> ToolInput for T {
    fn __input_schema(generator: SchemaGenerator) -> Schema {
        generator.into_root_schema_for::<T>()
    }

    fn __from_json(json: &str) -> serde_json::Result<Self> {
        serde_json::from_str(json)
    }
}

/// A type usable as [`Tool::Output`]: every `Serialize + JsonSchema` type,
/// such as a type with [`#[output]`](crate::output), and [`NoOutput`].
/// Never implement it yourself.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's output",
    label = "add #[output] to `{Self}` (it derives `Serialize` and `JsonSchema`), or return `NoOutput`"
)]
pub trait ToolOutput: Sized {
    #[doc(hidden)]
    fn __output_schema(generator: SchemaGenerator) -> Option<Schema>;

    #[doc(hidden)]
    fn __to_json(&self) -> serde_json::Result<String>;
}

impl<T: Serialize + JsonSchema> ToolOutput for T {
    fn __output_schema(generator: SchemaGenerator) -> Option<Schema> {
        Some(generator.into_root_schema_for::<T>())
    }

    fn __to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
}

impl ToolOutput for NoOutput {
    fn __output_schema(_: SchemaGenerator) -> Option<Schema> {
        None
    }

    fn __to_json(&self) -> serde_json::Result<String> {
        match *self {}
    }
}
