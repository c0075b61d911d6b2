//! The writer on SQLite: one connection, its statements kept prepared and
//! its `synchronous` mode switched in place. Whoever holds it writes: a
//! caller that finds it free commits what was queued before its write and
//! then its own, on its own thread, so a lone write costs no hop to
//! another thread and back; a caller that finds it busy queues its write
//! for the writer's thread, whose next batch (or the next free caller's)
//! commits it with whatever else queued meanwhile (group commit).

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, ToSql, params_from_iter};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::mpsc;

use super::{Arg, Cells, Committed, Conn, Counters, Write, apply_all, batch, pending, take_queued};
use crate::{Durability, MAX_BATCH};

/// How long a write waits for a lock another process holds (a CLI reading
/// or pruning the same file) before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Statements the writer keeps prepared: every one it runs.
const PREPARED_STATEMENTS: usize = 32;

/// How long a caller's commit may hold up its runtime worker as is (tokio's
/// rule of thumb for work between awaits). Once commits take longer on
/// average (synced commits on a slow disk), a caller first hands the
/// worker's other tasks to another thread (`block_in_place`), which costs
/// two thread wake-ups and ~30 µs of CPU a commit, too much for the tens
/// of microseconds a commit takes on a fast disk.
const MAX_BLOCKING_COMMIT: Duration = Duration::from_micros(100);

/// The connection and the queue of writes waiting for it, held together:
/// whoever holds the connection commits what is queued first, so writes
/// commit in the order they were given.
struct Owned {
    writer: Writer,
    queue: mpsc::Receiver<Write>,
    /// A moving average of how long a commit takes, in nanoseconds.
    commit_nanos: u64,
}

impl Owned {
    /// Commits everything queued, a batch at a time.
    fn drain(&mut self, counters: &Counters) {
        while let Ok(first) = self.queue.try_recv() {
            let writes = batch(first, &mut self.queue);
            self.commit(writes, counters);
        }
    }

    fn commit(&mut self, writes: Vec<Write>, counters: &Counters) {
        let count = writes.len();
        let started = Instant::now();
        let committed = self.writer.commit(writes, &counters.events);
        let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.commit_nanos = averaged(self.commit_nanos, took);
        counters.settle(count, committed);
    }

    /// Whether commits take so long that a runtime worker must not wait
    /// for one with its other tasks stuck behind it.
    fn commits_are_slow(&self) -> bool {
        self.commit_nanos > MAX_BLOCKING_COMMIT.as_nanos() as u64
    }
}

/// A moving average over the last eight commits or so: one slow
/// checkpoint does not make a slow disk, nor one fast commit a fast one.
fn averaged(average: u64, took: u64) -> u64 {
    average.saturating_mul(7).saturating_add(took) / 8
}

fn lock(owned: &Mutex<Owned>) -> MutexGuard<'_, Owned> {
    // A panic mid-batch dropped that batch's waiters (they hear the writer
    // stopped); the connection rolls back at its next BEGIN.
    owned.lock().unwrap_or_else(|e| e.into_inner())
}

/// A handle on the SQLite writer: its connection, and the thread that
/// commits queued writes; the thread ends with the last handle.
pub(crate) struct SqliteWriter {
    owned: Arc<Mutex<Owned>>,
    counters: Arc<Counters>,
    /// Wakes the thread after a write was queued; one pending wake is
    /// enough, since the thread drains the whole queue each time.
    wake: SyncSender<()>,
}

/// Opens the writer's connection to the store file at `path` and starts
/// its thread, which commits queued writes until the handle is dropped.
pub(crate) fn spawn(
    path: &Path,
    durability: Durability,
    queue: mpsc::Receiver<Write>,
    counters: Arc<Counters>,
) -> Result<SqliteWriter, String> {
    let writer = Writer::open(path, durability).map_err(|e| e.to_string())?;
    let owned = Arc::new(Mutex::new(Owned {
        writer,
        queue,
        commit_nanos: 0,
    }));
    let (wake, woken) = std::sync::mpsc::sync_channel(1);
    let thread = Drained {
        owned: owned.clone(),
        counters: counters.clone(),
    };
    std::thread::Builder::new()
        .name("toolhost-store-writer".into())
        .spawn(move || thread.run(&woken))
        .map_err(|e| format!("cannot start its writer: {e}"))?;
    Ok(SqliteWriter {
        owned,
        counters,
        wake,
    })
}

impl SqliteWriter {
    /// Commits `write`, after whatever was queued before it, on this
    /// thread, if the connection is free and this thread may block (a
    /// worker of a multi-threaded tokio runtime); else returns it, to be
    /// queued. When commits are slow, the worker's other tasks move to
    /// another thread first ([`MAX_BLOCKING_COMMIT`]).
    pub(crate) fn write_here(&self, write: Write) -> Option<Write> {
        if !may_block() {
            return Some(write);
        }
        let mut owned = match self.owned.try_lock() {
            Ok(owned) => owned,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Some(write),
        };
        let mut writes = Vec::new();
        take_queued(&mut writes, &mut owned.queue, MAX_BATCH - 1);
        writes.push(write);
        if owned.commits_are_slow() {
            tokio::task::block_in_place(|| owned.commit(writes, &self.counters));
        } else {
            owned.commit(writes, &self.counters);
        }
        self.counters.here.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Tells the thread a write was queued.
    pub(crate) fn wake(&self) {
        match self.wake.try_send(()) {
            // Already woken: it drains the queue after this write arrived.
            Ok(()) | Err(TrySendError::Full(())) => {}
            Err(TrySendError::Disconnected(())) => {
                tracing::error!("the store's writer thread has stopped");
            }
        }
    }
}

/// Whether this thread may block for a commit: on a worker of a
/// multi-threaded tokio runtime (or its `block_on`), where
/// `block_in_place` hands the worker's other tasks to another thread.
fn may_block() -> bool {
    Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// The writer thread's side; when it ends, however it ends, the queue
/// closes, so a write given later hears the writer stopped.
struct Drained {
    owned: Arc<Mutex<Owned>>,
    counters: Arc<Counters>,
}

impl Drained {
    fn run(&self, woken: &Receiver<()>) {
        while woken.recv().is_ok() {
            lock(&self.owned).drain(&self.counters);
        }
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        let mut owned = lock(&self.owned);
        // Every handle is gone: what is left is events nobody waits for.
        // After a panic, they are dropped rather than risk a second one.
        if !std::thread::panicking() {
            owned.drain(&self.counters);
        }
        owned.queue.close();
    }
}

/// The connection, how durable its commits are, and the `synchronous` mode
/// last set on it, so a batch sets it only when it changes (unknown after
/// a failure).
struct Writer {
    db: Connection,
    durability: Durability,
    synced: Option<bool>,
}

/// Pages the write-ahead log grows by before SQLite checkpoints it into
/// the database (SQLite's own default, set so it is stated): at
/// [`Durability::Normal`] a checkpoint is also when the disk is synced.
const WAL_CHECKPOINT_PAGES: u32 = 1000;

impl Writer {
    fn open(path: &Path, durability: Durability) -> rusqlite::Result<Writer> {
        let db = Connection::open(path)?;
        db.busy_timeout(BUSY_TIMEOUT)?;
        db.set_prepared_statement_cache_capacity(PREPARED_STATEMENTS);
        // WAL lets the pool's readers run beside the writer.
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)?;
        Ok(Writer {
            db,
            durability,
            synced: None,
        })
    }

    /// One transaction for the batch. At [`Durability::Full`] it waits for
    /// the disk when it records an outcome: a claim, event or retained
    /// output lost to a crash is harmless (nothing that refers to it was
    /// recorded), and the synced commit of an outcome makes every earlier
    /// commit durable too. At [`Durability::Normal`] no commit waits for
    /// the disk. A write of one statement alone commits as it runs.
    fn commit(&mut self, writes: Vec<Write>, events: &AtomicU64) -> Committed {
        let durable = self.durability == Durability::Full && writes.iter().any(Write::is_durable);
        if let Err(e) = self.synchronous(durable) {
            return Err((writes.into_iter().map(pending).collect(), e.to_string()));
        }
        if let [write] = writes.as_slice()
            && write.is_one_statement()
        {
            return now(apply_all(&mut self.db, writes, events));
        }
        if let Err(e) = self.db.execute_batch("BEGIN IMMEDIATE") {
            return Err((writes.into_iter().map(pending).collect(), e.to_string()));
        }
        match now(apply_all(&mut self.db, writes, events)) {
            Ok(done) => match self.db.execute_batch("COMMIT") {
                Ok(()) => Ok(done),
                Err(e) => {
                    self.roll_back();
                    Err((done, e.to_string()))
                }
            },
            Err(failed) => {
                self.roll_back();
                Err(failed)
            }
        }
    }

    /// Syncs commits to disk (`durable`) or lets them wait for the next
    /// synced one.
    fn synchronous(&mut self, durable: bool) -> rusqlite::Result<()> {
        if self.synced == Some(durable) {
            return Ok(());
        }
        self.synced = None;
        let mode = if durable { "FULL" } else { "NORMAL" };
        self.db.pragma_update(None, "synchronous", mode)?;
        self.synced = Some(durable);
        Ok(())
    }

    /// Ends a failed transaction, if SQLite has not already.
    fn roll_back(&mut self) {
        if !self.db.is_autocommit() {
            // A rollback that fails leaves nothing to do but try again
            // at the next BEGIN, which then fails the batch it starts.
            let _ = self.db.execute_batch("ROLLBACK");
        }
    }
}

/// Runs a batch's writes: on this connection every step completes at once
/// (SQLite blocks this thread, not a runtime's).
fn now(writes: impl Future<Output = Committed>) -> Committed {
    writes
        .now_or_never()
        .unwrap_or_else(|| Err((Vec::new(), "a SQLite write waited on a future".into())))
}

impl ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Arg::Text(text) | Arg::OptText(Some(text)) => ValueRef::Text(text.as_bytes()),
            Arg::OptText(None) => ValueRef::Null,
            Arg::Int(int) => ValueRef::Integer(int),
            Arg::Blob(blob) => ValueRef::Blob(blob),
        }))
    }
}

impl Conn for Connection {
    type Row = Vec<Value>;

    fn execute(
        &mut self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<u64, String>> + Send {
        let changed = self
            .prepare_cached(sql)
            .and_then(|mut statement| statement.execute(params_from_iter(args)));
        std::future::ready(changed.map(|n| n as u64).map_err(|e| e.to_string()))
    }

    fn fetch_all(
        &mut self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Vec<Vec<Value>>, String>> + Send {
        std::future::ready(rows(self, sql, args).map_err(|e| e.to_string()))
    }
}

fn rows(db: &Connection, sql: &'static str, args: &[Arg<'_>]) -> rusqlite::Result<Vec<Vec<Value>>> {
    let mut statement = db.prepare_cached(sql)?;
    let columns = statement.column_count();
    let rows = statement.query_map(params_from_iter(args), |row| {
        (0..columns).map(|i| row.get::<_, Value>(i)).collect()
    })?;
    rows.collect()
}

impl Cells for Vec<Value> {
    fn text(&self, column: usize) -> Result<Option<String>, String> {
        match self.get(column) {
            Some(Value::Text(text)) => Ok(Some(text.clone())),
            Some(Value::Null) => Ok(None),
            other => Err(format!("column {column} is not text: {other:?}")),
        }
    }

    fn int(&self, column: usize) -> Result<i64, String> {
        match self.get(column) {
            Some(Value::Integer(int)) => Ok(*int),
            other => Err(format!("column {column} is not an integer: {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreEvent;
    use crate::model::context::CallContext;
    use crate::model::outcome::Status;

    fn event() -> Write {
        Write::Event(StoreEvent {
            kind: "progress",
            context: CallContext::new("s", "a", "m", "c"),
            body: serde_json::json!({"step": 1}),
        })
    }

    /// A writer on a store file whose schema is in place.
    async fn writer(dir: &Path) -> (SqliteWriter, mpsc::Sender<Write>) {
        drop(crate::SqlStore::embedded(dir).await.unwrap());
        let (sender, queue) = mpsc::channel(8);
        let file = dir.join(crate::sql::EMBEDDED_FILE);
        let writer = spawn(&file, Durability::Full, queue, Arc::default()).unwrap();
        (writer, sender)
    }

    /// An outcome of a call that ran unclaimed: a write that must be durable.
    fn outcome(call: &str) -> (Write, tokio::sync::oneshot::Receiver<Result<bool, String>>) {
        let (done, recorded) = tokio::sync::oneshot::channel();
        let context = crate::model::context::CallContext::new("", "", "", call);
        let write = Write::Record {
            outcome: super::super::StoredOutcome {
                context,
                owner: "test".into(),
                status: Status::Completed,
                settlement: "{}".into(),
            },
            unclaimed: Some(super::super::Unclaimed {
                tool: "echo".into(),
                input: crate::InputDigest::of("{}"),
                started_at: 0,
            }),
            done,
        };
        (write, recorded)
    }

    #[tokio::test]
    async fn r38_a_normal_store_never_waits_for_the_disk_and_a_full_one_syncs_each_outcome() {
        for (durability, synchronous) in [(Durability::Normal, 1), (Durability::Full, 2)] {
            let dir = tempfile::tempdir().unwrap();
            drop(crate::SqlStore::embedded(dir.path()).await.unwrap());
            let file = dir.path().join(crate::sql::EMBEDDED_FILE);
            let mut writer = Writer::open(&file, durability).unwrap();
            let (write, recorded) = outcome("c1");
            let Ok(committed) = writer.commit(vec![write], &AtomicU64::new(0)) else {
                panic!("{durability}: the commit failed");
            };
            committed.into_iter().for_each(super::super::answer);
            assert_eq!(recorded.await.unwrap(), Ok(true), "{durability}");
            let mode: i64 = writer
                .db
                .pragma_query_value(None, "synchronous", |row| row.get(0))
                .unwrap();
            assert_eq!(mode, synchronous, "{durability}: the outcome's commit");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slow_commits_hand_the_workers_tasks_away_and_still_commit_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, _sender) = writer(dir.path()).await;
        lock(&writer.owned).commit_nanos = 10 * MAX_BLOCKING_COMMIT.as_nanos() as u64;
        assert!(lock(&writer.owned).commits_are_slow());
        assert!(writer.write_here(event()).is_none());
        assert_eq!(writer.counters.here.load(Ordering::Relaxed), 1);
        assert_eq!(writer.counters.writes.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_commit_time_follows_what_commits_take_now() {
        let slow = 10 * MAX_BLOCKING_COMMIT.as_nanos() as u64;
        let fast = MAX_BLOCKING_COMMIT.as_nanos() as u64 / 10;
        assert!(
            averaged(fast, slow) < slow / 2,
            "one slow commit is not a slow disk"
        );
        let settled = (0..40).fold(slow, |average, _| averaged(average, fast));
        assert!(settled < 2 * fast, "{settled}");
        assert_eq!(averaged(u64::MAX, u64::MAX), u64::MAX / 8, "no overflow");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_busy_connection_gives_the_write_back_and_the_thread_commits_it_once_woken() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, sender) = writer(dir.path()).await;
        let (done, committed) = tokio::sync::oneshot::channel();
        let answers = Write::Answers {
            scope: "s".into(),
            answers: vec![("read".into(), "*".into())],
            done,
        };
        let held = lock(&writer.owned);
        let Some(write) = writer.write_here(answers) else {
            panic!("the connection is busy: the write comes back to be queued");
        };
        sender.try_send(write).map_err(drop).unwrap();
        writer.wake();
        drop(held);
        let committed = tokio::time::timeout(Duration::from_secs(10), committed).await;
        assert!(matches!(committed, Ok(Ok(Ok(())))), "{committed:?}");
        assert_eq!(writer.counters.here.load(Ordering::Relaxed), 0);
        assert_eq!(writer.counters.writes.load(Ordering::Relaxed), 1);
    }
}
