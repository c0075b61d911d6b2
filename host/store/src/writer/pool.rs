//! The writer on a pooled sqlx connection (Postgres): a task that takes a
//! connection for each batch, so a connection the server closed is
//! replaced by the pool's ping rather than kept.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::{Any, AnyConnection, AnyPool, Row as _};
use tokio::sync::mpsc;

use super::{Arg, Cells, Committed, Conn, Counters, Write, apply_all, batch, pending};

/// Applies batches until every sender is gone.
pub(crate) async fn run(pool: AnyPool, mut queue: mpsc::Receiver<Write>, counters: Arc<Counters>) {
    while let Some(first) = queue.recv().await {
        let writes = batch(first, &mut queue);
        let count = writes.len();
        let committed = commit(&pool, writes, &counters.events).await;
        counters.settle(count, committed);
    }
}

/// One transaction for the whole batch, which waits for the disk only when
/// it records an outcome (a claim, event or retained output lost to a
/// crash is harmless: nothing that refers to it was recorded). A durable
/// write alone needs no transaction around it.
async fn commit(pool: &AnyPool, writes: Vec<Write>, events: &AtomicU64) -> Committed {
    let durable = writes.iter().any(Write::is_durable);
    let mut db = match pool.acquire().await {
        Ok(db) => db,
        Err(e) => return Err((writes.into_iter().map(pending).collect(), e.to_string())),
    };
    if let [write] = writes.as_slice()
        && write.is_one_statement()
        && durable
    {
        return apply_all(&mut *db, writes, events).await;
    }
    let begun = async {
        let mut tx = sqlx::Acquire::begin(&mut *db).await?;
        if !durable {
            sqlx::Executor::execute(&mut *tx, "SET LOCAL synchronous_commit = off").await?;
        }
        Ok::<_, sqlx::Error>(tx)
    };
    let mut tx = match begun.await {
        Ok(tx) => tx,
        Err(e) => return Err((writes.into_iter().map(pending).collect(), e.to_string())),
    };
    match apply_all(&mut *tx, writes, events).await {
        Ok(done) => match tx.commit().await {
            Ok(()) => Ok(done),
            Err(e) => Err((done, e.to_string())),
        },
        Err(failed) => {
            let _ = tx.rollback().await;
            Err(failed)
        }
    }
}

fn bound<'q>(sql: &'static str, args: &[Arg<'q>]) -> Query<'q, Any, AnyArguments> {
    args.iter().fold(sqlx::query(sql), |query, arg| match *arg {
        Arg::Text(text) => query.bind(text),
        Arg::OptText(text) => query.bind(text),
        Arg::Int(int) => query.bind(int),
        Arg::Blob(blob) => query.bind(blob),
    })
}

impl Conn for AnyConnection {
    type Row = AnyRow;

    async fn execute(&mut self, sql: &'static str, args: &[Arg<'_>]) -> Result<u64, String> {
        let done = bound(sql, args).execute(self).await;
        done.map(|d| d.rows_affected()).map_err(|e| e.to_string())
    }

    async fn fetch_all(
        &mut self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> Result<Vec<AnyRow>, String> {
        bound(sql, args)
            .fetch_all(self)
            .await
            .map_err(|e| e.to_string())
    }
}

impl Cells for AnyRow {
    fn text(&self, column: usize) -> Result<Option<String>, String> {
        self.try_get(column).map_err(|e| e.to_string())
    }

    fn int(&self, column: usize) -> Result<i64, String> {
        self.try_get(column).map_err(|e| e.to_string())
    }
}
