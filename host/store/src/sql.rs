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

use crate::migrations::{Backend, migrator};
use crate::model::context::CallContext;
use crate::model::outcome::{Settlement, Status};
use crate::writer::{self, Counters, StoredOutcome, Unclaimed, Write, Writes};
use crate::{
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
    /// audit events, which nothing could read back. What a `toolhost::Host` uses
    /// when it is given neither a store nor a state directory.
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
        let pool = open_pool(url, backend, &name).await?;
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
/// The pool of the store at `url` (`name` in errors), its schema brought
/// up to date.
async fn open_pool(url: &str, backend: Backend, name: &str) -> Result<AnyPool, StoreError> {
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
            store: name.to_owned(),
            reason: e.to_string(),
            source: Some(Arc::new(e)),
        })?;
    migrator(backend)
        .run(&pool)
        .await
        .map_err(|e| StoreError::Failed {
            store: name.to_owned(),
            reason: format!("cannot bring its schema up to date: {e}"),
            source: Some(Arc::new(e)),
        })?;
    Ok(pool)
}

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
mod tests;
