//! The plugin hooks, and the runtime behind [`plugin!`](crate::plugin):
//! registration in `activate`, dispatch in `execute`.

use std::sync::OnceLock;

use schemars::generate::SchemaSettings;

use crate::bindings::exports::toolhost::plugin::plugin::{CallContext, ToolFailure, ToolResponse};
use crate::bindings::toolhost::plugin::registry::{self, Registration, RegistrationError};
use crate::bindings::toolhost::plugin::types::{self, ToolDefinition};
use crate::response::Output;
use crate::tool::{ToolInput, ToolOutput};
use crate::{Content, Context, Response, Tool, ToolError};

/// Plugin-wide hooks. Implement it on a type of your own and name that type in
/// [`plugin!`](crate::plugin) when the plugin needs them; every method has a
/// default.
pub trait Plugin {
    /// Called once when the host activates the plugin, before its tools are
    /// registered, with the plugin's configuration (`{}` when none). Return an
    /// error to refuse activation; the host reports the message.
    ///
    /// Nothing set up here is visible to tool calls: each call runs in a fresh
    /// instance. Use it to validate configuration; tools read the same
    /// configuration with [`Context::config`](crate::Context::config).
    fn activate(config: &serde_json::Value) -> Result<(), String> {
        let _ = config;
        Ok(())
    }
}

/// The plugin used by `plugin!([...])`: no hooks.
#[derive(Debug)]
pub enum NoHooks {}

impl Plugin for NoHooks {}

/// One row of the static dispatch table built by `plugin!`.
///
/// The table is a `static`, not something built in `activate`, because every
/// call runs in a fresh instance where `activate` never ran.
#[derive(Debug)]
pub struct ToolEntry {
    name: &'static str,
    description: &'static str,
    input_schema: fn() -> String,
    output_schema: fn() -> Option<String>,
    execute: fn(&str, &Context) -> Result<ToolResponse, ToolFailure>,
}

impl ToolEntry {
    /// The entry for tool `T`.
    pub const fn of<T: Tool>() -> Self {
        Self {
            name: T::NAME,
            description: T::DESCRIPTION,
            input_schema: input_schema::<T>,
            output_schema: output_schema::<T>,
            execute: execute_tool::<T>,
        }
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.to_owned(),
            description: self.description.to_owned(),
            input_schema: (self.input_schema)(),
            output_schema: (self.output_schema)(),
        }
    }
}

/// Schemas are JSON Schema draft 2020-12 documents that keep `$schema`, so the
/// host knows which dialect to compile.
fn generator() -> schemars::SchemaGenerator {
    SchemaSettings::draft2020_12().into_generator()
}

fn input_schema<T: Tool>() -> String {
    let schema = T::Input::__input_schema(generator());
    serde_json::to_string(&schema).expect("a JSON Schema serializes")
}

fn output_schema<T: Tool>() -> Option<String> {
    let schema = T::Output::__output_schema(generator())?;
    Some(serde_json::to_string(&schema).expect("a JSON Schema serializes"))
}

fn execute_tool<T: Tool>(input: &str, cx: &Context) -> Result<ToolResponse, ToolFailure> {
    // The host validated `input` against the schema derived from `T::Input`,
    // so this only fails when a custom `Deserialize` is stricter than its schema.
    let input = T::Input::__from_json(input).map_err(|error| {
        failure(ToolError::new(format!(
            "invalid input for tool \"{}\": {error}; fix the arguments and call it again",
            T::NAME
        )))
    })?;
    match T::execute(input, cx) {
        Ok(response) => Ok(response_to_wire(T::NAME, response)),
        Err(error) => Err(failure(error)),
    }
}

fn response_to_wire<O: ToolOutput>(tool: &str, response: Response<O>) -> ToolResponse {
    let output = response.output.map(|output| match output {
        // A type that derives `Serialize` but cannot be written as JSON is a
        // plugin bug: panic so the host reports a defect, not a tool error.
        Output::Typed(value) => value.__to_json().unwrap_or_else(|error| {
            panic!(
                "toolhost-sdk: the output of tool \"{tool}\" cannot be serialized as JSON: {error}"
            )
        }),
        Output::Raw(value) => value.to_string(),
    });
    // Empty content means "none": the host then derives it from the output.
    let content = (!response.content.is_empty())
        .then(|| response.content.into_iter().map(content_to_wire).collect());
    ToolResponse {
        output,
        content,
        metadata: response.metadata.map(|m| m.to_string()),
    }
}

fn content_to_wire(part: Content) -> types::ContentPart {
    match part {
        Content::Text(text) => types::ContentPart::Text(text),
        Content::Media(media) => types::ContentPart::Media(types::Media {
            mime_type: media.mime_type,
            data: media.data,
            name: media.name,
        }),
    }
}

fn failure(error: ToolError) -> ToolFailure {
    ToolFailure {
        metadata: error.metadata().map(|m| m.to_string()),
        message: error.message().to_owned(),
    }
}

/// Keeps the registration alive for the life of the activation instance:
/// dropping the handle would unregister the tools.
static REGISTRATION: OnceLock<Registration> = OnceLock::new();

/// `plugin.activate`: run the plugin's hook, then register every tool in one
/// atomic `register` call.
pub fn activate<P: Plugin>(tools: &[ToolEntry], config: &str) -> Result<(), String> {
    if REGISTRATION.get().is_some() {
        return Err("the plugin is already active in this instance".to_owned());
    }
    let config: serde_json::Value = serde_json::from_str(config)
        .map_err(|error| format!("the plugin configuration is not valid JSON: {error}"))?;
    P::activate(&config)?;
    let definitions: Vec<ToolDefinition> = tools.iter().map(ToolEntry::definition).collect();
    let registration =
        registry::register(&definitions).map_err(|error| registration_error(tools, &error))?;
    // Cannot fail: checked above, and an instance runs one export at a time.
    let _ = REGISTRATION.set(registration);
    Ok(())
}

fn registration_error(tools: &[ToolEntry], error: &RegistrationError) -> String {
    let invalid = |what: &str, tool: &registry::InvalidTool| {
        format!(
            "cannot register tool \"{}\": {what}: {}",
            tool.tool, tool.message
        )
    };
    let all = || {
        tools
            .iter()
            .map(|t| format!("\"{}\"", t.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match error {
        RegistrationError::InvalidName(tool) => invalid("invalid name", tool),
        RegistrationError::InvalidSchema(tool) => invalid("invalid schema", tool),
        RegistrationError::DuplicateName(tool) => invalid("duplicate name", tool),
        RegistrationError::ScopeClosed => {
            format!(
                "cannot register tools {}: the plugin's scope is closed",
                all()
            )
        }
        RegistrationError::NotActivating => format!(
            "cannot register tools {}: the host is not activating this plugin",
            all()
        ),
    }
}

/// `plugin.execute`: dispatch to the tool registered under the authored name.
pub fn execute(
    tools: &[ToolEntry],
    tool: &str,
    input: &str,
    context: CallContext,
) -> Result<ToolResponse, ToolFailure> {
    let Some(entry) = tools.iter().find(|entry| entry.name == tool) else {
        let known: Vec<&str> = tools.iter().map(|entry| entry.name).collect();
        return Err(failure(ToolError::new(format!(
            "unknown tool \"{tool}\"; this plugin provides: {}",
            known.join(", ")
        ))));
    };
    (entry.execute)(input, &Context::new(context))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::prelude::*;

    struct Add;

    #[derive(Deserialize, JsonSchema)]
    struct AddInput {
        /// First addend.
        a: i64,
        b: i64,
    }

    #[derive(Serialize, JsonSchema)]
    struct Sum {
        sum: i64,
    }

    impl Tool for Add {
        const NAME: &'static str = "add";
        const DESCRIPTION: &'static str = "Add two integers.";
        type Input = AddInput;
        type Output = Sum;

        fn execute(input: AddInput, _cx: &Context) -> ToolResult<Sum> {
            let sum = input.a.checked_add(input.b).ok_or("the sum overflows")?;
            Ok(Sum { sum }.into())
        }
    }

    struct Describe;

    impl Tool for Describe {
        const NAME: &'static str = "describe.call";
        const DESCRIPTION: &'static str = "Describe the call.";
        type Input = NoInput;
        type Output = NoOutput;

        fn execute(_: NoInput, cx: &Context) -> ToolResult<NoOutput> {
            if cx.agent() == "denied" {
                return Err(ToolError::new("no").with_metadata(json!({ "agent": cx.agent() })));
            }
            Ok(Response::text(format!(
                "{} {} {} {}",
                cx.session_id(),
                cx.agent(),
                cx.message_id(),
                cx.call_id()
            ))
            .with_media(Media::new("image/png", [1, 2, 3]).with_name("x.png"))
            .with_metadata(json!(["not", "an", "object"])))
        }
    }

    struct Raw;

    impl Tool for Raw {
        const NAME: &'static str = "raw";
        const DESCRIPTION: &'static str = "Return output that breaks its schema.";
        type Input = NoInput;
        type Output = Sum;

        fn execute(_: NoInput, _cx: &Context) -> ToolResult<Sum> {
            Ok(Response::raw_output(json!({ "sum": "many" })))
        }
    }

    static TOOLS: &[ToolEntry] = &[
        ToolEntry::of::<Add>(),
        ToolEntry::of::<Describe>(),
        ToolEntry::of::<Raw>(),
    ];

    fn context(agent: &str) -> CallContext {
        CallContext {
            session_id: "s1".into(),
            agent: agent.into(),
            message_id: "m1".into(),
            call_id: "c1".into(),
        }
    }

    fn run(tool: &str, input: &str) -> Result<ToolResponse, ToolFailure> {
        execute(TOOLS, tool, input, context("build"))
    }

    fn parse(json: &str) -> Value {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn definitions_carry_draft_2020_12_schemas() {
        let add = TOOLS[0].definition();
        assert_eq!(add.name, "add");
        assert_eq!(add.description, "Add two integers.");
        let input = parse(&add.input_schema);
        assert_eq!(
            input["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(input["type"], "object");
        assert_eq!(input["required"], json!(["a", "b"]));
        assert_eq!(input["properties"]["a"]["description"], "First addend.");
        let output = parse(add.output_schema.as_deref().unwrap());
        assert_eq!(output["properties"]["sum"]["type"], "integer");
    }

    #[test]
    fn no_input_is_an_empty_object_and_no_output_has_no_schema() {
        let describe = TOOLS[1].definition();
        assert_eq!(
            parse(&describe.input_schema),
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "title": "NoInput",
                "type": "object",
                "properties": {}
            })
        );
        assert_eq!(describe.output_schema, None);
        assert_eq!(serde_json::from_str::<NoInput>("{}").unwrap(), NoInput {});
    }

    #[test]
    fn typed_output_is_serialized_and_content_left_to_the_host() {
        let response = run("add", r#"{"a": 2, "b": 3}"#).unwrap();
        assert_eq!(response.output.as_deref(), Some(r#"{"sum":5}"#));
        assert!(response.content.is_none());
        assert!(response.metadata.is_none());
    }

    #[test]
    fn content_metadata_and_context_reach_the_wire() {
        let response = run("describe.call", "{}").unwrap();
        assert_eq!(response.output, None);
        let content = response.content.unwrap();
        assert!(matches!(&content[0], types::ContentPart::Text(t) if t == "s1 build m1 c1"));
        assert!(matches!(
            &content[1],
            types::ContentPart::Media(m)
                if m.mime_type == "image/png" && m.data == [1, 2, 3] && m.name.as_deref() == Some("x.png")
        ));
        // Non-object metadata is passed through: the host decides what to drop.
        assert_eq!(
            response.metadata.as_deref(),
            Some(r#"["not","an","object"]"#)
        );
    }

    #[test]
    fn raw_output_bypasses_the_output_type() {
        let response = run("raw", "{}").unwrap();
        assert_eq!(response.output.as_deref(), Some(r#"{"sum":"many"}"#));
    }

    #[test]
    fn tool_errors_become_failures_with_metadata() {
        let failure = run("add", &format!(r#"{{"a": {}, "b": 1}}"#, i64::MAX)).unwrap_err();
        assert_eq!(failure.message, "the sum overflows");
        assert_eq!(failure.metadata, None);

        let failure = execute(TOOLS, "describe.call", "{}", context("denied")).unwrap_err();
        assert_eq!(failure.message, "no");
        assert_eq!(failure.metadata.as_deref(), Some(r#"{"agent":"denied"}"#));
    }

    #[test]
    fn undeserializable_input_is_a_tool_error_naming_the_tool() {
        let failure = run("add", r#"{"a": 1}"#).unwrap_err();
        assert!(
            failure
                .message
                .starts_with("invalid input for tool \"add\": missing field `b`"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn unknown_tools_are_refused_with_the_known_names() {
        let failure = run("nope", "{}").unwrap_err();
        assert_eq!(
            failure.message,
            "unknown tool \"nope\"; this plugin provides: add, describe.call, raw"
        );
    }

    #[test]
    fn registration_errors_name_the_tool() {
        let invalid = registry::InvalidTool {
            tool: "describe.call".into(),
            message: "names must be 1-64 characters".into(),
        };
        assert_eq!(
            registration_error(TOOLS, &RegistrationError::InvalidName(invalid)),
            "cannot register tool \"describe.call\": invalid name: names must be 1-64 characters"
        );
        assert_eq!(
            registration_error(TOOLS, &RegistrationError::ScopeClosed),
            "cannot register tools \"add\", \"describe.call\", \"raw\": the plugin's scope is closed"
        );
    }

    #[test]
    fn invalid_config_fails_activation_before_registering() {
        let error = activate::<NoHooks>(TOOLS, "{not json").unwrap_err();
        assert!(error.starts_with("the plugin configuration is not valid JSON"));
    }

    #[test]
    fn the_activate_hook_can_refuse() {
        struct Strict;
        impl Plugin for Strict {
            fn activate(config: &Value) -> Result<(), String> {
                Err(format!("bad config {config}"))
            }
        }
        assert_eq!(
            activate::<Strict>(TOOLS, r#"{"x":1}"#).unwrap_err(),
            r#"bad config {"x":1}"#
        );
    }
}
