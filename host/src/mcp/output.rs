//! Retained output, readable by the client that produced it: the MCP
//! resource `toolhost://output/<id>` and the built-in `read_output` tool,
//! which pages through it by lines within the model's bounds.

use std::io::{BufRead, BufReader};
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, ErrorData, Resource, ResourceContents};
use serde_json::{Value, json};

use crate::mcp::server::Shared;
use crate::model::budget::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};

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

/// The id of a retained output's reference (`toolhost-output:<id>`).
pub(crate) fn id_of_reference(reference: &str) -> String {
    id_of(reference).to_owned()
}

/// The file of `id`, if `session` produced it and it is still kept.
fn file_of(shared: &Shared, session: &str, id: &str) -> Result<std::path::PathBuf, ErrorData> {
    let missing = || {
        ErrorData::resource_not_found(
            format!("no retained output `{id}` in this session; it may have expired"),
            None,
        )
    };
    if !shared.may_read(session, id) {
        return Err(missing());
    }
    shared
        .location
        .retained_output(&format!("{REFERENCE_PREFIX}{id}"))
        .ok_or_else(missing)
}

/// `read_output {id, offset, limit}`.
pub(crate) fn read_output(
    shared: &Shared,
    session: &str,
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
    let file = file_of(shared, session, id)?;
    let (text, next) = lines(&file, offset, limit).map_err(|e| {
        ErrorData::internal_error(format!("cannot read the retained output: {e}"), None)
    })?;
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({"offset": offset, "next_offset": next}));
    Ok(result)
}

/// Lines `offset..offset + limit` of `file`, within the model's byte bound,
/// and where the next page starts (none at the end).
fn lines(
    file: &std::path::Path,
    offset: usize,
    limit: usize,
) -> std::io::Result<(String, Option<usize>)> {
    let mut reader = BufReader::new(std::fs::File::open(file)?);
    let mut line = Vec::new();
    let mut index = 0;
    let mut page = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok((String::from_utf8_lossy(&page).into_owned(), None));
        }
        if index >= offset {
            let full = index - offset >= limit || page.len() + line.len() > DEFAULT_MAX_BYTES;
            if full && index > offset {
                return Ok((String::from_utf8_lossy(&page).into_owned(), Some(index)));
            }
            page.extend_from_slice(&line);
        }
        index += 1;
    }
}

/// `resources/list`: the session's retained outputs.
pub(crate) fn resources(shared: &Shared, session: &str) -> Vec<Resource> {
    shared
        .outputs_of(session)
        .into_iter()
        .map(|id| {
            let mut resource = Resource::new(format!("{URI_PREFIX}{id}"), format!("output {id}"));
            resource.mime_type = Some("text/plain".into());
            resource
        })
        .collect()
}

/// `resources/read` of `toolhost://output/<id>`: the whole text.
pub(crate) fn read_resource(
    shared: &Shared,
    session: &str,
    uri: &str,
) -> Result<ResourceContents, ErrorData> {
    let Some(id) = uri.strip_prefix(URI_PREFIX) else {
        return Err(ErrorData::resource_not_found(
            format!("`{uri}` is not a resource of this server"),
            None,
        ));
    };
    let file = file_of(shared, session, id)?;
    let text = std::fs::read_to_string(file).map_err(|e| {
        ErrorData::internal_error(format!("cannot read the retained output: {e}"), None)
    })?;
    Ok(ResourceContents::text(text, uri))
}
