//! The store (R38): outcomes by call identity, progress and audit events,
//! retained outputs and saved "always" answers, in one database: an
//! SQLite database in memory when the embedder asks for nothing, an
//! embedded SQLite file in a state directory it names, or Postgres when
//! replicas share it.
//!
//! An outcome is written exactly once per (session, message, call) ids: a
//! settle first [claims](Store::claim) the ids, and a call whose ids
//! already have a terminal outcome is not run again but replayed. Writes go
//! through one writer that commits whatever is queued in one
//! transaction (group commit), so [`Store::record`] returns only once its
//! outcome is durable.
//!
//! A crate of its own above `toolhost-model` (the only Toolhost crate it
//! depends on): configuration, the runtime and the facade use the store
//! through the [`Store`] trait and [`StoreSlot`]; embedders reach it as
//! `toolhost::store`.

#![deny(missing_docs)]

mod migrations;
mod slot;
mod sql;
mod writer;

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

// The model crate under the name its modules had when this was a module
// of `toolhost`.
use toolhost_model as model;
use toolhost_model::files;

use crate::model::context::CallContext;
use crate::model::outcome::Settlement;

pub use slot::{EventsToStore, StoreSlot};
pub use sql::SqlStore;

/// Rows one group commit writes at most; more wait for the next.
pub const MAX_BATCH: usize = 256;

/// Writes waiting for the writer; beyond it progress events are dropped
/// (and counted) and other writes wait.
pub const MAX_QUEUED_WRITES: usize = 4096;

/// Bytes of a retained output per stored chunk, so a large output is never
/// one giant row in memory.
pub const OUTPUT_CHUNK_BYTES: usize = 256 << 10;

/// Retained outputs one listing names at most (`resources/list`).
pub const MAX_LISTED_OUTPUTS: u32 = 1000;

/// Events (progress, audited requests) kept; older ones are removed.
pub const MAX_STORED_EVENTS: u64 = 1_000_000;

/// How durable an embedded (SQLite) store's commits are; each outcome is
/// committed before its call returns at either level (R38). Postgres
/// decides its own (its `synchronous_commit` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Each commit reaches the write-ahead log before its call returns,
    /// without waiting for the disk (SQLite's WAL with
    /// `synchronous=NORMAL`, its own advice for WAL): outcomes survive the
    /// process crashing or being killed; an operating-system crash or a
    /// power loss can lose the commits since the last checkpoint. Default.
    #[default]
    Normal,
    /// Each commit that records an outcome waits for the disk
    /// (`synchronous=FULL`): outcomes survive a power loss too, at the
    /// cost of a disk sync per call.
    Full,
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Durability::Normal => "normal",
            Durability::Full => "full",
        })
    }
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(text: &str) -> Result<Durability, String> {
        match text {
            "normal" => Ok(Durability::Normal),
            "full" => Ok(Durability::Full),
            other => Err(format!(
                "`{other}` is not a store durability: `normal` (survives the process crashing; the default) or `full` (survives power loss, a disk sync per call)"
            )),
        }
    }
}

/// A future of the store.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The store failed; calls that needed it fail operationally, naming it.
///
/// `Display` and `Error` are written out, not derived with thiserror: its
/// `#[source]` on an `Arc` would hand out the `Arc` itself, which does not
/// downcast to the cause.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be reached or opened.
    Unreachable {
        /// The store, its password removed.
        store: String,
        /// What failed.
        reason: String,
        /// The underlying error (`sqlx::Error`, `io::Error`, ...), for an
        /// embedder to downcast; `None` where the cause crossed the
        /// writer's queue as text. An `Arc` because the error is `Clone`.
        source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    },
    /// The database refused or lost a write or a read.
    Failed {
        /// The store, its password removed.
        store: String,
        /// What failed.
        reason: String,
        /// The underlying error, as in [`StoreError::Unreachable`].
        source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    },
    /// The URL names no store this build knows.
    BadUrl(String),
    /// A Postgres URL, but this build has no Postgres driver.
    NoPostgres,
    /// Another runner took over the call's ids after its claim ran out.
    ClaimLost {
        /// The call id.
        call: String,
    },
    /// An unclaimed call's ids, minted for it, were in the store already.
    IdsTaken {
        /// The call id.
        call: String,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Unreachable { store, reason, .. } => {
                write!(f, "cannot reach the store {store}: {reason}")
            }
            StoreError::Failed { store, reason, .. } => {
                write!(f, "the store {store} failed: {reason}")
            }
            StoreError::BadUrl(url) => write!(
                f,
                "`{url}` is not a store URL; use sqlite:PATH (the embedded store) or postgres://USER@HOST/DB"
            ),
            StoreError::NoPostgres => f.write_str(
                "this build of toolhost has no Postgres store; build the `toolhost` crate with its `postgres` feature",
            ),
            StoreError::ClaimLost { call } => write!(
                f,
                "the claim on call {call} ran out and another runner took it over"
            ),
            StoreError::IdsTaken { call } => write!(
                f,
                "the ids of call {call}, minted for it, are already in the store"
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // The cause itself, not its `Arc`, so that it downcasts.
            StoreError::Unreachable { source, .. } | StoreError::Failed { source, .. } => {
                source.as_deref().map(|e| e as _)
            }
            _ => None,
        }
    }
}

/// What a claim on a call's ids found.
///
/// Not `#[non_exhaustive]`: a store constructs these and settlement acts on
/// each; a new answer is a change both must make.
#[derive(Debug)]
pub enum Claim {
    /// Nobody settled these ids: this settle runs the call and records it.
    Claimed,
    /// These ids already have a terminal outcome: it is returned, marked
    /// replayed, and nothing runs.
    Replay(Box<Settlement>),
    /// Another settle runs these ids now (here or on another replica),
    /// until its lease ends at `until` (Unix milliseconds).
    Running {
        /// When its claim runs out.
        until: i64,
    },
    /// These ids belong to another call: reusing them is the client's
    /// error, neither a replay nor a run.
    Conflict(IdConflict),
}

/// How the call that holds a claim's ids differs from the one claiming
/// them. Not `#[non_exhaustive]`, as [`Claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdConflict {
    /// Another caller (R40) made it.
    Caller,
    /// It called another tool.
    Tool,
    /// It called the same tool with another input.
    Input,
}

/// A digest of a call's input text, kept with its ids so that ids reused
/// for other arguments are told apart from a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputDigest(blake3::Hash);

impl InputDigest {
    /// The digest of `input`, exactly as given.
    pub fn of(input: &str) -> InputDigest {
        InputDigest(blake3::hash(input.as_bytes()))
    }

    /// As the store keeps it: 64 hex digits.
    pub fn to_hex(&self) -> String {
        self.0.to_hex().to_string()
    }
}

/// An event to keep: a progress update or an audited request.
#[derive(Debug, Clone, Serialize)]
pub struct StoreEvent {
    /// `progress` or `request`.
    pub kind: &'static str,
    /// The call it belongs to.
    pub context: CallContext,
    /// The event as JSON.
    pub body: serde_json::Value,
}

/// A retained output as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOutput {
    /// The session that produced it.
    pub session: String,
    /// Its text.
    pub text: Vec<u8>,
}

/// A recorded outcome, as listed.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    /// When it was recorded, in Unix milliseconds.
    pub recorded_at: i64,
    /// The settlement, as its settle returned it.
    #[serde(flatten)]
    pub settlement: Settlement,
}

/// Which outcomes to list (`toolhost events`); every field narrows.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct OutcomeFilter {
    /// Only this session's.
    pub session: Option<String>,
    /// Only calls with this id.
    pub call: Option<String>,
    /// Only this status.
    pub status: Option<crate::model::outcome::Status>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only this caller's (`ISSUER#SUBJECT`, or `token:DIGEST`; R40).
    pub caller: Option<String>,
    /// Only outcomes recorded since this Unix millisecond.
    pub since: Option<i64>,
    /// At most this many, newest first. Default: 100.
    pub limit: Option<u32>,
}

/// Where outcomes, events, retained outputs and saved answers live.
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// Claims `context`'s ids for one settle of `tool` with the input
    /// `input` digests, for `lease`.
    fn claim<'a>(
        &'a self,
        context: &'a CallContext,
        tool: &'a str,
        input: &'a InputDigest,
        lease: Duration,
    ) -> StoreFuture<'a, Claim>;

    /// Records a claimed call's terminal outcome; returns once it is
    /// durable.
    fn record<'a>(&'a self, settlement: &'a Settlement) -> StoreFuture<'a, ()>;

    /// Whether a call whose ids were minted for it may run unclaimed now:
    /// nobody else can hold its ids, and while the store's last write
    /// succeeded a failing store is likely found after the run rather than
    /// before it. Default: false, every call claims first.
    fn runs_unclaimed(&self) -> bool {
        false
    }

    /// Records the terminal outcome of a call that ran unclaimed (its
    /// input digested as `input`), in one write; fails with
    /// [`StoreError::IdsTaken`] if its ids are in the store after all.
    /// Returns once it is durable. Default: claims the ids, then records.
    fn record_unclaimed<'a>(
        &'a self,
        settlement: &'a Settlement,
        input: &'a InputDigest,
    ) -> StoreFuture<'a, ()> {
        Box::pin(claim_then_record(self, settlement, input))
    }

    /// Keeps an event; may drop progress when the writer falls behind.
    fn event(&self, event: StoreEvent);

    /// Keeps a retained output of `session` under `id`, evicting the
    /// oldest outputs beyond `quota` bytes and those older than `retention`.
    fn retain<'a>(
        &'a self,
        id: &'a str,
        session: &'a str,
        text: &'a [u8],
        quota: u64,
        retention: Duration,
    ) -> StoreFuture<'a, ()>;

    /// A retained output, if it is still kept.
    fn output<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredOutput>>;

    /// The ids and sizes of the outputs `scope` retained that are still
    /// kept, newest first, at most [`MAX_LISTED_OUTPUTS`].
    fn outputs_of<'a>(&'a self, scope: &'a str) -> StoreFuture<'a, Vec<(String, u64)>>;

    /// Saves "always" answers (action, pattern) for `scope`.
    fn save_answers<'a>(
        &'a self,
        scope: &'a str,
        answers: &'a [(String, String)],
    ) -> StoreFuture<'a, ()>;

    /// The answers saved for `scope`.
    fn answers<'a>(&'a self, scope: &'a str) -> StoreFuture<'a, Vec<(String, String)>>;

    /// Recorded outcomes, newest first.
    fn outcomes<'a>(&'a self, filter: &'a OutcomeFilter) -> StoreFuture<'a, Vec<Recorded>>;

    /// Progress events the writer dropped because it fell behind.
    fn dropped_events(&self) -> u64;

    /// Whether the store answers now (`/readyz`): a trivial query. Default:
    /// ready.
    fn ready(&self) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// An unclaimed call's outcome on a store without a one-write path: its
/// ids claimed now (the outcome follows at once, so no lease), then the
/// outcome recorded under that claim.
async fn claim_then_record<S: Store + ?Sized>(
    store: &S,
    settlement: &Settlement,
    input: &InputDigest,
) -> Result<(), StoreError> {
    let claim = store
        .claim(&settlement.context, &settlement.tool, input, Duration::ZERO)
        .await?;
    match claim {
        Claim::Claimed => store.record(settlement).await,
        Claim::Replay(_) | Claim::Running { .. } | Claim::Conflict(_) => {
            Err(StoreError::IdsTaken {
                call: settlement.context.call_id.clone(),
            })
        }
    }
}

/// The per-user state directory, home of the CLI's embedded store
/// (`toolhost::HostBuilder::default_state_dir`):
/// `$XDG_STATE_HOME/toolhost`, else `~/.local/state/toolhost`; a per-user
/// directory in the system temporary directory only when neither is known.
pub fn default_state_dir() -> PathBuf {
    state_dir_from(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
}

fn state_dir_from(state: Option<std::ffi::OsString>, home: Option<std::ffi::OsString>) -> PathBuf {
    let state = state
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            home.filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        });
    match state {
        Some(dir) => dir.join("toolhost"),
        None => std::env::temp_dir().join(format!("toolhost-state-{}", user_id())),
    }
}

#[cfg(unix)]
fn user_id() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn user_id() -> u32 {
    0
}

/// Now, in Unix milliseconds: the store's clock, the same on every replica
/// as far as their clocks agree.
pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A URL fit for messages: its password removed.
pub(crate) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((credentials, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn r28_outputs_default_to_a_per_user_state_directory() {
        let state = state_dir_from(Some("/state".into()), Some("/home/me".into()));
        assert_eq!(state, Path::new("/state/toolhost"));
        let home = state_dir_from(None, Some("/home/me".into()));
        assert_eq!(home, Path::new("/home/me/.local/state/toolhost"));
        let neither = state_dir_from(Some("".into()), None);
        assert!(neither.starts_with(std::env::temp_dir()));
        assert!(neither.to_string_lossy().contains(&user_id().to_string()));
    }

    #[test]
    fn messages_never_show_a_password() {
        assert_eq!(
            redacted("postgres://tool:s3cret@db.example:5432/toolhost"),
            "postgres://tool:***@db.example:5432/toolhost"
        );
        assert_eq!(redacted("postgres://tool@db/x"), "postgres://tool@db/x");
        assert_eq!(redacted("sqlite:/var/x.db"), "sqlite:/var/x.db");
    }
}
