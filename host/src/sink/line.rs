//! What one event line holds: the event's kind and its body as JSON.

use serde::Serialize;

use crate::model::event::SinkError;

/// `{"event": kind, ...body}` and a newline.
pub(super) fn line(kind: &str, body: &impl Serialize) -> Result<Vec<u8>, SinkError> {
    #[derive(Serialize)]
    struct Line<'a, B> {
        event: &'a str,
        #[serde(flatten)]
        body: &'a B,
    }
    let mut line = serde_json::to_vec(&Line { event: kind, body })
        .map_err(|e| SinkError(format!("cannot serialize the {kind} event: {e}")))?;
    line.push(b'\n');
    Ok(line)
}
