//! How a call ends (R19, R20): the four outcomes and what they carry.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::budget::Usage;
use crate::content::ContentPart;
use crate::context::CallContext;

/// The exact error for every call of a final-step snapshot (R11).
pub const FINAL_STEP_MESSAGE: &str = "Tools are disabled after the maximum agent steps";

/// Why a call stopped without a result. Not a tool result (R20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interruption {
    /// The embedder cancelled it.
    Cancelled,
    /// Its wall-clock deadline passed.
    Deadline,
    /// Its fuel budget ran out.
    Fuel,
}

impl fmt::Display for Interruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Interruption::Cancelled => "cancelled",
            Interruption::Deadline => "deadline exceeded",
            Interruption::Fuel => "fuel budget exhausted",
        })
    }
}

/// Guest output captured during a call (R25).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Logs {
    /// Captured stdout (bounded).
    pub stdout: String,
    /// Captured stderr (bounded).
    pub stderr: String,
    /// Bytes of stdout and stderr dropped beyond the bound.
    pub dropped_bytes: u64,
}

/// What a misbehaving guest did: a defect, never a tool result (R20).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DefectKind {
    /// The guest panicked; the panic message when it printed one.
    Panic(String),
    /// The guest trapped (unreachable, out-of-bounds access, ...).
    Trap(String),
    /// The guest overflowed its wasm stack.
    StackOverflow,
    /// The guest asked for more linear memory than its limit (bytes).
    MemoryLimit(u64),
    /// The guest broke the plugin contract (bad JSON, empty content, ...).
    Contract(String),
    /// A bridged MCP server failed the call: it exited, disconnected or
    /// answered with a protocol error. Names the server.
    McpServer(String),
}

impl fmt::Display for DefectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DefectKind::Panic(m) => write!(f, "panicked: {m}"),
            DefectKind::Trap(t) => write!(f, "trapped: {t}"),
            DefectKind::StackOverflow => f.write_str("overflowed its stack (too deep recursion?)"),
            DefectKind::MemoryLimit(limit) => write!(
                f,
                "hit the memory limit of {} MiB; raise it (--memory or the manifest's limits.memory) if the tool needs more",
                limit >> 20
            ),
            DefectKind::Contract(m) => write!(f, "broke the plugin contract: {m}"),
            DefectKind::McpServer(m) => f.write_str(m),
        }
    }
}

impl DefectKind {
    /// A machine output over its cap (R28).
    pub fn machine_output_too_large(bytes: usize, max: usize) -> DefectKind {
        DefectKind::Contract(format!(
            "returned a machine output of {bytes} bytes; the limit is {max} (raise `limits.max_machine_output` in its manifest if the tool needs more)"
        ))
    }
}

/// A defect, naming plugin, version and tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("plugin {plugin} {version}, tool `{tool}`: {kind}")]
pub struct Defect {
    /// The plugin's name (`native` for native tools).
    pub plugin: String,
    /// The plugin's version.
    pub version: String,
    /// The tool (or `activate`).
    pub tool: String,
    /// What went wrong.
    pub kind: DefectKind,
}

/// Which part of the host failed to settle a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FaultKind {
    /// Every instance slot of the pooling allocator was busy.
    Pool,
    /// The call's store or instance could not be set up.
    Setup,
    /// An oversized output could not be retained (R16).
    Retention,
    /// An after-hook produced an invalid outcome (R18).
    Hook,
    /// The event sink could not record the outcome durably (R19).
    Sink,
    /// The store could not claim the call's ids or record its outcome
    /// (R38).
    Store,
}

/// A failure of the host, not of the guest: what failed and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{message}")]
pub struct HostFault {
    /// What failed.
    pub kind: FaultKind,
    /// What happened and what to do, naming the part that failed.
    pub message: String,
}

impl HostFault {
    /// A fault of `kind`, explained by `message`.
    pub fn new(kind: FaultKind, message: impl Into<String>) -> HostFault {
        HostFault {
            kind,
            message: message.into(),
        }
    }
}

/// Who is at fault for an operational failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Culprit {
    /// The guest misbehaved (boxed: outcomes stay small).
    #[serde(rename = "defect")]
    Guest(Box<Defect>),
    /// The host could not settle the call.
    #[serde(rename = "fault")]
    Host(HostFault),
}

impl fmt::Display for Culprit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Culprit::Guest(d) => d.fmt(f),
            Culprit::Host(h) => h.fmt(f),
        }
    }
}

/// Why a call ended in a model-visible error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// No such tool in the snapshot (R10).
    UnknownTool,
    /// The snapshot is a final step (R11).
    Disabled,
    /// The arguments are not JSON (R13).
    MalformedInput,
    /// The arguments violate the input schema (R13).
    InvalidInput,
    /// The output violates the output schema (R14).
    InvalidOutput,
    /// The tool reported a failure.
    ToolFailure,
    /// The call's ids already name another call (another caller's, another
    /// tool's, or other arguments'): the client's error; nothing ran (R38).
    IdsReused,
}

/// A full output kept in the store (R16, R38), addressed only by its
/// opaque reference: read it back with
/// `toolhost::Host::retained`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetainedOutput {
    /// The opaque reference the marker gives, `toolhost-output:<id>`.
    pub reference: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// A completed call's canonical result (R19).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completed {
    /// Non-empty, bounded model content.
    pub content: Vec<ContentPart>,
    /// Metadata, a JSON object of at most `toolhost::limits::MAX_METADATA_BYTES`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The validated machine output, when the tool has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Full texts retained because their parts were bounded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retained: Vec<RetainedOutput>,
}

/// How a call ended: one of exactly four outcomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Success.
    Completed(Completed),
    /// A model-visible error.
    Error {
        /// What went wrong, written for the model.
        message: String,
        /// Why.
        kind: ErrorKind,
        /// The last progress update, bounded (R19).
        #[serde(skip_serializing_if = "Option::is_none")]
        partial: Option<Value>,
        /// The tool's metadata for its failure, checked like success
        /// metadata (R17).
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Map<String, Value>>,
    },
    /// Stopped by cancellation, deadline or fuel; not a tool result (R20).
    Interrupted {
        /// Which.
        reason: Interruption,
    },
    /// An operational failure: a defect of the guest (R20) or a fault of
    /// the host (retention, hooks, the event sink, the instance pool).
    Defect {
        /// What went wrong, naming the plugin and tool or the host part.
        message: String,
        /// Who is at fault: `defect` (the guest) or `fault` (the host) in
        /// JSON.
        #[serde(flatten)]
        culprit: Culprit,
    },
}

/// Which of the four outcomes a call ended in: what the store records,
/// metrics count and `toolhost events --status` filters by. Written in
/// lowercase (`completed`, `error`, `interrupted`, `defect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Status {
    /// [`Outcome::Completed`].
    Completed,
    /// [`Outcome::Error`].
    Error,
    /// [`Outcome::Interrupted`].
    Interrupted,
    /// [`Outcome::Defect`].
    Defect,
}

impl Status {
    /// Every status, in the order above.
    pub const ALL: [Status; 4] = [
        Status::Completed,
        Status::Error,
        Status::Interrupted,
        Status::Defect,
    ];

    /// Its lowercase name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Error => "error",
            Status::Interrupted => "interrupted",
            Status::Defect => "defect",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Status {
    type Err = UnknownStatus;

    fn from_str(name: &str) -> Result<Status, UnknownStatus> {
        Status::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| UnknownStatus(name.to_owned()))
    }
}

/// Compares with its name, as a status read from text is written.
impl PartialEq<&str> for Status {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

/// A name that is not one of the four statuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a status; use completed, error, interrupted or defect")]
pub struct UnknownStatus(String);

impl Outcome {
    /// Which of the four it is.
    pub fn status(&self) -> Status {
        match self {
            Outcome::Completed(_) => Status::Completed,
            Outcome::Error { .. } => Status::Error,
            Outcome::Interrupted { .. } => Status::Interrupted,
            Outcome::Defect { .. } => Status::Defect,
        }
    }

    /// A model-visible error without partial progress or metadata.
    pub fn error(kind: ErrorKind, message: String) -> Outcome {
        Outcome::Error {
            message,
            kind,
            partial: None,
            metadata: None,
        }
    }

    /// An operational failure blamed on `culprit`.
    pub fn defect(culprit: Culprit) -> Outcome {
        Outcome::Defect {
            message: culprit.to_string(),
            culprit,
        }
    }

    /// An operational failure of the host.
    pub fn fault(kind: FaultKind, message: impl Into<String>) -> Outcome {
        Outcome::defect(Culprit::Host(HostFault::new(kind, message)))
    }
}

/// A settled call: its identity, outcome, usage, warnings and logs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settlement {
    /// The exact ids the runner supplied (R19).
    pub context: CallContext,
    /// The tool name the model used.
    pub tool: String,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// What it consumed (R23).
    pub usage: Usage,
    /// Things dropped or ignored on the way (e.g. oversized metadata).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Captured guest stdout/stderr (R25).
    pub logs: Logs,
    /// The outcome was recorded by an earlier settle of the same ids and
    /// returned from the store; nothing ran (R38).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}
