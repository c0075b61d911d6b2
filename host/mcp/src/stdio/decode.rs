//! One line of stdin to the message it carries. rmcp's parse tries the
//! client's request types one after another, failing thirteen times before
//! it reaches `tools/call`, the request a tool server gets most; such a
//! line is parsed as that request at once. Every other line is rmcp's to
//! parse, so what it accepts, drops and refuses stays its own.

use bytes::BytesMut;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, CallToolRequestParams, ClientRequest, JsonRpcMessage,
    JsonRpcRequest, JsonRpcVersion2_0, RequestId,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use tokio_util::codec::Decoder as _;

/// What a line of stdin is to the server.
#[expect(
    clippy::large_enum_variant,
    reason = "the message goes to rmcp by value; a box would cost an allocation a message"
)]
pub(super) enum Decoded {
    Message(RxJsonRpcMessage<RoleServer>),
    /// Not JSON, or a notification no MCP version defines: dropped, as the
    /// other MCP SDKs drop them, since answering what cannot be read can
    /// start an error storm with a peer that echoes it.
    Dropped,
    /// JSON that is no message of the protocol: answered with Invalid
    /// Request.
    Invalid,
}

/// Decodes one line, its newline included.
pub(super) fn decode(line: &[u8]) -> Decoded {
    if line.trim_ascii().is_empty() {
        return Decoded::Dropped;
    }
    if let Some(call) = call_tool(line) {
        return Decoded::Message(call);
    }
    let mut buffer = BytesMut::from(line);
    match JsonRpcMessageCodec::<RxJsonRpcMessage<RoleServer>>::default().decode_eof(&mut buffer) {
        Ok(Some(message)) => Decoded::Message(message),
        Ok(None) => Decoded::Dropped,
        Err(JsonRpcMessageCodecError::Serde(e)) => match e.classify() {
            serde_json::error::Category::Data | serde_json::error::Category::Io => Decoded::Invalid,
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                Decoded::Dropped
            }
        },
        Err(e) => {
            tracing::debug!("dropped a stdio line: {e}");
            Decoded::Dropped
        }
    }
}

/// A `tools/call` request as it is on the wire, read in one pass without
/// the buffering of rmcp's flattened types.
#[derive(Deserialize)]
struct WireCall {
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[expect(dead_code, reason = "read to check that it says `tools/call`")]
    method: CallToolRequestMethod,
    params: CallToolRequestParams,
    #[serde(default, deserialize_with = "present")]
    result: bool,
    #[serde(default, deserialize_with = "present")]
    error: bool,
}

/// Whether a key is there, whatever its value (`null` too), as rmcp
/// tells a request from a response.
fn present<'de, D: Deserializer<'de>>(value: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(value).map(|_| true)
}

/// The line's `tools/call` request, when it is one that rmcp would read
/// as such; `None` leaves the line to rmcp.
fn call_tool(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    let mut call: WireCall = serde_json::from_slice(line).ok()?;
    // A response's key makes the line no request to rmcp.
    if call.result || call.error {
        return None;
    }
    // rmcp keeps a request's `_meta` in its extensions, not its params.
    let meta = call.params.meta.take();
    let mut request = CallToolRequest::new(call.params);
    if let Some(meta) = meta {
        request.extensions.insert(meta);
    }
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: call.jsonrpc,
        id: call.id,
        request: ClientRequest::CallToolRequest(request),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What rmcp alone makes of `line`.
    fn rmcp(line: &str) -> Option<serde_json::Value> {
        let mut buffer = BytesMut::from(line.as_bytes());
        JsonRpcMessageCodec::<RxJsonRpcMessage<RoleServer>>::default()
            .decode_eof(&mut buffer)
            .ok()
            .flatten()
            .map(|message| serde_json::to_value(message).expect("a message serializes"))
    }

    fn decoded(line: &str) -> Option<serde_json::Value> {
        match decode(format!("{line}\n").as_bytes()) {
            Decoded::Message(message) => {
                Some(serde_json::to_value(message).expect("a message serializes"))
            }
            Decoded::Dropped | Decoded::Invalid => None,
        }
    }

    /// Calls of every shape: each is read at once, and as rmcp reads it.
    #[test]
    fn a_tool_call_is_read_at_once_as_rmcp_reads_it() {
        let calls = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}"#,
            r#"{"method":"tools/call","params":{"name":"echo"},"id":"a-1","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"e","arguments":{"n":1.5e300,"big":18446744073709551615,"neg":-3,"deep":[{"a":[null,true]}]},"_meta":{"progressToken":"p","io.example/x":{"k":1}}}}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"e\u00e9\n","arguments":{"s":"\ud83d\ude00"},"unknown":1},"extra":true}"#,
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"_meta":null,"name":"echo","requestState":"s"}}"#,
            // An escaped method name says `tools/call` too.
            r#"{"jsonrpc":"2.0","id":12,"method":"tools\/call","params":{"name":"e"}}"#,
            r#"{"id":11,"params":{"_meta":{"progressToken":3},"name":"echo","arguments":{}},"jsonrpc":"2.0","method":"tools/call"}"#,
            "  {\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}\r",
        ];
        for line in calls {
            assert!(
                call_tool(line.as_bytes()).is_some(),
                "not read at once: {line}"
            );
            let ours = decoded(line);
            assert!(ours.is_some(), "not a message: {line}");
            assert_eq!(ours, rmcp(line), "read otherwise than rmcp reads {line}");
        }
    }

    /// Lines that only look like calls are left to rmcp, which reads,
    /// drops or refuses them as it always has.
    #[test]
    fn what_is_not_plainly_a_call_is_left_to_rmcp() {
        let others = [
            // A response's key makes it no request (rmcp refuses it).
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","result":{},"params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","error":null,"params":{"name":"e"}}"#,
            // No id: a notification of an unknown method.
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"e"}}"#,
            // Other methods, and near misses.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/calls","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"name":"e"}}"#,
            // Parameters that are no call's.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"e"}}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"e\"}}",
        ];
        for line in others {
            assert!(call_tool(line.as_bytes()).is_none(), "read at once: {line}");
            assert_eq!(
                decoded(line),
                rmcp(line),
                "read otherwise than rmcp reads {line}"
            );
        }
    }

    #[test]
    fn other_requests_and_notifications_are_rmcps_to_read() {
        let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let custom = r#"{"jsonrpc":"2.0","method":"notifications/example/thing"}"#;
        for line in [initialize, initialized, custom] {
            let ours = decoded(line);
            assert!(ours.is_some(), "not a message: {line}");
            assert_eq!(ours, rmcp(line));
        }
    }

    #[test]
    fn what_is_no_message_is_dropped_or_refused_as_rmcp_does() {
        for line in ["", "   \r", "not json", "{\"jsonrpc\":", "x"] {
            assert!(
                matches!(decode(line.as_bytes()), Decoded::Dropped),
                "{line:?}"
            );
        }
        for line in [r#"{"a":1}"#, "[1,2]", "42"] {
            assert!(
                matches!(decode(line.as_bytes()), Decoded::Invalid),
                "{line}"
            );
        }
    }
}
