//! What `#[tool]`, `#[input]` and `#[output]` generate, seen from a plugin
//! crate: names, descriptions, schemas, and calls dispatched the way
//! `plugin!` dispatches them.

use std::any::TypeId;

use toolhost_sdk::__private::{CallContext, ToolEntry, ToolFailure, ToolResponse, execute};
use toolhost_sdk::bindings::toolhost::plugin::types::ContentPart;
use toolhost_sdk::prelude::*;
use toolhost_sdk::schemars::schema_for;

#[input]
struct EchoInput {
    /// The message to repeat.
    message: String,
}

#[output]
#[derive(Debug, PartialEq)]
struct EchoOutput {
    /// The message, unchanged.
    message: String,
}

/// Repeat a message back.
///
/// The message comes back unchanged.
#[tool]
fn echo(input: EchoInput) -> ToolResult<EchoOutput> {
    Ok(EchoOutput {
        message: input.message,
    }
    .into())
}

/// Describe the call.
#[tool(name = "describe.call")]
fn describe(cx: &Context) -> toolhost_sdk::ToolResult<NoOutput> {
    Ok(Response::text(format!("{} {}", cx.agent(), cx.call_id())))
}

/// Add to a number, or fail.
#[tool]
fn add(input: Addition, _cx: &Context) -> Result<Response<i64>, ToolError> {
    let sum = input.a.checked_add(input.by).ok_or("the sum overflows")?;
    Ok(sum.into())
}

#[input]
#[serde(rename_all = "camelCase")]
struct Addition {
    /// The number to add to.
    a: i64,
    /// What to add (1 when absent).
    #[serde(default = "one", rename = "plus")]
    by: i64,
}

fn one() -> i64 {
    1
}

/// A point, both an input and an output.
#[input]
#[output]
#[derive(Debug, PartialEq)]
struct Point {
    /// Across.
    x: i32,
    /// Down.
    y: i32,
}

/// The same, with the attributes the other way round and spelled in full.
#[toolhost_sdk::output]
#[toolhost_sdk::input]
#[derive(Debug, PartialEq)]
enum Direction {
    /// Towards the top.
    Up,
    /// Towards the bottom.
    Down,
}

/// Move a point one step.
#[tool]
fn step(input: Move) -> ToolResult<Point> {
    let Move { from, direction } = input;
    let y = match direction {
        Direction::Up => from.y - 1,
        Direction::Down => from.y + 1,
    };
    Ok(Point { x: from.x, y }.into())
}

#[input]
struct Move {
    /// Where to start.
    from: Point,
    /// Which way to go.
    direction: Direction,
}

static TOOLS: &[ToolEntry] = &[
    ToolEntry::of::<echo>(),
    ToolEntry::of::<describe>(),
    ToolEntry::of::<add>(),
    ToolEntry::of::<step>(),
];

fn call(tool: &str, input: &str) -> Result<ToolResponse, ToolFailure> {
    let context = CallContext {
        session_id: "s1".into(),
        agent: "build".into(),
        message_id: "m1".into(),
        call_id: "c1".into(),
    };
    execute(TOOLS, tool, input, context)
}

fn type_of<T: 'static>() -> TypeId {
    TypeId::of::<T>()
}

#[test]
fn tool_names_come_from_the_function_or_the_name_argument() {
    assert_eq!(<echo as Tool>::NAME, "echo");
    assert_eq!(<describe as Tool>::NAME, "describe.call");
}

#[test]
fn descriptions_are_the_doc_comment_without_comment_markers() {
    assert_eq!(
        <echo as Tool>::DESCRIPTION,
        "Repeat a message back.\n\nThe message comes back unchanged."
    );
}

#[test]
fn input_and_output_types_come_from_the_signature() {
    assert_eq!(type_of::<<echo as Tool>::Input>(), type_of::<EchoInput>());
    assert_eq!(type_of::<<echo as Tool>::Output>(), type_of::<EchoOutput>());
    assert_eq!(type_of::<<describe as Tool>::Input>(), type_of::<NoInput>());
    assert_eq!(
        type_of::<<describe as Tool>::Output>(),
        type_of::<NoOutput>()
    );
    assert_eq!(type_of::<<add as Tool>::Output>(), type_of::<i64>());
}

#[test]
fn the_function_stays_callable() {
    let response = echo(EchoInput {
        message: "hi".into(),
    })
    .unwrap();
    assert_eq!(
        response,
        Response::new(EchoOutput {
            message: "hi".into()
        })
    );
}

#[test]
fn calls_reach_the_function_with_input_and_context() {
    let response = call("echo", r#"{"message": "hi"}"#).unwrap();
    assert_eq!(response.output.as_deref(), Some(r#"{"message":"hi"}"#));

    let response = call("describe.call", "{}").unwrap();
    let content = response.content.unwrap();
    assert!(
        matches!(&content[..], [ContentPart::Text(text)] if text == "build c1"),
        "{content:?}"
    );
}

#[test]
fn tool_errors_reach_the_model() {
    let failure = call("add", &format!(r#"{{"a": {}}}"#, i64::MAX)).unwrap_err();
    assert_eq!(failure.message, "the sum overflows");
}

#[test]
fn serde_attributes_shape_both_the_schema_and_the_parsing() {
    let schema = schema_for!(Addition);
    assert_eq!(schema.get("required"), Some(&json!(["a"])));
    let plus = &schema.get("properties").unwrap()["plus"];
    assert_eq!(plus["description"], "What to add (1 when absent).");
    assert_eq!(plus["default"], 1);

    let response = call("add", r#"{"a": 2}"#).unwrap();
    assert_eq!(response.output.as_deref(), Some("3"));
    let response = call("add", r#"{"a": 2, "plus": 5}"#).unwrap();
    assert_eq!(response.output.as_deref(), Some("7"));
}

#[test]
fn field_doc_comments_reach_the_schema() {
    let schema = schema_for!(EchoOutput);
    assert_eq!(
        schema.get("properties").unwrap()["message"]["description"],
        "The message, unchanged."
    );
}

#[test]
fn types_used_both_ways_serialize_and_deserialize() {
    let response = call("step", r#"{"from": {"x": 1, "y": 5}, "direction": "Up"}"#).unwrap();
    assert_eq!(response.output.as_deref(), Some(r#"{"x":1,"y":4}"#));

    let direction: Direction = serde_json::from_str(r#""Down""#).unwrap();
    assert_eq!(direction, Direction::Down);
    assert_eq!(serde_json::to_string(&Direction::Up).unwrap(), r#""Up""#);
    let schema = schema_for!(Direction);
    assert_eq!(
        schema.get("oneOf").unwrap()[0]["description"],
        "Towards the top."
    );
}
