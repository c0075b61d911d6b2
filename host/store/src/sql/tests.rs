//! The SQL store against SQLite (and Postgres where the harness has one).

use super::*;
use crate::IdConflict;
use crate::model::outcome::Outcome;

fn context(call: &str) -> CallContext {
    CallContext::new("ses", "tester", "msg", call)
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
async fn r38_an_event_queued_before_an_outcome_is_durable_with_it() {
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
    // Whether a caller found the connection free depends on the writer
    // thread's timing (under load it may never): the next test commits in
    // place deterministically.
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
    crate::claim_then_record(&store, &settlement("d1"), &input())
        .await
        .unwrap();
    let (commits_after, writes_after) = store.commits();
    assert_eq!(
        (commits_after - commits, writes_after - writes),
        (2, 2),
        "a claim, then the outcome"
    );
    let again = crate::claim_then_record(&store, &settlement("d1"), &input()).await;
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
    let big = vec![b'x'; 3 * crate::OUTPUT_CHUNK_BYTES + 7];
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
    let big = vec![b'x'; 2 * crate::OUTPUT_CHUNK_BYTES + 1];
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
