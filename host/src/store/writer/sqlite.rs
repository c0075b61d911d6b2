//! The writer on SQLite: a thread of its own holding the one connection
//! that writes, so a write is one hop to it and one back, its statements
//! stay prepared, and switching `synchronous` costs no round trip.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use futures_util::FutureExt as _;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, ToSql, params_from_iter};
use tokio::sync::mpsc;

use super::{Arg, Cells, Committed, Conn, Counters, Write, apply_all, batch, pending};

/// How long a write waits for a lock another process holds (a CLI reading
/// or pruning the same file) before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Statements the writer keeps prepared: every one it runs.
const PREPARED_STATEMENTS: usize = 32;

/// Opens the writer's connection to the store file at `path` and starts
/// its thread, which applies batches until every sender is gone.
pub(crate) fn spawn(
    path: &Path,
    mut queue: mpsc::Receiver<Write>,
    counters: Arc<Counters>,
) -> Result<(), String> {
    let mut db = Writer::open(path).map_err(|e| e.to_string())?;
    std::thread::Builder::new()
        .name("toolhost-store-writer".into())
        .spawn(move || {
            while let Some(first) = queue.blocking_recv() {
                let writes = batch(first, &mut queue);
                let count = writes.len();
                let committed = db.commit(writes, &counters.events);
                counters.settle(count, committed);
            }
        })
        .map(drop)
        .map_err(|e| format!("cannot start its writer: {e}"))
}

/// The connection, and the `synchronous` mode last set on it, so a batch
/// sets it only when it changes (unknown after a failure).
struct Writer {
    db: Connection,
    synced: Option<bool>,
}

impl Writer {
    fn open(path: &Path) -> rusqlite::Result<Writer> {
        let db = Connection::open(path)?;
        db.busy_timeout(BUSY_TIMEOUT)?;
        db.set_prepared_statement_cache_capacity(PREPARED_STATEMENTS);
        // WAL lets the pool's readers run beside the writer.
        db.pragma_update(None, "journal_mode", "WAL")?;
        Ok(Writer { db, synced: None })
    }

    /// One transaction for the batch. It waits for the disk only when it
    /// records an outcome: a claim, event or retained output lost to a
    /// crash is harmless (nothing that refers to it was recorded), and the
    /// synced commit of an outcome makes every earlier commit durable too.
    /// A write of one statement alone commits as it runs.
    fn commit(&mut self, writes: Vec<Write>, events: &AtomicU64) -> Committed {
        let durable = writes.iter().any(Write::is_durable);
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
