//! Retained output, readable by the client that produced it: the MCP
//! resource `toolhost://output/<id>` and the built-in `read_output` tool,
//! which pages through it by lines within the model's bounds.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, ErrorData, Resource, ResourceContents};
use serde_json::{Value, json};

use crate::server::Shared;
use toolhost::limits::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};

/// The name of the built-in paging tool.
pub(crate) const READ_OUTPUT: &str = "read_output";

/// How resources name retained outputs.
const URI_PREFIX: &str = "toolhost://output/";

/// How bounding markers name them.
const REFERENCE_PREFIX: &str = "toolhost-output:";

/// The built-in tool's definition.
pub(crate) fn read_output_tool() -> rmcp::model::Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The id after `toolhost-output:` in an omission marker."},
            "offset": {"type": "integer", "minimum": 0, "description": "The first line to read, from 0. Default 0."},
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read, at most 2000. Default 2000."}
        },
        "required": ["id"]
    });
    let description = "Read lines of a full output that was too large to show: the omission marker `[... omitted; full output retained as toolhost-output:<id> ...]` names it. Returns the lines from `offset` and, in structured content, the offset to continue from.";
    let Value::Object(input) = input else {
        unreachable!("a JSON object literal")
    };
    rmcp::model::Tool::new(READ_OUTPUT, description, Arc::new(input))
}

/// The id a client may give: bare, as a marker reference, or as a URI.
fn id_of(given: &str) -> &str {
    given
        .strip_prefix(REFERENCE_PREFIX)
        .or_else(|| given.strip_prefix(URI_PREFIX))
        .unwrap_or(given)
}

/// The text of `id`, if `scope` produced it and the store still keeps it.
async fn text_of(shared: &Shared, scope: &str, id: &str) -> Result<String, ErrorData> {
    let text = shared.location.retained(scope, id).await.map_err(|e| {
        ErrorData::internal_error(format!("cannot read the retained output: {e}"), None)
    })?;
    text.ok_or_else(|| {
        ErrorData::resource_not_found(
            format!("no retained output `{id}` in this session; it may have expired"),
            None,
        )
    })
}

/// `read_output {id, offset, limit}`.
pub(crate) async fn read_output(
    shared: &Shared,
    scope: &str,
    arguments: &Value,
) -> Result<CallToolResult, ErrorData> {
    let Some(id) = arguments["id"].as_str().map(id_of) else {
        return Ok(CallToolResult::error(vec![ContentBlock::text(
            "read_output needs `id`: the id after `toolhost-output:` in the marker",
        )]));
    };
    let offset = arguments["offset"].as_u64().unwrap_or(0) as usize;
    let limit = arguments["limit"]
        .as_u64()
        .map_or(DEFAULT_MAX_LINES, |l| (l as usize).min(DEFAULT_MAX_LINES));
    let text = text_of(shared, scope, id).await?;
    let (page, next) = lines(&text, offset, limit);
    let mut result = CallToolResult::success(vec![ContentBlock::text(page)]);
    result.structured_content = Some(json!({"offset": offset, "next_offset": next}));
    Ok(result)
}

/// Lines `offset..offset + limit` of `text`, within the model's byte
/// bound, and where the next page starts (none at the end).
fn lines(text: &str, offset: usize, limit: usize) -> (String, Option<usize>) {
    let mut page = String::new();
    for (index, line) in text.split_inclusive('\n').enumerate().skip(offset) {
        let full = index - offset >= limit || page.len() + line.len() > DEFAULT_MAX_BYTES;
        if full && index > offset {
            return (page, Some(index));
        }
        page.push_str(line);
    }
    (page, None)
}

/// `resources/list`: the scope's retained outputs, newest first.
pub(crate) async fn resources(shared: &Shared, scope: &str) -> Result<Vec<Resource>, ErrorData> {
    let listed = shared.location.retained_list(scope).await.map_err(|e| {
        ErrorData::internal_error(format!("cannot list the retained outputs: {e}"), None)
    })?;
    Ok(listed
        .into_iter()
        .map(|(id, bytes)| {
            let mut resource = Resource::new(format!("{URI_PREFIX}{id}"), format!("output {id}"));
            resource.mime_type = Some("text/plain".into());
            resource.size = Some(bytes);
            resource
        })
        .collect())
}

/// `resources/read` of `toolhost://output/<id>`: the whole text. A URI
/// that names nothing is -32002 with the URI as its `data.uri`, as the
/// 2026-07-28 revision asks (SEP-2164).
pub(crate) async fn read_resource(
    shared: &Shared,
    scope: &str,
    uri: &str,
) -> Result<ResourceContents, ErrorData> {
    let named = |mut e: ErrorData| {
        if e.code == ErrorCode::RESOURCE_NOT_FOUND {
            e.data = Some(serde_json::json!({ "uri": uri }));
        }
        e
    };
    let Some(id) = uri.strip_prefix(URI_PREFIX) else {
        return Err(named(ErrorData::resource_not_found(
            format!("`{uri}` is not a resource of this server"),
            None,
        )));
    };
    let text = text_of(shared, scope, id).await.map_err(named)?;
    Ok(ResourceContents::text(text, uri))
}
