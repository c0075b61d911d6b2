//! Toolhost values as MCP values: definitions as `Tool`s, settlements as
//! `tools/call` results or JSON-RPC errors (R32).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{
    CallToolResult, ContentBlock, ErrorCode, ErrorData, JsonObject, MetaObject, ResourceContents,
};
use serde_json::{Map, Value, json};

use toolhost::ContentPart;
use toolhost::ToolDefinition;
use toolhost::{Outcome, Settlement, outcome::ErrorKind};

/// The `_meta` key of a call result under which the tool's own metadata
/// (for a UI) travels, on success and on a tool's error.
pub const TOOL_METADATA_KEY: &str = "io.toolhost/metadata";

/// JSON-RPC error code of an interrupted call (cancelled, deadline, fuel):
/// not a tool result.
pub const INTERRUPTED_ERROR_CODE: ErrorCode = ErrorCode(-32001);

/// JSON-RPC error code of a defect of the guest or a fault of the host.
pub const DEFECT_ERROR_CODE: ErrorCode = ErrorCode(-32002);

/// JSON-RPC error code of a call refused because too many are in flight.
pub const BUSY_ERROR_CODE: ErrorCode = ErrorCode(-32003);

/// Whether `schema` describes JSON objects: MCP before 2026-07-28 allows only
/// object `structuredContent`.
fn is_object_schema(schema: &Value) -> bool {
    schema["type"] == "object"
}

/// Whether a call's structured output goes to the client wrapped in
/// `{"result": …}`: for pre-2026 clients, when its tool's output schema
/// (if any) is not an object's, as [`tool`] advertises it.
pub(crate) fn wraps_output(output_schema: Option<&Value>, legacy: bool) -> bool {
    legacy && output_schema.is_some_and(|schema| !is_object_schema(schema))
}

/// The `Tool` a client sees. For pre-2026 clients a non-object output
/// schema is advertised wrapped in `{"result": …}`, as its output will be.
pub(crate) fn tool(def: &ToolDefinition, legacy: bool) -> rmcp::model::Tool {
    let input = object(def.input_schema.clone());
    let mut tool =
        rmcp::model::Tool::new(def.name.clone(), def.description.clone(), Arc::new(input));
    tool.output_schema = def.output_schema.as_ref().map(|schema| {
        let schema = if legacy && !is_object_schema(schema) {
            json!({"type": "object", "properties": {"result": schema}, "required": ["result"]})
        } else {
            schema.clone()
        };
        Arc::new(object(schema))
    });
    tool
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => JsonObject::from_iter([("schema".to_owned(), other)]),
    }
}

/// A settlement as MCP sees it: completed and model-visible errors are
/// results (`isError` for errors); an unknown tool, an interruption and a
/// defect are JSON-RPC errors, never a successful-looking result.
pub(crate) fn call_result(
    settlement: &Settlement,
    wraps_output: bool,
) -> Result<CallToolResult, ErrorData> {
    match &settlement.outcome {
        Outcome::Completed(c) => {
            let mut result = CallToolResult::success(c.content.iter().map(block).collect());
            result.structured_content = c.output.clone().map(|output| {
                if wraps_output {
                    json!({"result": output})
                } else {
                    output
                }
            });
            result.meta = tool_metadata(c.metadata.as_ref());
            Ok(result)
        }
        Outcome::Error {
            kind: ErrorKind::UnknownTool | ErrorKind::IdsReused,
            message,
            ..
        } => Err(ErrorData::invalid_params(message.clone(), None)),
        Outcome::Error {
            message, metadata, ..
        } => {
            let mut result = CallToolResult::error(vec![ContentBlock::text(message.clone())]);
            result.meta = tool_metadata(metadata.as_ref());
            Ok(result)
        }
        Outcome::Interrupted { reason } => Err(ErrorData::new(
            INTERRUPTED_ERROR_CODE,
            format!("The tool call was interrupted: {reason}"),
            Some(error_data(settlement)),
        )),
        Outcome::Defect { message, .. } => Err(ErrorData::new(
            DEFECT_ERROR_CODE,
            format!("The tool call failed: {message}"),
            Some(error_data(settlement)),
        )),
        // An outcome a newer library added: never a successful-looking result.
        other => Err(ErrorData::internal_error(
            format!("The tool call ended as {}", other.status()),
            Some(error_data(settlement)),
        )),
    }
}

/// A tool's metadata (for a UI, R17) in the result's `_meta`, under
/// [`TOOL_METADATA_KEY`].
fn tool_metadata(metadata: Option<&Map<String, Value>>) -> Option<MetaObject> {
    let metadata = metadata?.clone();
    let mut meta = Map::new();
    meta.insert(TOOL_METADATA_KEY.to_owned(), Value::Object(metadata));
    Some(MetaObject(meta))
}

/// The `data` of an error: the outcome's JSON (status, reason or culprit)
/// with its usage.
fn error_data(settlement: &Settlement) -> Value {
    let mut data = serde_json::to_value(&settlement.outcome).unwrap_or_default();
    data["usage"] = serde_json::to_value(&settlement.usage).unwrap_or_default();
    data
}

/// One content part as an MCP content block: text as text, images and audio
/// as such, other media as an embedded blob.
fn block(part: &ContentPart) -> ContentBlock {
    match part {
        ContentPart::Text { text } => ContentBlock::text(text.clone()),
        ContentPart::Media {
            mime_type,
            data,
            name,
        } => {
            let encoded = STANDARD.encode(data);
            if mime_type.starts_with("image/") {
                ContentBlock::image(encoded, mime_type.clone())
            } else if mime_type.starts_with("audio/") {
                ContentBlock::audio(encoded, mime_type.clone())
            } else {
                ContentBlock::resource(ResourceContents::BlobResourceContents {
                    uri: format!("toolhost://media/{}", name.as_deref().unwrap_or("unnamed")),
                    mime_type: Some(mime_type.clone()),
                    blob: encoded,
                    meta: None,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition(output_schema: Option<Value>) -> ToolDefinition {
        ToolDefinition {
            name: "t".to_owned(),
            description: "d".to_owned(),
            input_schema: json!({"type": "object"}),
            output_schema,
        }
    }

    /// A call's output is wrapped exactly when its tool is advertised with
    /// the wrapped schema, so a legacy client's output always matches.
    #[test]
    fn output_is_wrapped_as_the_tool_is_advertised() {
        let array = json!({"type": "array"});
        let object = json!({"type": "object"});
        for (schema, legacy, wrapped) in [
            (Some(&array), true, true),
            (Some(&array), false, false),
            (Some(&object), true, false),
            (None, true, false),
        ] {
            assert_eq!(wraps_output(schema, legacy), wrapped, "{schema:?} {legacy}");
            let advertised = tool(&definition(schema.cloned()), legacy).output_schema;
            let wraps_advertised = advertised.is_some_and(|s| {
                s.get("properties")
                    .is_some_and(|p| p.get("result").is_some())
            });
            assert_eq!(wraps_advertised, wrapped, "{schema:?} {legacy}");
        }
    }
}
