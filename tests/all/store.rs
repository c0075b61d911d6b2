//! The store (R38), against both implementations: the embedded SQLite
//! store and a real Postgres cluster the test starts. Outcomes are
//! recorded exactly once per call identity and replayed without running
//! anything; retained outputs are read by id, only by their session, from
//! any host on the same database; a store lost mid-run fails calls
//! operationally and the host recovers when it returns.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::sync::Semaphore;
use toolhost::outcome::{Culprit, ErrorKind, FaultKind, HostFault};
use toolhost::store::{Claim, InputDigest, OutcomeFilter, SqlStore, Store, StoreError};
use toolhost::{
    Call, CallContext, ContentPart, Host, Location, Outcome, Settlement, Tool, ToolResponse,
};
use toolhost_tests::postgres::Postgres;
use toolhost_tests::{load, retained, text, within};

use crate::BULK_OUTPUT;

/// Where a test's store is: an embedded one in a temporary state
/// directory, or a private Postgres cluster.
enum Backend {
    Embedded(tempfile::TempDir),
    Postgres(Postgres),
}

impl Backend {
    fn embedded() -> Backend {
        Backend::Embedded(tempfile::tempdir().unwrap())
    }

    fn postgres() -> Backend {
        Backend::Postgres(Postgres::start())
    }

    /// The store's URL, as `--store` takes it.
    fn url(&self) -> String {
        match self {
            Backend::Embedded(dir) => {
                format!("sqlite:{}", dir.path().join("store.sqlite3").display())
            }
            Backend::Postgres(pg) => pg.url(),
        }
    }

    /// A new handle on the store, as another host (or replica) opens it.
    async fn open(&self) -> Arc<dyn Store> {
        Arc::new(SqlStore::open(&self.url()).await.expect("the store opens"))
    }

    /// A host on a new handle of the store.
    async fn host(&self) -> Host {
        Host::builder().store(self.open().await).build().unwrap()
    }
}

/// Both backends, each test run once on each.
fn backends() -> [fn() -> Backend; 2] {
    [Backend::embedded, Backend::postgres]
}

fn ids(call: &str) -> CallContext {
    CallContext::new("ses-store", "tester", "msg-store", call)
}

/// A native tool that counts its executions and, while `gate` has no
/// permits, waits in the middle of running.
fn counted(runs: Arc<AtomicUsize>, gate: Arc<Semaphore>) -> Tool {
    Tool::native(
        "counts its runs",
        json!({"type": "object"}),
        None,
        move |input: Value, _| {
            let (runs, gate) = (runs.clone(), gate.clone());
            async move {
                let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                drop(gate.acquire().await.expect("the gate stays open"));
                Ok(ToolResponse {
                    content: Some(vec![ContentPart::text(format!("run {run} of {input}"))]),
                    ..Default::default()
                })
            }
        },
    )
    .unwrap()
}

/// A location of `host` with the `counted` tool registered.
fn counting(
    host: &Host,
    runs: &Arc<AtomicUsize>,
    gate: &Arc<Semaphore>,
) -> (Location, toolhost::Registration) {
    let location = host.location("/store");
    let registration = location
        .register([("counted", counted(runs.clone(), gate.clone()))])
        .unwrap();
    (location, registration)
}

fn store_fault(s: &Settlement) -> &str {
    match &s.outcome {
        Outcome::Defect {
            message,
            culprit:
                Culprit::Host(HostFault {
                    kind: FaultKind::Store,
                    ..
                }),
        } => message,
        other => panic!("expected the store's operational failure, got {other:?}"),
    }
}

#[tokio::test]
async fn r38_duplicate_ids_in_flight_run_once_and_replay_the_outcome() {
    for backend in backends() {
        let backend = backend();
        let host = backend.host().await;
        let (runs, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
        let (location, _r) = counting(&host, &runs, &gate);
        let snapshot = location.snapshot();
        // 64 settles of the same ids at once: the first runs and holds in
        // the middle; the others find the ids claimed and wait.
        let settles: Vec<_> = (0..64)
            .map(|_| {
                let snapshot = snapshot.clone();
                tokio::spawn(async move {
                    snapshot
                        .settle(Call::new("counted", r#"{"n":1}"#, ids("dup")))
                        .await
                })
            })
            .collect();
        within("the first run to start", async {
            while runs.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await;
        gate.add_permits(64);
        let mut replayed = 0;
        for settle in settles {
            let s = within("a duplicate's settle", settle).await.unwrap();
            assert_eq!(text(&s), r#"run 1 of {"n":1}"#, "{:?}", backend.url());
            replayed += usize::from(s.replayed);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the tool ran once");
        assert_eq!(replayed, 63, "every other settle replayed the outcome");
        // Later, and from another host on the same store: still replayed.
        let other = backend.host().await;
        let (location, _o) = counting(&other, &runs, &gate);
        let again = location
            .snapshot()
            .settle(Call::new("counted", r#"{"n":1}"#, ids("dup")))
            .await;
        assert!(again.replayed);
        assert_eq!(text(&again), r#"run 1 of {"n":1}"#);
        // The same ids with other arguments name another call: refused,
        // neither replayed nor run.
        let reused = location
            .snapshot()
            .settle(Call::new("counted", r#"{"n":2}"#, ids("dup")))
            .await;
        assert!(!reused.replayed);
        match &reused.outcome {
            Outcome::Error { kind, message, .. } => {
                assert_eq!(*kind, ErrorKind::IdsReused, "{message}");
                assert!(message.contains("ids of its own"), "{message}");
            }
            other => panic!("ids reused for other arguments: {other:?}"),
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "nothing ran again");
    }
}

#[tokio::test]
async fn r38_an_unclaimed_outcome_is_one_row_that_every_replica_replays() {
    for backend in backends() {
        let backend = backend();
        let store = backend.open().await;
        let host = Host::builder().store(store.clone()).build().unwrap();
        let (runs, gate) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(Semaphore::new(1 << 20)),
        );
        let (location, _r) = counting(&host, &runs, &gate);
        let seed = location
            .snapshot()
            .settle(Call::new("counted", "{}", ids("seed")))
            .await;
        assert_eq!(seed.outcome.status(), "completed");
        assert!(store.runs_unclaimed(), "the store answered");
        let mut unclaimed = seed.clone();
        unclaimed.context = ids("unclaimed");
        let input = InputDigest::of("{}");
        store.record_unclaimed(&unclaimed, &input).await.unwrap();
        for taken in [&unclaimed, &seed] {
            let again = store.record_unclaimed(taken, &input).await;
            assert!(
                matches!(again, Err(StoreError::IdsTaken { .. })),
                "ids in the store are never written again: {again:?}"
            );
        }
        let replica = backend.open().await;
        let lease = std::time::Duration::from_secs(60);
        let Claim::Replay(replayed) = replica
            .claim(&ids("unclaimed"), "counted", &input, lease)
            .await
            .unwrap()
        else {
            panic!("another replica replays the unclaimed outcome");
        };
        assert_eq!(replayed.tool, "counted");
        assert_eq!(replayed.context, ids("unclaimed"));
        let mut filter = OutcomeFilter::default();
        filter.call = Some("unclaimed".into());
        assert_eq!(replica.outcomes(&filter).await.unwrap().len(), 1);
        assert_eq!(runs.load(Ordering::SeqCst), 1, "only the seed ran");
    }
}

#[tokio::test]
async fn r38_64_concurrent_calls_are_each_recorded_exactly_once() {
    for backend in backends() {
        let backend = backend();
        let host = backend.host().await;
        let (runs, gate) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(Semaphore::new(1 << 20)),
        );
        let (location, _r) = counting(&host, &runs, &gate);
        let snapshot = location.snapshot();
        let settles: Vec<_> = (0..64)
            .map(|i| {
                let snapshot = snapshot.clone();
                tokio::spawn(async move {
                    snapshot
                        .settle(Call::new("counted", "{}", ids(&format!("c{i}"))))
                        .await
                })
            })
            .collect();
        for settle in settles {
            let s = within("a settle", settle).await.unwrap();
            assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
            assert!(!s.replayed);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 64);
        let mut filter = OutcomeFilter::default();
        filter.limit = Some(1000);
        let recorded = backend.open().await.outcomes(&filter).await.unwrap();
        let mut calls: Vec<_> = recorded
            .iter()
            .map(|r| r.settlement.context.call_id.clone())
            .collect();
        calls.sort();
        calls.dedup();
        assert_eq!((recorded.len(), calls.len()), (64, 64), "{}", backend.url());
    }
}

#[tokio::test]
async fn r38_retained_outputs_are_read_by_id_only_by_their_session_from_any_host() {
    for backend in backends() {
        let backend = backend();
        let host = backend.host().await;
        let location = host.location("/retained");
        let _a = load(&location, BULK_OUTPUT).await;
        let s = location
            .snapshot()
            .settle(Call::new("generate", r#"{"bytes": 300000}"#, ids("big")))
            .await;
        let full = retained(&host, &s, 0).await;
        assert_eq!(full.len(), 300_000);
        let Outcome::Completed(c) = &s.outcome else {
            unreachable!()
        };
        let reference = &c.retained[0].reference;
        // Another host on the same store reads it as the same session
        // only.
        let other = backend.host().await;
        let read = other.retained("ses-store", reference).await.unwrap();
        assert_eq!(read.as_deref(), Some(full.as_str()));
        assert_eq!(other.retained("ses-other", reference).await.unwrap(), None);
        // And another process: the operator's `toolhost output`.
        let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["output", reference, "--store", &backend.url()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(
            out.stdout == full.as_bytes(),
            "{} bytes printed",
            out.stdout.len()
        );
        let missing = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["output", "toolhost-output:0123456789abcdef0123456789abcdef"])
            .args(["--store", &backend.url()])
            .output()
            .unwrap();
        assert_eq!(missing.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&missing.stderr).contains("may have expired"));
    }
}

#[tokio::test]
async fn r38_saved_answers_are_kept_per_scope() {
    for backend in backends() {
        let backend = backend();
        let store = backend.open().await;
        let answers = vec![("edit".to_owned(), "/tmp/*".to_owned())];
        store.save_answers(r#"["s1","p"]"#, &answers).await.unwrap();
        store.save_answers(r#"["s1","p"]"#, &answers).await.unwrap();
        let again = backend.open().await;
        assert_eq!(again.answers(r#"["s1","p"]"#).await.unwrap(), answers);
        assert!(again.answers(r#"["s2","p"]"#).await.unwrap().is_empty());
        assert!(again.answers(r#"["s1","q"]"#).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn r38_a_store_lost_mid_run_fails_calls_and_the_host_recovers() {
    let pg = Postgres::start();
    let store: Arc<dyn Store> = Arc::new(SqlStore::open(&pg.url()).await.unwrap());
    let host = Host::builder().store(store.clone()).build().unwrap();
    let (runs, gate) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Semaphore::new(1 << 20)),
    );
    let (location, _r) = counting(&host, &runs, &gate);
    let snapshot = location.snapshot();
    let call = |id: &str| Call::new("counted", "{}", ids(id));
    assert_eq!(
        snapshot.settle(call("before")).await.outcome.status(),
        "completed"
    );
    pg.stop();
    let lost = snapshot.settle(call("during")).await;
    let message = store_fault(&lost);
    assert!(message.contains("could not claim"), "{message}");
    assert!(message.contains("127.0.0.1"), "names the store: {message}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "nothing ran without a claim"
    );
    pg.restart();
    // The pool reconnects: the same host, no restart.
    let back = snapshot.settle(call("during")).await;
    assert_eq!(back.outcome.status(), "completed", "{:?}", back.outcome);
    assert!(!back.replayed, "the failed attempt recorded nothing");
    let after = snapshot.settle(call("after")).await;
    assert_eq!(after.outcome.status(), "completed");
    let mut filter = OutcomeFilter::default();
    filter.limit = Some(100);
    let recorded = store.outcomes(&filter).await.unwrap();
    let mut calls: Vec<_> = recorded
        .iter()
        .map(|r| r.settlement.context.call_id.as_str())
        .collect();
    calls.sort_unstable();
    assert_eq!(
        calls,
        ["after", "before", "during"],
        "nothing twice, nothing lost"
    );
}

#[tokio::test]
async fn r38_an_unreachable_store_at_start_is_a_usage_error_without_its_password() {
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://tool:s3cret@127.0.0.1:{port}/toolhost");
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["list", crate::TEXT_TOOLS, "--store", &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

#[tokio::test]
async fn r38_migrations_apply_to_an_empty_database_and_rerun_idempotently() {
    let pg = Postgres::start();
    for _ in 0..2 {
        drop(SqlStore::open(&pg.url()).await.unwrap());
    }
    let applied = pg
        .psql("SELECT version, success FROM _sqlx_migrations ORDER BY version")
        .unwrap();
    assert_eq!(applied.trim(), "1|t\n2|t\n3|t\n5|t");
    let tables = pg
        .psql("SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'public'")
        .unwrap();
    assert_eq!(
        tables.trim(),
        "_sqlx_migrations,answers,calls,events,output_chunks,outputs"
    );
}

#[test]
fn r38_toolhost_events_lists_recorded_outcomes_by_filter() {
    let pg = Postgres::start();
    let state = tempfile::tempdir().unwrap();
    for store in [None, Some(pg.url())] {
        let toolhost = |args: &[&str]| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
            command
                .args(args)
                .env("TOOLHOST_STATE_DIR", state.path())
                .env("TOOLHOST_CACHE_DIR", state.path().join("cache"));
            if let Some(url) = &store {
                command.args(["--store", url]);
            }
            let out = command.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            (
                out.status.code(),
                String::from_utf8(out.stdout).unwrap(),
                stderr,
            )
        };
        let echo = r#"{"message":"hi"}"#;
        for (tool, input) in [("echo", echo), ("echo", echo), ("word_count", "{}")] {
            toolhost(&["call", crate::TEXT_TOOLS, tool, "--input", input]);
        }
        let (code, listed, stderr) = toolhost(&["events", "--json"]);
        assert_eq!(code, Some(0), "{stderr}");
        let outcomes: Vec<Value> = listed
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(outcomes.len(), 3, "{listed}");
        assert!(outcomes.iter().all(|o| o["recorded_at"].as_i64().is_some()));
        assert!(
            outcomes.iter().all(|o| o["context"]["message_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("msg_"))),
            "each run's message id is minted for it: {listed}"
        );
        let (_, echoes, _) = toolhost(&["events", "--json", "--tool", "echo"]);
        assert_eq!(echoes.lines().count(), 2, "{echoes}");
        let (_, errors, _) = toolhost(&["events", "--json", "--status", "error"]);
        let (_, completed, _) = toolhost(&["events", "--json", "--status", "completed"]);
        let word_count = &outcomes.iter().find(|o| o["tool"] == "word_count").unwrap();
        let status = word_count["status"].as_str().unwrap();
        assert_eq!(
            (errors.lines().count(), completed.lines().count()),
            if status == "error" { (1, 2) } else { (0, 3) },
        );
        let session = outcomes[0]["context"]["session_id"].as_str().unwrap();
        let (_, one, _) = toolhost(&["events", "--json", "--session", session]);
        assert_eq!(one.lines().count(), 1, "each `call` run is its own session");
        let (_, newest, _) = toolhost(&["events", "--limit", "1"]);
        assert_eq!(newest.lines().count(), 1);
        assert!(newest.contains(session), "newest first: {newest}");
        let (_, none, _) = toolhost(&["events", "--since", "0s", "--tool", "nothing"]);
        assert_eq!(none, "");
        let (code, _, said) = toolhost(&["events", "--limit", "10001"]);
        assert_eq!(code, Some(2), "an unbounded listing is refused: {said}");
    }
}

#[test]
fn r38_serve_on_postgres_records_once_replays_by_message_id_and_retains() {
    let pg = Postgres::start();
    let url = pg.url();
    let dir = tempfile::tempdir().unwrap();
    let args = [crate::TEXT_TOOLS, BULK_OUTPUT, "--store", &url];
    let mut served = crate::stdio::Served::start(&args, dir.path(), |_| {});
    let echo = |served: &mut crate::stdio::Served, message: &str| {
        // The same request id and `io.toolhost/message-id`: the same call.
        served.send(&json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {
                "name": "echo", "arguments": {"message": message},
                "_meta": {"io.toolhost/message-id": "msg-serve"}
            }
        }));
        served.reply(7)
    };
    let first = echo(&mut served, "first");
    assert_eq!(first["result"]["content"][0]["text"], "first");
    let again = echo(&mut served, "first");
    assert_eq!(
        again["result"]["content"][0]["text"], "first",
        "replayed, not run again"
    );
    let other = echo(&mut served, "second");
    assert_eq!(
        other["error"]["code"], -32602,
        "the ids of another call are refused: {other}"
    );
    let big = served.call(8, "generate", json!({"bytes": 200_000}));
    let shown = big["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = shown
        .split("toolhost-output:")
        .nth(1)
        .map(|rest| &rest[..32])
        .expect("a marker");
    let page = served.call(9, "read_output", json!({"id": id, "limit": 1}));
    assert_eq!(
        page["result"]["content"][0]["text"].as_str().unwrap().len(),
        64
    );
    drop(served);
    let toolhost = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(args)
            .args(["--store", &url])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    assert_eq!(toolhost(&["output", id]).len(), 200_000);
    let echoes = toolhost(&["events", "--json", "--tool", "echo"]);
    assert_eq!(
        String::from_utf8(echoes).unwrap().lines().count(),
        1,
        "recorded once"
    );
}

#[test]
fn r38_a_full_disk_fails_calls_naming_the_store_and_serve_recovers_when_there_is_room() {
    use std::os::unix::process::CommandExt as _;

    let dir = tempfile::tempdir().unwrap();
    let mut served = crate::stdio::Served::start(&[crate::TEXT_TOOLS], dir.path(), |c| {
        // SAFETY: only async-signal-safe calls between fork and exec. A
        // write past the file size limit then fails with EFBIG (as on a
        // full disk) instead of killing the server with SIGXFSZ.
        unsafe {
            c.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let echo = json!({"message": "hi"});
    // The first call opens the embedded store and makes the plugin's
    // memory image (a file too) before the disk fills.
    assert!(served.call(1, "echo", echo.clone()).get("result").is_some());
    crate::event_log::limit_file_size(served.pid(), 1);
    let message = |reply: &Value| {
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    // The store answered last time: the call (its message id minted for
    // it) runs unclaimed, and its one write fails.
    let full = served.call(2, "echo", echo.clone());
    assert!(message(&full).contains("could not record"), "{full}");
    assert!(
        message(&full).contains("store.sqlite3"),
        "names the store: {full}"
    );
    // Now calls claim first, and fail before they run.
    let full = served.call(3, "echo", echo.clone());
    assert!(message(&full).contains("could not claim"), "{full}");
    crate::event_log::limit_file_size(served.pid(), libc::RLIM_INFINITY);
    let back = served.call(4, "echo", echo.clone());
    assert_eq!(back["result"]["content"][0]["text"], "hi", "{back}");
    let unclaimed = served.call(5, "echo", echo);
    assert_eq!(
        unclaimed["result"]["content"][0]["text"], "hi",
        "{unclaimed}"
    );
    drop(served);
    // Nothing recorded twice, nothing lost: the calls that ran and were
    // recorded.
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["events", "--json", "--state-dir"])
        .arg(dir.path().join("outputs"))
        .output()
        .unwrap();
    let listed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(listed.lines().count(), 3, "calls 1, 4 and 5: {listed}");
}
