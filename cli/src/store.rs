//! The store on the command line: `--store` and `--state-dir` for every
//! command that settles calls, and the operator commands `toolhost events`
//! (recorded outcomes, filtered) and `toolhost output` (a retained text).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::anyhow;
use clap::Args;
use toolhost::manifest::units::parse_duration;
use toolhost::outcome::Status;
use toolhost::store::{Durability, OutcomeFilter, Recorded, SqlStore, Store, default_state_dir};

use crate::{Failure, exit, stdio, terminal, usage};

/// Where outcomes, events, retained outputs and saved answers live.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct StoreArgs {
    /// The store: postgres://USER[:PASSWORD]@HOST[:PORT]/DB (shared by
    /// replicas; add ?sslmode=require for TLS) or sqlite:PATH. Default: the
    /// embedded store in the state directory.
    #[arg(long, value_name = "URL", env = "TOOLHOST_STORE")]
    store: Option<String>,
    /// The state directory, home of the embedded store (default:
    /// $XDG_STATE_HOME/toolhost, else ~/.local/state/toolhost).
    #[arg(
        long,
        value_name = "DIR",
        env = "TOOLHOST_STATE_DIR",
        alias = "output-dir"
    )]
    state_dir: Option<PathBuf>,
    /// How durable a SQLite store's commits are: `normal` (each outcome
    /// reaches the write-ahead log before the reply: survives the process
    /// crashing) or `full` (each outcome synced to disk before the reply:
    /// survives power loss too, at a disk sync per call). Postgres keeps
    /// its own (`synchronous_commit`).
    #[arg(
        long,
        value_name = "LEVEL",
        env = "TOOLHOST_STORE_DURABILITY",
        default_value_t = Durability::default()
    )]
    store_durability: Durability,
}

impl StoreArgs {
    /// The store `--store` names, opened now (an unreachable one is a usage
    /// error naming it); `None` for the embedded store, which the host
    /// opens when a call first needs it.
    pub(crate) async fn given(&self) -> Result<Option<Arc<dyn Store>>, Failure> {
        let Some(url) = &self.store else {
            return Ok(None);
        };
        let store = SqlStore::open_with(url, self.store_durability)
            .await
            .map_err(|e| usage(e.into()))?;
        Ok(Some(Arc::new(store)))
    }

    /// How durable the store's commits are.
    pub(crate) fn durability(&self) -> Durability {
        self.store_durability
    }

    /// The state directory `--state-dir` names, if any.
    pub(crate) fn state_dir(&self) -> Option<&PathBuf> {
        self.state_dir.as_ref()
    }

    /// The store: `--store`, else the embedded one, opened now.
    pub(crate) async fn open(&self) -> Result<Arc<dyn Store>, Failure> {
        if let Some(store) = self.given().await? {
            return Ok(store);
        }
        let dir = self.state_dir.clone().unwrap_or_else(default_state_dir);
        let store = SqlStore::embedded_with(&dir, self.store_durability)
            .await
            .map_err(|e| usage(e.into()))?;
        Ok(Arc::new(store))
    }
}

/// Outcomes one `toolhost events` lists at most: each is read whole into
/// memory, and the store keeps every outcome.
const MAX_LISTED_EVENTS: u32 = 10_000;

/// `toolhost events`' filters.
#[derive(Args, Clone, Debug)]
pub(crate) struct EventsArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Only this session's outcomes.
    #[arg(long)]
    session: Option<String>,
    /// Only the call with this id.
    #[arg(long)]
    call: Option<String>,
    /// Only this status: completed, error, interrupted or defect.
    #[arg(long, value_parser = parse_status)]
    status: Option<Status>,
    /// Only this tool's outcomes.
    #[arg(long)]
    tool: Option<String>,
    /// Only this caller's outcomes: `ISSUER#SUBJECT` for an OAuth caller
    /// of `serve --http`, `token:DIGEST` for a static token.
    #[arg(long)]
    caller: Option<String>,
    /// Only outcomes recorded within this long, e.g. 10m, 2h, 7d.
    #[arg(long, value_parser = parse_duration)]
    since: Option<Duration>,
    /// At most this many, newest first (at most 10,000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_LISTED_EVENTS)))]
    limit: u32,
    /// Print one JSON object per outcome (JSON Lines).
    #[arg(long)]
    json: bool,
}

/// `toolhost events`: recorded outcomes, newest first.
pub(crate) async fn events(args: &EventsArgs) -> Result<u8, Failure> {
    let store = args.store.open().await?;
    let mut filter = OutcomeFilter::default();
    filter.session = args.session.clone();
    filter.call = args.call.clone();
    filter.status = args.status;
    filter.tool = args.tool.clone();
    filter.caller = args.caller.clone();
    filter.since = args.since.map(|ago| millis(SystemTime::now() - ago));
    filter.limit = Some(args.limit);
    let listed = store.outcomes(&filter).await.map_err(Failure::from)?;
    for recorded in &listed {
        let line = if args.json {
            serde_json::to_string(recorded).map_err(anyhow::Error::from)?
        } else {
            terminal::line(&summary(recorded))
        };
        stdio::line(&line)?;
    }
    Ok(exit::COMPLETED)
}

/// One outcome on one line: when, status, tool, ids.
fn summary(recorded: &Recorded) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(recorded.recorded_at).unwrap_or(0));
    let s = &recorded.settlement;
    let caller = s
        .context
        .caller
        .as_ref()
        .map(|c| format!(" caller={}", c.name()))
        .unwrap_or_default();
    format!(
        "{}  {:<11}  {}  session={} message={} call={}{caller}",
        humantime::format_rfc3339_millis(at),
        s.outcome.status(),
        s.tool,
        s.context.session_id,
        s.context.message_id,
        s.context.call_id,
    )
}

fn millis(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `toolhost output`'s arguments.
#[derive(Args, Clone, Debug)]
pub(crate) struct OutputArgs {
    /// The output's id, or its reference `toolhost-output:<id>`.
    id: String,
    #[command(flatten)]
    store: StoreArgs,
}

/// `toolhost output ID`: the retained text on stdout, raw into a pipe or
/// file, escaped on a terminal.
pub(crate) async fn output(args: &OutputArgs) -> Result<u8, Failure> {
    let store = args.store.open().await?;
    let id = args.id.strip_prefix("toolhost-output:").unwrap_or(&args.id);
    let found = store.output(id).await.map_err(Failure::from)?;
    let Some(found) = found else {
        return Err(usage(anyhow!(
            "no retained output `{}` in the store; it may have expired (`toolhost events` lists outcomes and their references)",
            terminal::line(id)
        )));
    };
    if std::io::stdout().is_terminal() {
        stdio::write(terminal::text(&String::from_utf8_lossy(&found.text)).as_bytes())?;
    } else {
        stdio::write(&found.text)?;
    }
    Ok(exit::COMPLETED)
}

/// `--status`: one of the four statuses, by name.
fn parse_status(name: &str) -> Result<Status, String> {
    name.parse()
        .map_err(|e: toolhost::outcome::UnknownStatus| e.to_string())
}
