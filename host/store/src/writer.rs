//! The store's one writer: it takes every write queued, applies them in one
//! transaction and commits once (group commit), then answers each. A
//! failed commit fails every write of the batch; nothing is half-written.
//!
//! What a write does is written once, against [`Conn`]; the two backends
//! differ only in how a batch gets a connection and commits. SQLite's
//! writer is a thread of its own on one connection ([`sqlite`]): a write
//! costs one hop there and one back. Postgres's is a task on the pool
//! ([`pool`]).

pub(super) mod pool;
pub(super) mod sqlite;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{mpsc, oneshot};

use crate::model::context::{CallContext, Caller};
use crate::model::outcome::Status;
use crate::{
    Claim, IdConflict, InputDigest, MAX_BATCH, MAX_STORED_EVENTS, OUTPUT_CHUNK_BYTES, StoreEvent,
    now_millis,
};

/// One write, and who waits for it.
pub(super) enum Write {
    Claim {
        context: CallContext,
        tool: String,
        input: InputDigest,
        owner: Arc<str>,
        lease_until: i64,
        done: oneshot::Sender<Result<Claim, String>>,
    },
    /// An outcome, under its claim or (`unclaimed`) with none; answers
    /// whether the row it needed was there.
    Record {
        outcome: StoredOutcome,
        unclaimed: Option<Unclaimed>,
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

/// A terminal outcome as the store keeps it.
pub(super) struct StoredOutcome {
    pub(super) context: CallContext,
    pub(super) owner: Arc<str>,
    pub(super) status: Status,
    pub(super) settlement: String,
}

/// What the row of a call that ran unclaimed needs besides its outcome.
pub(super) struct Unclaimed {
    pub(super) tool: String,
    pub(super) input: InputDigest,
    pub(super) started_at: i64,
}

impl Write {
    /// Whether it records an outcome, so its commit must reach the disk.
    fn is_durable(&self) -> bool {
        matches!(self, Write::Record { .. })
    }

    /// Whether it is one statement (or, for a claim taken over, a guarded
    /// update that needs no transaction around it), so alone in its batch
    /// it can run without BEGIN and COMMIT.
    fn is_one_statement(&self) -> bool {
        matches!(
            self,
            Write::Claim { .. } | Write::Record { .. } | Write::Event(_)
        )
    }
}

/// What one write gives back once its batch committed.
pub(super) enum Done {
    Claim(oneshot::Sender<Result<Claim, String>>, Claim),
    Record(oneshot::Sender<Result<bool, String>>, bool),
    Plain(oneshot::Sender<Result<(), String>>),
    Nothing,
}

/// A batch's end: every write's answer, or why the batch failed and who
/// waits to be told.
pub(super) type Committed = Result<Vec<Done>, (Vec<Done>, String)>;

/// What the writer has done, for the store's statistics.
#[derive(Debug, Default)]
pub(super) struct Counters {
    /// Transactions committed.
    pub(super) commits: AtomicU64,
    /// Writes in them.
    pub(super) writes: AtomicU64,
    /// Of those commits, the ones a caller made on its own thread.
    pub(super) here: AtomicU64,
    /// Events kept, for pruning now and then.
    events: AtomicU64,
}

impl Counters {
    /// Answers a batch's writers and counts it.
    fn settle(&self, count: usize, committed: Committed) {
        match committed {
            Ok(done) => {
                self.commits.fetch_add(1, Ordering::Relaxed);
                self.writes.fetch_add(count as u64, Ordering::Relaxed);
                done.into_iter().for_each(answer);
            }
            Err((waiting, e)) => waiting.into_iter().for_each(|w| fail(w, &e)),
        }
    }
}

/// `first` and what else is queued now, up to [`MAX_BATCH`].
fn batch(first: Write, queue: &mut mpsc::Receiver<Write>) -> Vec<Write> {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    batch.push(first);
    take_queued(&mut batch, queue, MAX_BATCH);
    batch
}

/// Moves what is queued now into `batch`, until it holds `up_to`.
fn take_queued(batch: &mut Vec<Write>, queue: &mut mpsc::Receiver<Write>, up_to: usize) {
    while batch.len() < up_to {
        match queue.try_recv() {
            Ok(more) => batch.push(more),
            Err(_) => break,
        }
    }
}

/// Where a store's writes go: its writer's queue and, on SQLite, the
/// writer's connection, on which a caller commits its own write when
/// nobody else is writing (no hop to the writer's thread and back).
pub(super) struct Writes {
    queue: mpsc::Sender<Write>,
    sqlite: Option<sqlite::SqliteWriter>,
}

/// The writer is gone: nothing it was given will be written.
pub(super) struct Stopped;

impl Writes {
    pub(super) fn new(queue: mpsc::Sender<Write>, sqlite: Option<sqlite::SqliteWriter>) -> Writes {
        Writes { queue, sqlite }
    }

    /// Commits `write` on this thread if the connection is free, else
    /// queues it (waiting for room); its `done` tells when it committed.
    pub(super) async fn send(&self, write: Write) -> Result<(), Stopped> {
        let write = match &self.sqlite {
            Some(sqlite) => match sqlite.write_here(write) {
                None => return Ok(()),
                Some(write) => write,
            },
            None => write,
        };
        self.queue.send(write).await.map_err(|_| Stopped)?;
        self.wake();
        Ok(())
    }

    /// Queues `write` if there is room now.
    pub(super) fn try_send(&self, write: Write) -> Result<(), Stopped> {
        self.queue.try_send(write).map_err(|_| Stopped)?;
        self.wake();
        Ok(())
    }

    /// Queues `write` without waking the writer's thread, so that only a
    /// caller's commit can take it.
    #[cfg(test)]
    pub(super) fn queue_unwoken(&self, write: Write) {
        assert!(self.queue.try_send(write).is_ok(), "the queue has room");
    }

    fn wake(&self) {
        if let Some(sqlite) = &self.sqlite {
            sqlite.wake();
        }
    }
}

/// A value bound to a statement's `$n`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Arg<'a> {
    Text(&'a str),
    OptText(Option<&'a str>),
    Int(i64),
    Blob(&'a [u8]),
}

/// A row read back, its columns by position.
pub(super) trait Cells {
    fn text(&self, column: usize) -> Result<Option<String>, String>;
    fn int(&self, column: usize) -> Result<i64, String>;
}

/// A connection the writes run on. Statements are written once, with
/// `$n` placeholders, which both backends read.
pub(super) trait Conn {
    type Row: Cells + Send;

    /// Runs a statement; the rows it changed.
    fn execute(
        &mut self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<u64, String>> + Send;

    /// Runs a query; every row.
    fn fetch_all(
        &mut self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Vec<Self::Row>, String>> + Send;
}

/// Applies a batch in order; after the first failure the rest only wait
/// to be told (the caller rolls back).
pub(super) async fn apply_all<C: Conn + Send>(
    db: &mut C,
    writes: Vec<Write>,
    events: &AtomicU64,
) -> Committed {
    let mut done = Vec::with_capacity(writes.len());
    let mut failed = None;
    for write in writes {
        if failed.is_some() {
            done.push(pending(write));
            continue;
        }
        match apply(db, write, events).await {
            Ok(d) => done.push(d),
            Err((d, e)) => {
                done.push(d);
                failed = Some(e);
            }
        }
    }
    match failed {
        Some(e) => Err((done, e)),
        None => Ok(done),
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

async fn apply<C: Conn + Send>(db: &mut C, write: Write, events: &AtomicU64) -> Applied {
    match write {
        Write::Claim {
            context,
            tool,
            input,
            owner,
            lease_until,
            done,
        } => match claim(
            db,
            &Claimant::new(&context, &tool, &input),
            &owner,
            lease_until,
        )
        .await
        {
            Ok(claim) => Ok(Done::Claim(done, claim)),
            Err(e) => Err((Done::Claim(done, Claim::Claimed), e)),
        },
        Write::Record {
            outcome,
            unclaimed,
            done,
        } => {
            let recorded = match unclaimed {
                None => record(db, &outcome).await,
                Some(unclaimed) => insert_outcome(db, &outcome, &unclaimed).await,
            };
            match recorded {
                Ok(recorded) => Ok(Done::Record(done, recorded)),
                Err(e) => Err((Done::Record(done, false), e)),
            }
        }
        Write::Event(event) => match keep_event(db, &event, events).await {
            Ok(()) => Ok(Done::Nothing),
            Err(e) => Err((Done::Nothing, e)),
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
            Err(e) => Err((Done::Plain(done), e)),
        },
        Write::Answers {
            scope,
            answers,
            done,
        } => match save_answers(db, &scope, &answers).await {
            Ok(()) => Ok(Done::Plain(done)),
            Err(e) => Err((Done::Plain(done), e)),
        },
    }
}

/// The call's ids, as the first three arguments of a statement.
fn ids(context: &CallContext) -> [Arg<'_>; 3] {
    [
        Arg::Text(&context.session_id),
        Arg::Text(&context.message_id),
        Arg::Text(&context.call_id),
    ]
}

/// The call a claim is for: its ids and what must match them on replay.
struct Claimant<'a> {
    context: &'a CallContext,
    tool: &'a str,
    input: String,
}

impl<'a> Claimant<'a> {
    fn new(context: &'a CallContext, tool: &'a str, input: &InputDigest) -> Claimant<'a> {
        Claimant {
            context,
            tool,
            input: input.to_hex(),
        }
    }

    /// How the call recorded under these ids (its caller, tool and input
    /// digest, as read back) differs from this one, if it does.
    fn conflict(
        &self,
        caller: Option<&str>,
        tool: Option<&str>,
        input: Option<&str>,
    ) -> Option<IdConflict> {
        if caller != self.context.caller.as_ref().map(Caller::name) {
            Some(IdConflict::Caller)
        } else if tool != Some(self.tool) {
            Some(IdConflict::Tool)
        } else if input.is_some_and(|recorded| recorded != self.input) {
            // Rows recorded before inputs were digested carry none.
            Some(IdConflict::Input)
        } else {
            None
        }
    }
}

/// Claims the ids, finds their recorded outcome, or finds them running
/// (taking them over when the running claim ran out); ids recorded for
/// another call are a conflict.
async fn claim<C: Conn + Send>(
    db: &mut C,
    claimant: &Claimant<'_>,
    owner: &str,
    lease_until: i64,
) -> Result<Claim, String> {
    let now = now_millis();
    let context = claimant.context;
    let [session, message, call] = ids(context);
    let inserted = db
        .execute(
            "INSERT INTO calls (session_id, message_id, call_id, agent, tool, state, owner, lease_until, started_at, caller, input_digest) \
             VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, $9, $10) \
             ON CONFLICT (session_id, message_id, call_id) DO NOTHING",
            &[
                session,
                message,
                call,
                Arg::Text(&context.agent),
                Arg::Text(claimant.tool),
                Arg::Text(owner),
                Arg::Int(lease_until),
                Arg::Int(now),
                Arg::OptText(context.caller.as_ref().map(Caller::name)),
                Arg::Text(&claimant.input),
            ],
        )
        .await?;
    if inserted == 1 {
        return Ok(Claim::Claimed);
    }
    let rows = db
        .fetch_all(
            "SELECT state, settlement, lease_until, caller, tool, input_digest FROM calls \
             WHERE session_id = $1 AND message_id = $2 AND call_id = $3",
            &ids(context),
        )
        .await?;
    let row = rows
        .first()
        .ok_or("the claimed call vanished from the store")?;
    let (caller, tool, input) = (row.text(3)?, row.text(4)?, row.text(5)?);
    if let Some(conflict) = claimant.conflict(caller.as_deref(), tool.as_deref(), input.as_deref())
    {
        return Ok(Claim::Conflict(conflict));
    }
    if row.text(0)?.as_deref() == Some("done") {
        let text = row.text(1)?.unwrap_or_default();
        let settlement = serde_json::from_str(&text)
            .map_err(|e| format!("its recorded outcome does not parse: {e}"))?;
        return Ok(Claim::Replay(Box::new(settlement)));
    }
    let until = row.int(2)?;
    if until >= now {
        return Ok(Claim::Running { until });
    }
    // The runner that claimed it is gone: its lease ran out.
    let taken = db
        .execute(
            "UPDATE calls SET owner = $1, lease_until = $2, started_at = $3 \
             WHERE session_id = $4 AND message_id = $5 AND call_id = $6 AND state = 'running' AND lease_until < $7",
            &[
                Arg::Text(owner),
                Arg::Int(lease_until),
                Arg::Int(now),
                session,
                message,
                call,
                Arg::Int(now),
            ],
        )
        .await?;
    Ok(if taken == 1 {
        Claim::Claimed
    } else {
        Claim::Running { until }
    })
}

/// Records the outcome of a call its owner claimed; false if the claim
/// was no longer its own.
async fn record<C: Conn + Send>(db: &mut C, outcome: &StoredOutcome) -> Result<bool, String> {
    let [session, message, call] = ids(&outcome.context);
    let updated = db
        .execute(
            "UPDATE calls SET state = 'done', status = $1, settlement = $2, ended_at = $3 \
             WHERE session_id = $4 AND message_id = $5 AND call_id = $6 AND owner = $7 AND state = 'running'",
            &[
                Arg::Text(outcome.status.as_str()),
                Arg::Text(&outcome.settlement),
                Arg::Int(now_millis()),
                session,
                message,
                call,
                Arg::Text(&outcome.owner),
            ],
        )
        .await?;
    Ok(updated == 1)
}

/// Records the outcome of a call that ran unclaimed as its row's one
/// write; false if its ids were there already.
async fn insert_outcome<C: Conn + Send>(
    db: &mut C,
    outcome: &StoredOutcome,
    unclaimed: &Unclaimed,
) -> Result<bool, String> {
    let context = &outcome.context;
    let [session, message, call] = ids(context);
    let now = now_millis();
    let inserted = db
        .execute(
            "INSERT INTO calls (session_id, message_id, call_id, agent, tool, state, owner, lease_until, started_at, ended_at, status, settlement, caller, input_digest) \
             VALUES ($1, $2, $3, $4, $5, 'done', $6, $7, $8, $9, $10, $11, $12, $13) \
             ON CONFLICT (session_id, message_id, call_id) DO NOTHING",
            &[
                session,
                message,
                call,
                Arg::Text(&context.agent),
                Arg::Text(&unclaimed.tool),
                Arg::Text(&outcome.owner),
                Arg::Int(now),
                Arg::Int(unclaimed.started_at),
                Arg::Int(now),
                Arg::Text(outcome.status.as_str()),
                Arg::Text(&outcome.settlement),
                Arg::OptText(context.caller.as_ref().map(Caller::name)),
                Arg::Text(&unclaimed.input.to_hex()),
            ],
        )
        .await?;
    Ok(inserted == 1)
}

async fn keep_event<C: Conn + Send>(
    db: &mut C,
    event: &StoreEvent,
    kept: &AtomicU64,
) -> Result<(), String> {
    let [session, message, call] = ids(&event.context);
    let body = event.body.to_string();
    db.execute(
        "INSERT INTO events (kind, session_id, message_id, call_id, at, body, caller) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            Arg::Text(event.kind),
            session,
            message,
            call,
            Arg::Int(now_millis()),
            Arg::Text(&body),
            Arg::OptText(event.context.caller.as_ref().map(Caller::name)),
        ],
    )
    .await?;
    // Now and then, drop what is beyond the bound.
    if kept.fetch_add(1, Ordering::Relaxed).is_multiple_of(1024) {
        let cap = i64::try_from(MAX_STORED_EVENTS).unwrap_or(i64::MAX);
        db.execute(
            "DELETE FROM events WHERE seq <= (SELECT MAX(seq) FROM events) - $1",
            &[Arg::Int(cap)],
        )
        .await?;
    }
    Ok(())
}

/// Keeps `text` in chunks, first removing outputs past their retention and
/// the oldest ones the quota needs room from.
async fn retain<C: Conn + Send>(
    db: &mut C,
    id: &str,
    session: &str,
    text: &[u8],
    quota: u64,
    expired_before: i64,
) -> Result<(), String> {
    let expired = db
        .fetch_all(
            "SELECT id FROM outputs WHERE created_at < $1",
            &[Arg::Int(expired_before)],
        )
        .await?;
    for row in &expired {
        remove_output(db, &row.text(0)?.unwrap_or_default()).await?;
    }
    let bytes = i64::try_from(text.len()).unwrap_or(i64::MAX);
    let quota = i64::try_from(quota).unwrap_or(i64::MAX);
    let sum = db
        .fetch_all(
            "SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM outputs",
            &[],
        )
        .await?;
    let mut used = sum.first().map_or(Ok(0), |row| row.int(0))?;
    while used + bytes > quota {
        let oldest = db
            .fetch_all(
                "SELECT id, bytes FROM outputs ORDER BY created_at LIMIT 1",
                &[],
            )
            .await?;
        let Some(oldest) = oldest.first() else { break };
        remove_output(db, &oldest.text(0)?.unwrap_or_default()).await?;
        used -= oldest.int(1)?;
    }
    db.execute(
        "INSERT INTO outputs (id, session_id, bytes, created_at) VALUES ($1, $2, $3, $4)",
        &[
            Arg::Text(id),
            Arg::Text(session),
            Arg::Int(bytes),
            Arg::Int(now_millis()),
        ],
    )
    .await?;
    for (seq, chunk) in text.chunks(OUTPUT_CHUNK_BYTES).enumerate() {
        db.execute(
            "INSERT INTO output_chunks (id, seq, data) VALUES ($1, $2, $3)",
            &[
                Arg::Text(id),
                Arg::Int(i64::try_from(seq).unwrap_or(i64::MAX)),
                Arg::Blob(chunk),
            ],
        )
        .await?;
    }
    Ok(())
}

/// Removes an output and its chunks.
async fn remove_output<C: Conn + Send>(db: &mut C, id: &str) -> Result<(), String> {
    db.execute("DELETE FROM output_chunks WHERE id = $1", &[Arg::Text(id)])
        .await?;
    db.execute("DELETE FROM outputs WHERE id = $1", &[Arg::Text(id)])
        .await?;
    Ok(())
}

async fn save_answers<C: Conn + Send>(
    db: &mut C,
    scope: &str,
    answers: &[(String, String)],
) -> Result<(), String> {
    for (action, pattern) in answers {
        db.execute(
            "INSERT INTO answers (scope, action, pattern) VALUES ($1, $2, $3) \
             ON CONFLICT (scope, action, pattern) DO NOTHING",
            &[Arg::Text(scope), Arg::Text(action), Arg::Text(pattern)],
        )
        .await?;
    }
    Ok(())
}
