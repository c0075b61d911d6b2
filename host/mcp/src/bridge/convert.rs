//! An MCP `tools/call` result as a tool's response: `structuredContent` is
//! the machine output, content blocks become content parts, `_meta` the
//! metadata, and `isError` a model-visible tool failure.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

use toolhost::{ContentPart, ToolFailure, ToolResponse};

/// The response, or the failure the server reported.
pub(super) fn response(result: CallToolResult) -> Result<ToolResponse, ToolFailure> {
    let metadata = result
        .meta
        .and_then(|m| serde_json::to_value(m).ok())
        .filter(|m| m.as_object().is_some_and(|o| !o.is_empty()));
    let parts: Vec<ContentPart> = result.content.into_iter().map(part).collect();
    if result.is_error == Some(true) {
        return Err(ToolFailure {
            message: failure_message(&parts),
            metadata,
        });
    }
    Ok(ToolResponse {
        output: result.structured_content,
        content: (!parts.is_empty()).then_some(parts),
        metadata,
    })
}

/// The text of a failure's parts; media is named, not inlined.
fn failure_message(parts: &[ContentPart]) -> String {
    let texts: Vec<String> = parts
        .iter()
        .map(|p| match p {
            ContentPart::Text { text } => text.clone(),
            ContentPart::Media { mime_type, .. } => format!("[{mime_type} content]"),
        })
        .collect();
    if texts.is_empty() {
        "the MCP server reported an error without saying what".into()
    } else {
        texts.join("\n")
    }
}

/// One content block: text as text, images and audio as media, resources
/// as text that names them (a blob with a MIME type as media).
fn part(block: ContentBlock) -> ContentPart {
    match block {
        ContentBlock::Text(t) => ContentPart::text(t.text),
        ContentBlock::Image(i) => media(i.mime_type, &i.data, None),
        ContentBlock::Audio(a) => media(a.mime_type, &a.data, None),
        ContentBlock::Resource(r) => match r.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                ContentPart::text(format!("[resource {uri}]\n{text}"))
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type: Some(mime_type),
                blob,
                ..
            } => media(mime_type, &blob, Some(uri)),
            ResourceContents::BlobResourceContents { uri, blob, .. } => {
                ContentPart::text(format!("[resource {uri}: {} bytes of base64]", blob.len()))
            }
            _ => ContentPart::text("[a kind of resource this version of Toolhost cannot show]"),
        },
        ContentBlock::ResourceLink(link) => {
            ContentPart::text(format!("[resource link {}: {}]", link.name, link.uri))
        }
        _ => ContentPart::text("[a kind of content this version of Toolhost cannot show]"),
    }
}

/// Base64 media as bytes; data that is not base64 is named, not passed on.
fn media(mime_type: String, data: &str, name: Option<String>) -> ContentPart {
    match STANDARD.decode(data) {
        Ok(data) => ContentPart::Media {
            mime_type,
            data,
            name,
        },
        Err(_) => ContentPart::text(format!(
            "[{mime_type} content the MCP server sent as invalid base64]"
        )),
    }
}

/// A JSON object, as MCP wants tool arguments.
pub(super) fn arguments(input: Value) -> Option<serde_json::Map<String, Value>> {
    match input {
        Value::Object(map) => Some(map),
        _ => None,
    }
}
