//! How the front door refuses a request: the whole reply, as a JSON-RPC
//! error where the client reads one.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// JSON-RPC's parse error.
pub(crate) const PARSE_ERROR: i32 = -32700;

/// JSON-RPC's invalid params.
pub(crate) const INVALID_PARAMS: i32 = -32602;

/// A refusal: the whole reply to a request that goes no further.
pub(crate) type Refused = Box<Response>;

/// A JSON-RPC error as a whole HTTP reply.
pub(crate) fn rpc_error(status: StatusCode, id: Value, code: i32, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// An error that also closes the connection: its request was not read to
/// the end, so the connection is out of step.
pub(crate) fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
