//! The store's one writer: it takes every write queued, applies them in one
//! transaction and commits once (group commit), then answers each. A
//! failed commit fails every write of the batch; nothing is half-written.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection};
use sqlx::{AnyPool, Executor as _, Row as _};
use tokio::sync::{mpsc, oneshot};

use crate::model::context::{CallContext, Caller};
use crate::store::migrations::Backend;
use crate::store::{
    Claim, MAX_BATCH, MAX_STORED_EVENTS, OUTPUT_CHUNK_BYTES, StoreEvent, now_millis,
};

/// One write, and who waits for it.
pub(super) enum Write {
    Claim {
        context: CallContext,
        tool: String,
        owner: Arc<str>,
        lease_until: i64,
        done: oneshot::Sender<Result<Claim, String>>,
    },
    Record {
        context: CallContext,
        owner: Arc<str>,
        status: &'static str,
        settlement: String,
        done: oneshot::Sender<Result<bool, String>>,
    },
    Event(StoreEvent),
    Retain {
        id: String,
        session: String,
        text: Vec<u8>,
        quota: u64,
        expired_before: i64,
        done: oneshot::Sender<Result<(), String>>,
    },
    Answers {
        scope: String,
        answers: Vec<(String, String)>,
        done: oneshot::Sender<Result<(), String>>,
    },
}

/// What one write gives back once its batch committed.
enum Done {
    Claim(oneshot::Sender<Result<Claim, String>>, Claim),
    Record(oneshot::Sender<Result<bool, String>>, bool),
    Plain(oneshot::Sender<Result<(), String>>),
    Nothing,
}

/// What the writer has done, for the store's statistics.
#[derive(Debug, Default)]
pub(super) struct Counters {
    /// Transactions committed.
    pub(super) commits: AtomicU64,
    /// Writes in them.
    pub(super) writes: AtomicU64,
    /// Events kept, for pruning now and then.
    events: AtomicU64,
}

/// The writer's own SQLite connection, kept between batches (acquiring one
/// from the pool costs a round trip to SQLite's worker thread for its
/// ping), and the `synchronous` mode last set on it, so a batch sets it
/// only when it changes. Dropped after any failure: the next batch starts
/// afresh. A Postgres connection is not kept: the server may close it, and
/// the pool's ping on acquiring replaces one it closed.
struct Held {
    db: PoolConnection<Any>,
    synced: Option<bool>,
}

impl Held {
    /// The held connection, acquired when there is none.
    async fn get<'a>(held: &'a mut Option<Held>, pool: &AnyPool) -> sqlx::Result<&'a mut Held> {
        if held.is_none() {
            let db = pool.acquire().await?;
            *held = Some(Held { db, synced: None });
        }
        Ok(held.as_mut().expect("acquired above"))
    }

    /// On SQLite, syncs commits to disk (`durable`) or lets them wait for
    /// the next synced one.
    async fn synchronous(&mut self, backend: Backend, durable: bool) -> sqlx::Result<()> {
        if backend != Backend::Sqlite || self.synced == Some(durable) {
            return Ok(());
        }
        let pragma = if durable {
            "PRAGMA synchronous = FULL"
        } else {
            "PRAGMA synchronous = NORMAL"
        };
        self.db.execute(pragma).await?;
        self.synced = Some(durable);
        Ok(())
    }
}

/// Applies batches until every sender is gone.
pub(super) async fn run(
    pool: AnyPool,
    backend: Backend,
    mut queue: mpsc::Receiver<Write>,
    counters: Arc<Counters>,
) {
    let mut held = None;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        let writes = std::mem::take(&mut batch);
        let count = writes.len() as u64;
        match commit(&pool, &mut held, backend, writes, &counters.events).await {
            Ok(done) => {
                counters.commits.fetch_add(1, Ordering::Relaxed);
                counters.writes.fetch_add(count, Ordering::Relaxed);
                done.into_iter().for_each(answer);
            }
            Err((waiting, e)) => {
                held = None;
                waiting.into_iter().for_each(|w| fail(w, &e));
            }
        }
        if backend != Backend::Sqlite {
            held = None;
        }
    }
}

/// One transaction for the whole batch. It waits for the disk only when
/// it records an outcome: a claim, event or retained output lost to a
/// crash is harmless (nothing that refers to it was recorded), and the
/// synced commit of an outcome makes every earlier commit durable too.
async fn commit(
    pool: &AnyPool,
    held: &mut Option<Held>,
    backend: Backend,
    writes: Vec<Write>,
    events: &AtomicU64,
) -> Result<Vec<Done>, (Vec<Done>, String)> {
    let durable = writes.iter().any(|w| matches!(w, Write::Record { .. }));
    let held = match Held::get(held, pool).await {
        Ok(held) => held,
        Err(e) => return Err((writes.into_iter().map(pending).collect(), e.to_string())),
    };
    if let Err(e) = held.synchronous(backend, durable).await {
        return Err((writes.into_iter().map(pending).collect(), e.to_string()));
    }
    let db = &mut held.db;
    if let [write] = writes.as_slice()
        && is_one_statement(write)
        && (backend == Backend::Sqlite || durable)
    {
        return commit_alone(db, writes, events).await;
    }
    let begun = async {
        let mut tx = sqlx::Acquire::begin(&mut **db).await?;
        if backend == Backend::Postgres && !durable {
            tx.execute("SET LOCAL synchronous_commit = off").await?;
        }
        Ok::<_, sqlx::Error>(tx)
    };
    let mut tx = match begun.await {
        Ok(tx) => tx,
        Err(e) => return Err((writes.into_iter().map(pending).collect(), e.to_string())),
    };
    let mut done = Vec::with_capacity(writes.len());
    let mut failed = None;
    for write in writes {
        if failed.is_some() {
            done.push(pending(write));
            continue;
        }
        match apply(&mut tx, write, events).await {
            Ok(d) => done.push(d),
            Err((d, e)) => {
                done.push(d);
                failed = Some(e);
            }
        }
    }
    if let Some(e) = failed {
        let _ = tx.rollback().await;
        return Err((done, e));
    }
    match tx.commit().await {
        Ok(()) => Ok(done),
        Err(e) => Err((done, e.to_string())),
    }
}

/// Whether a write is one statement (or, for a claim taken over, a guarded
/// update that needs no transaction around it), so alone in its batch it
/// can run without BEGIN and COMMIT: half the round trips of a quiet call.
fn is_one_statement(write: &Write) -> bool {
    matches!(
        write,
        Write::Claim { .. } | Write::Record { .. } | Write::Event(_)
    )
}

/// One such write on its own, committed as it runs (autocommit); on
/// SQLite synced to disk only when it records an outcome.
async fn commit_alone(
    db: &mut AnyConnection,
    mut writes: Vec<Write>,
    events: &AtomicU64,
) -> Result<Vec<Done>, (Vec<Done>, String)> {
    let Some(write) = writes.pop() else {
        return Ok(Vec::new());
    };
    match apply(db, write, events).await {
        Ok(done) => Ok(vec![done]),
        Err((done, e)) => Err((vec![done], e)),
    }
}

/// A write that never ran: its waiter, to be told why.
fn pending(write: Write) -> Done {
    match write {
        Write::Claim { done, .. } => Done::Claim(done, Claim::Claimed),
        Write::Record { done, .. } => Done::Record(done, false),
        Write::Retain { done, .. } | Write::Answers { done, .. } => Done::Plain(done),
        Write::Event(_) => Done::Nothing,
    }
}

fn answer(done: Done) {
    match done {
        Done::Claim(tx, claim) => drop(tx.send(Ok(claim))),
        Done::Record(tx, recorded) => drop(tx.send(Ok(recorded))),
        Done::Plain(tx) => drop(tx.send(Ok(()))),
        Done::Nothing => {}
    }
}

fn fail(done: Done, e: &str) {
    match done {
        Done::Claim(tx, _) => drop(tx.send(Err(e.to_owned()))),
        Done::Record(tx, _) => drop(tx.send(Err(e.to_owned()))),
        Done::Plain(tx) => drop(tx.send(Err(e.to_owned()))),
        Done::Nothing => {}
    }
}

type Applied = Result<Done, (Done, String)>;

async fn apply(db: &mut AnyConnection, write: Write, events: &AtomicU64) -> Applied {
    match write {
        Write::Claim {
            context,
            tool,
            owner,
            lease_until,
            done,
        } => match claim(db, &context, &tool, &owner, lease_until).await {
            Ok(claim) => Ok(Done::Claim(done, claim)),
            Err(e) => Err((Done::Claim(done, Claim::Claimed), e.to_string())),
        },
        Write::Record {
            context,
            owner,
            status,
            settlement,
            done,
        } => match record(db, &context, &owner, status, &settlement).await {
            Ok(recorded) => Ok(Done::Record(done, recorded)),
            Err(e) => Err((Done::Record(done, false), e.to_string())),
        },
        Write::Event(event) => match keep_event(db, &event, events).await {
            Ok(()) => Ok(Done::Nothing),
            Err(e) => Err((Done::Nothing, e.to_string())),
        },
        Write::Retain {
            id,
            session,
            text,
            quota,
            expired_before,
            done,
        } => match retain(db, &id, &session, &text, quota, expired_before).await {
            Ok(()) => Ok(Done::Plain(done)),
            Err(e) => Err((Done::Plain(done), e.to_string())),
        },
        Write::Answers {
            scope,
            answers,
            done,
        } => match save_answers(db, &scope, &answers).await {
            Ok(()) => Ok(Done::Plain(done)),
            Err(e) => Err((Done::Plain(done), e.to_string())),
        },
    }
}

/// Claims the ids, finds their recorded outcome, or finds them running
/// (taking them over when the running claim ran out).
async fn claim(
    db: &mut AnyConnection,
    context: &CallContext,
    tool: &str,
    owner: &str,
    lease_until: i64,
) -> sqlx::Result<Claim> {
    let now = now_millis();
    let inserted = sqlx::query(
        "INSERT INTO calls (session_id, message_id, call_id, agent, tool, state, owner, lease_until, started_at, caller) \
         VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, $9) \
         ON CONFLICT (session_id, message_id, call_id) DO NOTHING",
    )
    .bind(context.session_id.as_str())
    .bind(context.message_id.as_str())
    .bind(context.call_id.as_str())
    .bind(context.agent.as_str())
    .bind(tool)
    .bind(owner)
    .bind(lease_until)
    .bind(now)
    .bind(context.caller.as_ref().map(Caller::name))
    .execute(&mut *db)
    .await?;
    if inserted.rows_affected() == 1 {
        return Ok(Claim::Claimed);
    }
    let row = sqlx::query(
        "SELECT state, settlement, lease_until FROM calls \
         WHERE session_id = $1 AND message_id = $2 AND call_id = $3",
    )
    .bind(context.session_id.as_str())
    .bind(context.message_id.as_str())
    .bind(context.call_id.as_str())
    .fetch_one(&mut *db)
    .await?;
    let state: String = row.try_get(0)?;
    if state == "done" {
        let text: Option<String> = row.try_get(1)?;
        let settlement = serde_json::from_str(text.as_deref().unwrap_or_default())
            .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        return Ok(Claim::Replay(Box::new(settlement)));
    }
    let until: i64 = row.try_get(2)?;
    if until >= now {
        return Ok(Claim::Running { until });
    }
    // The runner that claimed it is gone: its lease ran out.
    let taken = sqlx::query(
        "UPDATE calls SET owner = $1, lease_until = $2, started_at = $3 \
         WHERE session_id = $4 AND message_id = $5 AND call_id = $6 AND state = 'running' AND lease_until < $7",
    )
    .bind(owner)
    .bind(lease_until)
    .bind(now)
    .bind(context.session_id.as_str())
    .bind(context.message_id.as_str())
    .bind(context.call_id.as_str())
    .bind(now)
    .execute(&mut *db)
    .await?;
    Ok(if taken.rows_affected() == 1 {
        Claim::Claimed
    } else {
        Claim::Running { until }
    })
}

/// Records the outcome of a call `owner` claimed; false if the claim was
/// no longer its own.
async fn record(
    db: &mut AnyConnection,
    context: &CallContext,
    owner: &str,
    status: &str,
    settlement: &str,
) -> sqlx::Result<bool> {
    let updated = sqlx::query(
        "UPDATE calls SET state = 'done', status = $1, settlement = $2, ended_at = $3 \
         WHERE session_id = $4 AND message_id = $5 AND call_id = $6 AND owner = $7 AND state = 'running'",
    )
    .bind(status)
    .bind(settlement)
    .bind(now_millis())
    .bind(context.session_id.as_str())
    .bind(context.message_id.as_str())
    .bind(context.call_id.as_str())
    .bind(owner)
    .execute(&mut *db)
    .await?;
    Ok(updated.rows_affected() == 1)
}

async fn keep_event(
    db: &mut AnyConnection,
    event: &StoreEvent,
    kept: &AtomicU64,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO events (kind, session_id, message_id, call_id, at, body, caller) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(event.kind)
    .bind(event.context.session_id.as_str())
    .bind(event.context.message_id.as_str())
    .bind(event.context.call_id.as_str())
    .bind(now_millis())
    .bind(event.body.to_string())
    .bind(event.context.caller.as_ref().map(Caller::name))
    .execute(&mut *db)
    .await?;
    // Now and then, drop what is beyond the bound.
    if kept.fetch_add(1, Ordering::Relaxed).is_multiple_of(1024) {
        let cap = i64::try_from(MAX_STORED_EVENTS).unwrap_or(i64::MAX);
        sqlx::query("DELETE FROM events WHERE seq <= (SELECT MAX(seq) FROM events) - $1")
            .bind(cap)
            .execute(&mut *db)
            .await?;
    }
    Ok(())
}

/// Keeps `text` in chunks, first removing outputs past their retention and
/// the oldest ones the quota needs room from.
async fn retain(
    db: &mut AnyConnection,
    id: &str,
    session: &str,
    text: &[u8],
    quota: u64,
    expired_before: i64,
) -> sqlx::Result<()> {
    let expired = ids(sqlx::query("SELECT id FROM outputs WHERE created_at < $1")
        .bind(expired_before)
        .fetch_all(&mut *db)
        .await?)?;
    remove_outputs(db, &expired).await?;
    let bytes = i64::try_from(text.len()).unwrap_or(i64::MAX);
    let quota = i64::try_from(quota).unwrap_or(i64::MAX);
    let mut used: i64 = sqlx::query("SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM outputs")
        .fetch_one(&mut *db)
        .await?
        .try_get(0)?;
    while used + bytes > quota {
        let oldest = sqlx::query("SELECT id, bytes FROM outputs ORDER BY created_at LIMIT 1")
            .fetch_optional(&mut *db)
            .await?;
        let Some(oldest) = oldest else { break };
        let (id, size): (String, i64) = (oldest.try_get(0)?, oldest.try_get(1)?);
        remove_outputs(db, &[id]).await?;
        used -= size;
    }
    sqlx::query("INSERT INTO outputs (id, session_id, bytes, created_at) VALUES ($1, $2, $3, $4)")
        .bind(id)
        .bind(session)
        .bind(bytes)
        .bind(now_millis())
        .execute(&mut *db)
        .await?;
    for (seq, chunk) in text.chunks(OUTPUT_CHUNK_BYTES).enumerate() {
        sqlx::query("INSERT INTO output_chunks (id, seq, data) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(i64::try_from(seq).unwrap_or(i64::MAX))
            .bind(chunk.to_vec())
            .execute(&mut *db)
            .await?;
    }
    Ok(())
}

/// The first column of each row, as text.
fn ids(rows: Vec<sqlx::any::AnyRow>) -> sqlx::Result<Vec<String>> {
    rows.iter().map(|row| row.try_get(0)).collect()
}

/// Removes these outputs and their chunks.
async fn remove_outputs(db: &mut AnyConnection, ids: &[String]) -> sqlx::Result<()> {
    for id in ids {
        sqlx::query("DELETE FROM output_chunks WHERE id = $1")
            .bind(id.as_str())
            .execute(&mut *db)
            .await?;
        sqlx::query("DELETE FROM outputs WHERE id = $1")
            .bind(id.as_str())
            .execute(&mut *db)
            .await?;
    }
    Ok(())
}

async fn save_answers(
    db: &mut AnyConnection,
    scope: &str,
    answers: &[(String, String)],
) -> sqlx::Result<()> {
    for (action, pattern) in answers {
        sqlx::query(
            "INSERT INTO answers (scope, action, pattern) VALUES ($1, $2, $3) \
             ON CONFLICT (scope, action, pattern) DO NOTHING",
        )
        .bind(scope)
        .bind(action.as_str())
        .bind(pattern.as_str())
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}
