//! Progress and durable outcome events (R19, R24), and the sinks that
//! receive them.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use crate::settle::Settlement;
use crate::tool::CallContext;

/// One progress update of a running call.
#[derive(Debug, Clone, Serialize)]
pub struct ProgressEvent {
    /// The call reporting.
    pub context: CallContext,
    /// The effective tool name.
    pub tool: String,
    /// The update, a JSON object; it replaces the previous one.
    pub update: Value,
}

/// Receives events from settlement. Implementations must be cheap and must
/// not block for long: they run on the settling task.
pub trait EventSink: Send + Sync {
    /// A running call reported progress.
    fn progress(&self, event: &ProgressEvent) {
        let _ = event;
    }

    /// A call settled: its durable outcome.
    fn outcome(&self, settlement: &Settlement) {
        let _ = settlement;
    }
}

/// The progress channel of one call: keeps the last update and forwards each
/// to the sink. Only a running call holds one, so progress from outside a
/// call cannot exist (R24).
#[derive(Clone)]
pub(crate) struct Progress {
    inner: Arc<ProgressInner>,
}

struct ProgressInner {
    context: CallContext,
    tool: String,
    sink: Option<Arc<dyn EventSink>>,
    state: Mutex<ProgressState>,
}

#[derive(Default)]
struct ProgressState {
    last: Option<Value>,
    warnings: Vec<String>,
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Progress")
            .field("context", &self.inner.context)
            .field("tool", &self.inner.tool)
            .finish_non_exhaustive()
    }
}

impl Progress {
    pub(crate) fn new(
        context: CallContext,
        tool: String,
        sink: Option<Arc<dyn EventSink>>,
    ) -> Self {
        Progress {
            inner: Arc::new(ProgressInner {
                context,
                tool,
                sink,
                state: Mutex::default(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `update` (a JSON object) as the latest and forwards it.
    pub(crate) fn report(&self, update: Value) {
        if !update.is_object() {
            self.reject("a progress update that is not a JSON object was dropped".into());
            return;
        }
        self.lock().last = Some(update.clone());
        if let Some(sink) = &self.inner.sink {
            sink.progress(&ProgressEvent {
                context: self.inner.context.clone(),
                tool: self.inner.tool.clone(),
                update,
            });
        }
    }

    pub(crate) fn reject(&self, warning: String) {
        let mut state = self.lock();
        if !state.warnings.contains(&warning) {
            state.warnings.push(warning);
        }
    }

    /// The last update and the warnings collected.
    pub(crate) fn finish(&self) -> (Option<Value>, Vec<String>) {
        let mut state = self.lock();
        (state.last.take(), std::mem::take(&mut state.warnings))
    }
}

/// Writes every event as one JSON line to a file.
///
/// Each line is written with a single append; a crash mid-write can leave at
/// most one incomplete last line, which [`JsonLinesSink::open`] removes, so
/// every line in the file is complete.
#[derive(Debug)]
pub struct JsonLinesSink {
    file: Mutex<File>,
}

impl JsonLinesSink {
    /// Opens (creating) `path` for appending, first cutting off an
    /// incomplete last line left by a crash.
    pub fn open(path: impl AsRef<Path>) -> io::Result<JsonLinesSink> {
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)?;
        let complete = complete_len(&mut file)?;
        file.set_len(complete)?;
        file.seek(SeekFrom::End(0))?;
        Ok(JsonLinesSink {
            file: Mutex::new(file),
        })
    }

    /// Appends one line; `durable` lines are synced to disk before returning.
    fn write(&self, kind: &str, body: &impl Serialize, durable: bool) {
        #[derive(Serialize)]
        struct Line<'a, B> {
            event: &'a str,
            #[serde(flatten)]
            body: &'a B,
        }
        let Ok(mut line) = serde_json::to_vec(&Line { event: kind, body }) else {
            return;
        };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let written = file
            .write_all(&line)
            .and_then(|()| if durable { file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            tracing::warn!("event sink: cannot write {kind} event: {e}");
        }
    }
}

/// The length of `file` up to and including its last newline.
fn complete_len(file: &mut File) -> io::Result<u64> {
    const CHUNK: u64 = 4096;
    let len = file.seek(SeekFrom::End(0))?;
    let mut end = len;
    let mut buf = vec![0u8; CHUNK as usize];
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        file.seek(SeekFrom::Start(start))?;
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

impl EventSink for JsonLinesSink {
    fn progress(&self, event: &ProgressEvent) {
        // Progress is superseded by the next update: no sync per update.
        self.write("progress", event, false);
    }

    fn outcome(&self, settlement: &Settlement) {
        self.write("outcome", settlement, true);
    }
}
