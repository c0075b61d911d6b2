//! What a settlement holds, for assertions: each helper panics naming the
//! outcome when the call did not end the way it expects.

use serde_json::Value;
use toolhost::{Completed, ContentPart, Outcome, Settlement, Snapshot};

/// The tool names `snapshot` offers, in its order.
pub fn names(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .definitions()
        .iter()
        .map(|d| d.name.clone())
        .collect()
}

/// What a completed call returned; panics on any other outcome.
pub fn completed(s: &Settlement) -> &Completed {
    match &s.outcome {
        Outcome::Completed(c) => c,
        other => panic!("expected completed, got {other:?}"),
    }
}

/// A completed call's machine output (`null` when it has none).
pub fn output(s: &Settlement) -> Value {
    completed(s).output.clone().unwrap_or_default()
}

/// Every content part of a completed call, as text: a text part's text, a
/// media part as `<mime/type>`.
pub fn texts(s: &Settlement) -> Vec<String> {
    completed(s)
        .content
        .iter()
        .map(|p| match p {
            ContentPart::Text { text } => text.clone(),
            ContentPart::Media { mime_type, .. } => format!("<{mime_type}>"),
        })
        .collect()
}

/// A completed call's content parts as text ([`texts`]), one per line.
pub fn text(s: &Settlement) -> String {
    texts(s).join("\n")
}

/// A tool error's message; panics on any other outcome.
pub fn error_message(s: &Settlement) -> &str {
    match &s.outcome {
        Outcome::Error { message, .. } => message,
        other => panic!("expected a tool error, got {other:?}"),
    }
}
