//! The store on a SQL database: an embedded SQLite file (WAL; a commit that
//! records an outcome synced at [`Durability::Full`]) or Postgres, the same
//! statements on both; writes go through the one writer, reads through
//! sqlx's pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Executor as _, Row as _};
use tokio::sync::{mpsc, oneshot};

use crate::model::context::CallContext;
use crate::model::outcome::{Settlement, Status};
use crate::store::migrations::{Backend, migrator};
use crate::store::writer::{self, Counters, StoredOutcome, Unclaimed, Write, Writes};
use crate::store::{
    Claim, Durability, InputDigest, MAX_LISTED_OUTPUTS, MAX_QUEUED_WRITES, OutcomeFilter, Recorded,
    Store, StoreError, StoreEvent, StoreFuture, StoredOutput, now_millis, redacted,
};

/// Connections a store keeps open: the writer's and a few readers'.
const MAX_CONNECTIONS: u32 = 8;

/// How long to wait for a connection before the store counts as
/// unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Outcomes `toolhost events` lists when no limit is given.
const DEFAULT_LIST_LIMIT: u32 = 100;

/// Recorded outcomes, newest first; absent filters match everything
/// (`$n IS NULL OR column = $n`).
const LIST_OUTCOMES: &str = "SELECT settlement, ended_at FROM calls WHERE state = 'done' \
     AND ($1 IS NULL OR session_id = $1) \
     AND ($2 IS NULL OR call_id = $2) \
     AND ($3 IS NULL OR status = $3) \
     AND ($4 IS NULL OR tool = $4) \
     AND ($5 IS NULL OR ended_at >= $5) \
     AND ($7 IS NULL OR caller = $7) \
     ORDER BY ended_at DESC LIMIT $6";

/// The file of the embedded store in its directory.
pub(crate) const EMBEDDED_FILE: &str = "store.sqlite3";

/// A store on SQLite or Postgres.
pub struct SqlStore {
    name: String,
    pool: AnyPool,
    writes: Writes,
    counters: Arc<Counters>,
    /// Who claims calls here: one id per store handle.
    owner: Arc<str>,
    dropped: Arc<AtomicU64>,
    /// Whether the last write this handle waited for succeeded: calls with
    /// minted ids run unclaimed only then.
    answering: AtomicBool,
    /// Whether progress and audit events are kept: not in memory, where
    /// nothing could read them back.
    keeps_events: bool,
}

impl std::fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl SqlStore {
    /// Opens the store at `url`, `sqlite:PATH` (the file is created) or
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` (TLS with
    /// `?sslmode=require`), and brings its schema up to date. A SQLite
    /// store's commits are [`Durability::Normal`].
    pub async fn open(url: &str) -> Result<SqlStore, StoreError> {
        SqlStore::open_with(url, Durability::default()).await
    }

    /// [`open`](SqlStore::open), a SQLite store's commits as durable as
    /// `durability` says (Postgres decides its own).
    pub async fn open_with(url: &str, durability: Durability) -> Result<SqlStore, StoreError> {
        SqlStore::connect(url, durability, None).await
    }

    /// A store in this process's memory (an SQLite database of its own,
    /// shared by the store's connections and by nothing else): nothing
    /// touches the disk, and what it keeps (outcomes, retained outputs,
    /// saved answers) lasts as long as the store. It keeps no progress or
    /// audit events, which nothing could read back. What a [`Host`] uses
    /// when it is given neither a store nor a state directory.
    ///
    /// [`Host`]: crate::Host
    pub async fn in_memory() -> Result<SqlStore, StoreError> {
        // SQLite's memdb VFS: a name starting with `/` is one database
        // shared by every connection of this process that opens it, with
        // the locking (and busy timeout) of a file, unlike a shared-cache
        // `:memory:` database. No file is ever opened under that name.
        let name = format!("/toolhost-memory-{}", uuid::Uuid::new_v4().simple());
        let writer = format!("file:{name}?vfs=memdb");
        SqlStore::connect(
            &format!("sqlite:{name}?vfs=memdb"),
            Durability::default(),
            Some(writer),
        )
        .await
    }

    /// Opens the store at `url`; `memory` is the in-memory database's
    /// name for the writer's own connection (a file store's is read from
    /// the pool).
    async fn connect(
        url: &str,
        durability: Durability,
        memory: Option<String>,
    ) -> Result<SqlStore, StoreError> {
        let backend = backend_of(url)?;
        let name = if memory.is_some() {
            "the in-memory store".to_owned()
        } else {
            redacted(url)
        };
        // The file lookup and the writer report text only: no cause.
        let unreachable = |e: &dyn std::fmt::Display| StoreError::Unreachable {
            store: name.clone(),
            reason: e.to_string(),
            source: None,
        };
        install_default_drivers();
        let url = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_owned(),
        };
        let mut options = AnyPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(CONNECT_TIMEOUT);
        if backend == Backend::Sqlite {
            options = options.after_connect(|db, _| {
                Box::pin(async move {
                    // WAL lets reads run beside the writer (a connection of
                    // its own); FULL syncs the migrations these run.
                    db.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 10000;")
                        .await?;
                    Ok(())
                })
            });
        }
        let pool = options
            .connect(&url)
            .await
            .map_err(|e| StoreError::Unreachable {
                store: name.clone(),
                reason: e.to_string(),
                source: Some(Arc::new(e)),
            })?;
        migrator(backend)
            .run(&pool)
            .await
            .map_err(|e| StoreError::Failed {
                store: name.clone(),
                reason: format!("cannot bring its schema up to date: {e}"),
                source: Some(Arc::new(e)),
            })?;
        let (sender, queue) = mpsc::channel(MAX_QUEUED_WRITES);
        let counters = Arc::new(Counters::default());
        let writes = match backend {
            Backend::Sqlite => {
                let file = match &memory {
                    Some(uri) => PathBuf::from(uri),
                    None => file_of(&pool).await.map_err(|e| unreachable(&e))?,
                };
                let sqlite = writer::sqlite::spawn(&file, durability, queue, counters.clone())
                    .map_err(|e| unreachable(&e))?;
                Writes::new(sender, Some(sqlite))
            }
            Backend::Postgres => {
                tokio::spawn(writer::pool::run(pool.clone(), queue, counters.clone()));
                Writes::new(sender, None)
            }
        };
        Ok(SqlStore {
            name,
            pool,
            writes,
            counters,
            owner: uuid::Uuid::new_v4().simple().to_string().into(),
            dropped: Arc::default(),
            answering: AtomicBool::new(true),
            keeps_events: memory.is_none(),
        })
    }

    /// The embedded store in `dir` (created, private to this user), its
    /// commits [`Durability::Normal`].
    pub async fn embedded(dir: &Path) -> Result<SqlStore, StoreError> {
        SqlStore::embedded_with(dir, Durability::default()).await
    }

    /// [`embedded`](SqlStore::embedded), its commits as durable as
    /// `durability` says.
    pub async fn embedded_with(dir: &Path, durability: Durability) -> Result<SqlStore, StoreError> {
        crate::files::private_dir(dir).map_err(|e| StoreError::Unreachable {
            store: dir.display().to_string(),
            reason: e.to_string(),
            source: Some(Arc::new(e)),
        })?;
        let file = dir.join(EMBEDDED_FILE);
        SqlStore::open_with(&format!("sqlite:{}", file.display()), durability).await
    }

    /// Transactions the writer committed, and the writes in them: their
    /// ratio is the mean group-commit batch.
    pub fn commits(&self) -> (u64, u64) {
        (
            self.counters.commits.load(Ordering::Relaxed),
            self.counters.writes.load(Ordering::Relaxed),
        )
    }

    /// Of the commits, those a caller made on its own thread because the
    /// connection was free (SQLite), not the writer's thread.
    pub fn commits_in_place(&self) -> u64 {
        self.counters.here.load(Ordering::Relaxed)
    }

    /// The settlement as the store keeps it.
    fn outcome(&self, settlement: &Settlement) -> Result<StoredOutcome, StoreError> {
        Ok(StoredOutcome {
            context: settlement.context.clone(),
            owner: self.owner.clone(),
            status: settlement.outcome.status(),
            settlement: serde_json::to_string(settlement).map_err(|e| {
                self.failed_with(format!("cannot serialize the outcome: {e}"), Arc::new(e))
            })?,
        })
    }

    /// A failure with no underlying error (the writer's, which crosses
    /// its queue as text).
    fn failed(&self, reason: impl std::fmt::Display) -> StoreError {
        StoreError::Failed {
            store: self.name.clone(),
            reason: reason.to_string(),
            source: None,
        }
    }

    /// A failure caused by `e`, its message the reason.
    fn failed_by(&self, e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        self.failed_with(e.to_string(), Arc::new(e))
    }

    fn failed_with(
        &self,
        reason: String,
        source: Arc<dyn std::error::Error + Send + Sync>,
    ) -> StoreError {
        StoreError::Failed {
            store: self.name.clone(),
            reason,
            source: Some(source),
        }
    }

    /// Queues a write and waits for its batch to commit.
    async fn write<T>(
        &self,
        write: Write,
        done: oneshot::Receiver<Result<T, String>>,
    ) -> Result<T, StoreError> {
        let stopped = || self.failed("its writer has stopped");
        let written = match self.writes.send(write).await {
            Ok(()) => done
                .await
                .map_err(|_| stopped())
                .and_then(|written| written.map_err(|e| self.failed(e))),
            Err(_) => Err(stopped()),
        };
        self.answering.store(written.is_ok(), Ordering::Relaxed);
        written
    }

    /// Queues an outcome and waits until it is durable: an error if the
    /// row it needed (its claim, or no row at all) was not there.
    async fn write_outcome(
        &self,
        write: Write,
        done: oneshot::Receiver<Result<bool, String>>,
        missing: StoreError,
    ) -> Result<(), StoreError> {
        if self.write(write, done).await? {
            Ok(())
        } else {
            Err(missing)
        }
    }
}

/// The file a SQLite pool has open, for the writer's own connection; an
/// in-memory database has none, and a second connection would not see it.
async fn file_of(pool: &AnyPool) -> Result<PathBuf, String> {
    let row = sqlx::query("SELECT file FROM pragma_database_list WHERE name = 'main'")
        .fetch_one(pool)
        .await
        .map_err(|e| e.to_string())?;
    let file: String = row.try_get(0).map_err(|e| e.to_string())?;
    if file.is_empty() {
        return Err("an in-memory SQLite store keeps nothing; name a file: sqlite:PATH".into());
    }
    Ok(PathBuf::from(file))
}

/// Which database a URL names.
fn backend_of(url: &str) -> Result<Backend, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        if cfg!(feature = "postgres") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::NoPostgres)
        }
    } else {
        Err(StoreError::BadUrl(redacted(url)))
    }
}

impl Store for SqlStore {
    fn claim<'a>(
        &'a self,
        context: &'a CallContext,
        tool: &'a str,
        input: &'a InputDigest,
        lease: Duration,
    ) -> StoreFuture<'a, Claim> {
        Box::pin(async move {
            let (done, claimed) = oneshot::channel();
            let lease = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
            let write = Write::Claim {
                context: context.clone(),
                tool: tool.to_owned(),
                input: *input,
                owner: self.owner.clone(),
                lease_until: now_millis().saturating_add(lease),
                done,
            };
            self.write(write, claimed).await
        })
    }

    fn record<'a>(&'a self, settlement: &'a Settlement) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let (done, recorded) = oneshot::channel();
            let write = Write::Record {
                outcome: self.outcome(settlement)?,
                unclaimed: None,
                done,
            };
            let lost = StoreError::ClaimLost {
                call: settlement.context.call_id.clone(),
            };
            self.write_outcome(write, recorded, lost).await
        })
    }

    fn runs_unclaimed(&self) -> bool {
        self.answering.load(Ordering::Relaxed)
    }

    fn record_unclaimed<'a>(
        &'a self,
        settlement: &'a Settlement,
        input: &'a InputDigest,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let (done, recorded) = oneshot::channel();
            let wall = i64::try_from(settlement.usage.wall_time.as_millis()).unwrap_or(i64::MAX);
            let write = Write::Record {
                outcome: self.outcome(settlement)?,
                unclaimed: Some(Unclaimed {
                    tool: settlement.tool.clone(),
                    input: *input,
                    started_at: now_millis().saturating_sub(wall),
                }),
                done,
            };
            let taken = StoreError::IdsTaken {
                call: settlement.context.call_id.clone(),
            };
            self.write_outcome(write, recorded, taken).await
        })
    }

    fn event(&self, event: StoreEvent) {
        if !self.keeps_events {
            return;
        }
        if self.writes.try_send(Write::Event(event)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn retain<'a>(
        &'a self,
        id: &'a str,
        session: &'a str,
        text: &'a [u8],
        quota: u64,
        retention: Duration,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let retention = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
            let (done, kept) = oneshot::channel();
            let write = Write::Retain {
                id: id.to_owned(),
                session: session.to_owned(),
                text: text.to_vec(),
                quota,
                expired_before: now_millis().saturating_sub(retention),
                done,
            };
            self.write(write, kept).await
        })
    }

    fn ready(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            sqlx::query("SELECT 1")
                .execute(&self.pool)
                .await
                .map_err(|e| self.failed_by(e))?;
            Ok(())
        })
    }

    fn output<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredOutput>> {
        Box::pin(async move {
            let row = sqlx::query("SELECT session_id, bytes FROM outputs WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| self.failed_by(e))?;
            let Some(row) = row else {
                return Ok(None);
            };
            let session: String = row.try_get(0).map_err(|e| self.failed_by(e))?;
            let bytes: i64 = row.try_get(1).map_err(|e| self.failed_by(e))?;
            let chunks = sqlx::query("SELECT data FROM output_chunks WHERE id = $1 ORDER BY seq")
                .bind(id)
                .fetch_all(&self.pool)
                .await
                .map_err(|e| self.failed_by(e))?;
            let mut text = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0));
            for chunk in chunks {
                let data: Vec<u8> = chunk.try_get(0).map_err(|e| self.failed_by(e))?;
                text.extend_from_slice(&data);
            }
            Ok(Some(StoredOutput { session, text }))
        })
    }

    fn outputs_of<'a>(&'a self, scope: &'a str) -> StoreFuture<'a, Vec<(String, u64)>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id, bytes FROM outputs WHERE session_id = $1 ORDER BY created_at DESC LIMIT $2",
            )
            .bind(scope)
            .bind(i64::from(MAX_LISTED_OUTPUTS))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.failed_by(e))?;
            rows.iter()
                .map(|row| {
                    let bytes: i64 = row.try_get(1)?;
                    Ok((row.try_get(0)?, u64::try_from(bytes).unwrap_or(0)))
                })
                .collect::<sqlx::Result<_>>()
                .map_err(|e| self.failed_by(e))
        })
    }

    fn save_answers<'a>(
        &'a self,
        scope: &'a str,
        answers: &'a [(String, String)],
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let (done, saved) = oneshot::channel();
            let write = Write::Answers {
                scope: scope.to_owned(),
                answers: answers.to_vec(),
                done,
            };
            self.write(write, saved).await
        })
    }

    fn answers<'a>(&'a self, scope: &'a str) -> StoreFuture<'a, Vec<(String, String)>> {
        Box::pin(async move {
            let rows = sqlx::query("SELECT action, pattern FROM answers WHERE scope = $1")
                .bind(scope)
                .fetch_all(&self.pool)
                .await
                .map_err(|e| self.failed_by(e))?;
            rows.iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<sqlx::Result<_>>()
                .map_err(|e| self.failed_by(e))
        })
    }

    fn outcomes<'a>(&'a self, filter: &'a OutcomeFilter) -> StoreFuture<'a, Vec<Recorded>> {
        Box::pin(async move {
            let rows = sqlx::query(LIST_OUTCOMES)
                .bind(filter.session.as_deref())
                .bind(filter.call.as_deref())
                .bind(filter.status.map(Status::as_str))
                .bind(filter.tool.as_deref())
                .bind(filter.since)
                .bind(i64::from(filter.limit.unwrap_or(DEFAULT_LIST_LIMIT)))
                .bind(filter.caller.as_deref())
                .fetch_all(&self.pool)
                .await
                .map_err(|e| self.failed_by(e))?;
            rows.iter()
                .map(|row| {
                    let text: String = row.try_get(0).map_err(|e| self.failed_by(e))?;
                    let recorded_at: i64 = row.try_get(1).map_err(|e| self.failed_by(e))?;
                    let settlement = serde_json::from_str(&text).map_err(|e| self.failed_by(e))?;
                    Ok(Recorded {
                        recorded_at,
                        settlement,
                    })
                })
                .collect()
        })
    }

    fn dropped_events(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::outcome::Outcome;
    use crate::store::IdConflict;

    fn context(call: &str) -> CallContext {
        CallContext {
            session_id: "ses".into(),
            agent: "tester".into(),
            message_id: "msg".into(),
            call_id: call.into(),
            caller: None,
        }
    }

    fn input() -> InputDigest {
        InputDigest::of("{}")
    }

    fn settlement(call: &str) -> Settlement {
        Settlement {
            context: context(call),
            tool: "echo".into(),
            outcome: Outcome::fault(crate::model::outcome::FaultKind::Pool, "for the test"),
            usage: Default::default(),
            warnings: Vec::new(),
            logs: Default::default(),
            replayed: false,
        }
    }

    #[tokio::test]
    async fn r38_an_outcome_is_recorded_once_and_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        let lease = Duration::from_secs(60);
        assert!(matches!(
            store
                .claim(&context("c1"), "echo", &input(), lease)
                .await
                .unwrap(),
            Claim::Claimed
        ));
        assert!(matches!(
            store
                .claim(&context("c1"), "echo", &input(), lease)
                .await
                .unwrap(),
            Claim::Running { .. }
        ));
        store.record(&settlement("c1")).await.unwrap();
        let Claim::Replay(replayed) = store
            .claim(&context("c1"), "echo", &input(), lease)
            .await
            .unwrap()
        else {
            panic!("the recorded outcome is replayed");
        };
        assert_eq!(replayed.context, context("c1"));
        assert_eq!(replayed.outcome.status(), "defect");
        let listed = store.outcomes(&OutcomeFilter::default()).await.unwrap();
        assert_eq!(listed.len(), 1);
    }

    #[tokio::test]
    async fn r38_ids_reused_for_another_call_are_a_conflict_never_a_replay() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        let lease = Duration::from_secs(60);
        let mut svc = context("c1");
        svc.caller = Some(crate::model::context::Caller::named("iss#svc"));
        let mut recorded = settlement("c1");
        recorded.context = svc.clone();
        store.claim(&svc, "echo", &input(), lease).await.unwrap();
        store.record(&recorded).await.unwrap();
        let other_input = InputDigest::of(r#"{"text":"planted"}"#);
        let mut admin = svc.clone();
        admin.caller = Some(crate::model::context::Caller::named("iss#svc:admin"));
        let nobody = context("c1");
        for (who, tool, given, conflict) in [
            (&svc, "word_count", input(), IdConflict::Tool),
            (&svc, "echo", other_input, IdConflict::Input),
            (&admin, "echo", input(), IdConflict::Caller),
            (&nobody, "echo", input(), IdConflict::Caller),
        ] {
            let claim = store.claim(who, tool, &given, lease).await.unwrap();
            assert!(
                matches!(claim, Claim::Conflict(c) if c == conflict),
                "{tool} by {:?}: {claim:?}",
                who.caller
            );
        }
        let same = store.claim(&svc, "echo", &input(), lease).await.unwrap();
        assert!(matches!(same, Claim::Replay(_)), "the same call replays");
        // A running claim is not another caller's to wait on either.
        let running = context("c2");
        store
            .claim(&running, "echo", &input(), lease)
            .await
            .unwrap();
        let mut intruder = running.clone();
        intruder.caller = Some(crate::model::context::Caller::named("iss#other"));
        let claim = store
            .claim(&intruder, "echo", &input(), lease)
            .await
            .unwrap();
        assert!(
            matches!(claim, Claim::Conflict(IdConflict::Caller)),
            "{claim:?}"
        );
    }

    #[tokio::test]
    async fn r38_an_unclaimed_outcome_is_one_write_its_ids_then_replay() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        assert!(store.runs_unclaimed(), "a store just opened answers");
        let (commits, writes) = store.commits();
        store
            .record_unclaimed(&settlement("m1"), &input())
            .await
            .unwrap();
        let (commits_after, writes_after) = store.commits();
        assert_eq!(
            (commits_after - commits, writes_after - writes),
            (1, 1),
            "the outcome is the call's one write"
        );
        let again = store.record_unclaimed(&settlement("m1"), &input()).await;
        assert!(
            matches!(again, Err(StoreError::IdsTaken { .. })),
            "{again:?}"
        );
        let lease = Duration::from_secs(60);
        let Claim::Replay(replayed) = store
            .claim(&context("m1"), "echo", &input(), lease)
            .await
            .unwrap()
        else {
            panic!("the unclaimed outcome is replayed");
        };
        assert_eq!(replayed.tool, "echo");
        let listed = store.outcomes(&OutcomeFilter::default()).await.unwrap();
        assert_eq!(listed.len(), 1, "recorded once");
        assert!(
            store.runs_unclaimed(),
            "a refused outcome is no store failure"
        );
    }

    /// Events in the store now, read beside the writer.
    async fn events_kept(store: &SqlStore) -> i64 {
        sqlx::query("SELECT COUNT(*) FROM events")
            .fetch_one(&store.pool)
            .await
            .unwrap()
            .get::<i64, _>(0)
    }

    fn progress(call: &str) -> StoreEvent {
        StoreEvent {
            kind: "progress",
            context: context(call),
            body: serde_json::json!({"step": call}),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn r38_a_write_finding_the_connection_free_commits_in_place_after_what_was_queued() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        for i in 0..50 {
            let call = format!("p{i}");
            store.event(progress(&call));
            store
                .record_unclaimed(&settlement(&call), &input())
                .await
                .unwrap();
            // Whoever committed the outcome committed the event queued
            // before it first: durable with it, never after it.
            assert_eq!(events_kept(&store).await, i + 1, "after call {i}");
        }
        let listed = store.outcomes(&OutcomeFilter::default()).await.unwrap();
        assert_eq!(listed.len(), 50);
        assert!(
            store.commits_in_place() > 0,
            "on a multi-threaded runtime a caller that finds the connection free writes itself"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn r38_a_write_committed_in_place_takes_the_queued_writes_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        store.writes.queue_unwoken(Write::Event(progress("r1")));
        store
            .record_unclaimed(&settlement("r1"), &input())
            .await
            .unwrap();
        assert_eq!(
            store.commits(),
            (1, 2),
            "the event and the outcome, in one commit"
        );
        assert_eq!(store.commits_in_place(), 1);
        assert_eq!(events_kept(&store).await, 1);
    }

    #[tokio::test]
    async fn r38_on_a_current_thread_runtime_every_write_goes_to_the_writers_thread() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        for i in 0..5 {
            let call = format!("q{i}");
            store.event(progress(&call));
            store
                .record_unclaimed(&settlement(&call), &input())
                .await
                .unwrap();
        }
        assert_eq!(events_kept(&store).await, 5);
        assert_eq!(
            store
                .outcomes(&OutcomeFilter::default())
                .await
                .unwrap()
                .len(),
            5
        );
        assert_eq!(
            store.commits_in_place(),
            0,
            "this runtime's one thread must not block for a commit"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn r38_writes_racing_for_the_connection_are_each_committed_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqlStore::embedded(dir.path()).await.unwrap());
        let writers = (0..8).map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..25 {
                    let call = format!("w{w}-{i}");
                    store.event(progress(&call));
                    store
                        .record_unclaimed(&settlement(&call), &input())
                        .await
                        .unwrap();
                }
            })
        });
        for writer in futures_util::future::join_all(writers).await {
            writer.unwrap();
        }
        let filter = OutcomeFilter {
            limit: Some(1000),
            ..OutcomeFilter::default()
        };
        assert_eq!(store.outcomes(&filter).await.unwrap().len(), 200);
        assert_eq!(events_kept(&store).await, 200);
        let (commits, writes) = store.commits();
        assert_eq!(writes, 400, "every event and outcome written once");
        assert!(commits <= writes);
    }

    #[tokio::test]
    async fn r38_a_store_without_a_one_write_path_claims_then_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        let (commits, writes) = store.commits();
        crate::store::claim_then_record(&store, &settlement("d1"), &input())
            .await
            .unwrap();
        let (commits_after, writes_after) = store.commits();
        assert_eq!(
            (commits_after - commits, writes_after - writes),
            (2, 2),
            "a claim, then the outcome"
        );
        let again = crate::store::claim_then_record(&store, &settlement("d1"), &input()).await;
        assert!(
            matches!(again, Err(StoreError::IdsTaken { .. })),
            "{again:?}"
        );
        let listed = store.outcomes(&OutcomeFilter::default()).await.unwrap();
        assert_eq!(listed.len(), 1, "recorded once");
    }

    #[tokio::test]
    async fn r38_only_outcomes_are_indexed_for_listing() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        let lease = Duration::from_secs(60);
        for call in ["c1", "c2", "c3"] {
            store
                .claim(&context(call), "echo", &input(), lease)
                .await
                .unwrap();
        }
        store.record(&settlement("c2")).await.unwrap();
        let indexes = sqlx::query("PRAGMA index_list('calls')")
            .fetch_all(&store.pool)
            .await
            .unwrap();
        let partial: Vec<(String, i64)> = indexes
            .iter()
            .map(|row| (row.get(1), row.get(4)))
            .filter(|(name, _): &(String, i64)| name.starts_with("calls_by_"))
            .collect();
        assert_eq!(
            partial,
            [("calls_by_end".to_owned(), 1)],
            "one listing index, of outcomes only"
        );
        // Whatever the filters, SQLite walks that index: one by tool or by
        // caller would never be read, only written.
        for (tool, caller) in [(None, None), (Some("echo"), None), (None, Some("i#s"))] {
            let explain = format!("EXPLAIN QUERY PLAN {LIST_OUTCOMES}");
            let plan = sqlx::query(sqlx::AssertSqlSafe(explain))
                .bind(None::<&str>)
                .bind(None::<&str>)
                .bind(None::<&str>)
                .bind(tool)
                .bind(None::<i64>)
                .bind(100_i64)
                .bind(caller)
                .fetch_all(&store.pool)
                .await
                .unwrap();
            let steps: Vec<String> = plan.iter().map(|row| row.get(3)).collect();
            assert!(
                steps.iter().any(|s| s.contains("calls_by_end")),
                "listings walk the outcomes' index: {steps:?}"
            );
        }
        let listed = store.outcomes(&OutcomeFilter::default()).await.unwrap();
        assert_eq!(listed.len(), 1);
    }

    #[tokio::test]
    async fn r38_retained_outputs_are_chunked_and_the_quota_evicts_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        let big = vec![b'x'; 3 * crate::store::OUTPUT_CHUNK_BYTES + 7];
        let week = Duration::from_secs(7 * 86_400);
        store
            .retain("a", "ses", &big, 10 << 20, week)
            .await
            .unwrap();
        let read = store.output("a").await.unwrap().expect("kept");
        assert_eq!((read.session.as_str(), read.text.len()), ("ses", big.len()));
        store
            .retain("b", "ses", &big, 2 * big.len() as u64 - 1, week)
            .await
            .unwrap();
        assert!(
            store.output("a").await.unwrap().is_none(),
            "evicted for the quota"
        );
        assert!(store.output("b").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn r29_answers_are_saved_per_scope() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqlStore::embedded(dir.path()).await.unwrap();
        let answers = vec![("edit".to_owned(), "/tmp/*".to_owned())];
        store.save_answers("s1\u{0}p", &answers).await.unwrap();
        store.save_answers("s1\u{0}p", &answers).await.unwrap();
        assert_eq!(store.answers("s1\u{0}p").await.unwrap(), answers);
        assert!(store.answers("s2\u{0}p").await.unwrap().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn r38_an_in_memory_store_records_once_replays_and_retains_in_a_database_of_its_own() {
        let store = SqlStore::in_memory().await.unwrap();
        let (ids, input, lease) = (context("m1"), input(), Duration::from_secs(60));
        let claimed = store.claim(&ids, "echo", &input, lease).await.unwrap();
        assert!(matches!(claimed, Claim::Claimed));
        store.record(&settlement("m1")).await.unwrap();
        let replayed = store.claim(&ids, "echo", &input, lease).await.unwrap();
        assert!(matches!(replayed, Claim::Replay(_)));
        // An event would be committed before the retained output after it.
        store.event(progress("m1"));
        // Written by the writer's connection, read through the pool's.
        let big = vec![b'x'; 2 * crate::store::OUTPUT_CHUNK_BYTES + 1];
        let week = Duration::from_secs(7 * 86_400);
        store
            .retain("a", "ses", &big, 10 << 20, week)
            .await
            .unwrap();
        let read = store.output("a").await.unwrap().expect("kept");
        assert_eq!(read.text.len(), big.len());
        assert_eq!(events_kept(&store).await, 0, "no events in memory");
        // Another in-memory store is another database.
        let other = SqlStore::in_memory().await.unwrap();
        assert!(other.output("a").await.unwrap().is_none());
        let fresh = other.claim(&ids, "echo", &input, lease).await.unwrap();
        assert!(matches!(fresh, Claim::Claimed));
    }

    #[tokio::test]
    async fn an_in_memory_store_is_refused_saying_to_name_a_file() {
        let refused = SqlStore::open("sqlite::memory:").await.unwrap_err();
        assert!(
            matches!(refused, StoreError::Unreachable { .. }),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("sqlite:PATH"), "{refused}");
    }

    #[tokio::test]
    async fn a_store_error_keeps_its_cause() {
        use std::error::Error as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        // A file where the embedded store's directory must be.
        let refused = SqlStore::embedded(&file).await.unwrap_err();
        let cause = refused.source().expect("a cause");
        assert!(
            cause.downcast_ref::<std::io::Error>().is_some(),
            "{cause:?}"
        );
        assert!(
            refused.to_string().ends_with(&cause.to_string()),
            "{refused}"
        );
        // A database file under a file: SQLite cannot open it.
        let url = format!("sqlite:{}/x.db", file.display());
        let refused = SqlStore::open(&url).await.unwrap_err();
        assert!(
            matches!(refused, StoreError::Unreachable { .. }),
            "{refused:?}"
        );
        let cause = refused.source().expect("a cause");
        assert!(cause.downcast_ref::<sqlx::Error>().is_some(), "{cause:?}");
        // A clone shares the cause.
        assert!(refused.clone().source().is_some());
    }

    #[test]
    fn only_known_schemes_are_stores() {
        assert!(matches!(
            backend_of("mysql://x"),
            Err(StoreError::BadUrl(_))
        ));
        assert_eq!(backend_of("sqlite:/x.db").unwrap(), Backend::Sqlite);
        #[cfg(feature = "postgres")]
        assert_eq!(backend_of("postgresql://h/db").unwrap(), Backend::Postgres);
    }
}
