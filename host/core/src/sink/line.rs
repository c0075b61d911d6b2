//! What one event line holds. An outcome line keeps the log's growth per
//! call bounded (R37): the content as bounded, the retained references and
//! the usage, but never the full machine output or media bytes, which only
//! their sizes stand for.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::model::budget::Usage;
use crate::model::content::ContentPart;
use crate::model::context::CallContext;
use crate::model::event::SinkError;
use crate::model::outcome::{Completed, Logs, Outcome, RetainedOutput, Settlement};

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

/// A settlement as the log records it.
#[derive(Serialize)]
pub(super) struct LoggedSettlement<'a> {
    context: &'a CallContext,
    tool: &'a str,
    #[serde(flatten)]
    outcome: LoggedOutcome<'a>,
    usage: &'a Usage,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    logs: &'a Logs,
}

impl<'a> LoggedSettlement<'a> {
    pub(super) fn new(s: &'a Settlement) -> LoggedSettlement<'a> {
        LoggedSettlement {
            context: &s.context,
            tool: &s.tool,
            outcome: match &s.outcome {
                Outcome::Completed(c) => LoggedOutcome::Completed(LoggedCompleted::new(c)),
                // Every other outcome is bounded as it is (R28).
                other => LoggedOutcome::Other(other),
            },
            usage: &s.usage,
            warnings: &s.warnings,
            logs: &s.logs,
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum LoggedOutcome<'a> {
    Completed(LoggedCompleted<'a>),
    Other(&'a Outcome),
}

#[derive(Serialize)]
struct LoggedCompleted<'a> {
    status: &'static str,
    content: Vec<LoggedPart<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Map<String, Value>>,
    /// The machine output's size as JSON text, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    output_bytes: Option<u64>,
    #[serde(skip_serializing_if = "<[RetainedOutput]>::is_empty")]
    retained: &'a [RetainedOutput],
}

impl<'a> LoggedCompleted<'a> {
    fn new(c: &'a Completed) -> LoggedCompleted<'a> {
        LoggedCompleted {
            status: "completed",
            content: c.content.iter().map(LoggedPart::new).collect(),
            metadata: c.metadata.as_ref(),
            output_bytes: c.output.as_ref().map(json_len),
            retained: &c.retained,
        }
    }
}

/// A content part: text as bounded; media by its type and size.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum LoggedPart<'a> {
    Text {
        text: &'a str,
    },
    Media {
        mime_type: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'a str>,
        bytes: u64,
    },
}

impl<'a> LoggedPart<'a> {
    fn new(part: &'a ContentPart) -> LoggedPart<'a> {
        match part {
            ContentPart::Text { text } => LoggedPart::Text { text },
            ContentPart::Media {
                mime_type,
                data,
                name,
            } => LoggedPart::Media {
                mime_type,
                name: name.as_deref(),
                bytes: data.len() as u64,
            },
        }
    }
}

/// Bytes of `value` as compact JSON, counted without building the text.
fn json_len(value: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a sink that cannot fail cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}
