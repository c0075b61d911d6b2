//! The durable event log (`serve --events`, `JsonLinesSink`): whole lines
//! under every failure, bounded outcome lines, rotation at a size.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use toolhost::events::JsonLinesSink;
use toolhost::{Call, Outcome};
use toolhost_tests::{builder, context, load};

use crate::TEXT_TOOLS;
use crate::stdio::Served;

/// Every line of `path` as JSON; fails the test on any line that is not.
fn parse_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "a torn last line");
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line).unwrap_or_else(|e| {
                panic!(
                    "line {} of {} is not JSON ({e}): {line:.200}",
                    i + 1,
                    path.display()
                )
            })
        })
        .collect()
}

fn outcome_ids(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["event"] == "outcome")
        .map(|l| l["context"]["call_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The size limit the kernel puts on files `pid` writes (`RLIMIT_FSIZE`);
/// a write crossing it is cut short, the next fails with `EFBIG`.
pub(crate) fn limit_file_size(pid: u32, bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit only reads `limit`; the pid is our own child's.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

#[test]
fn r19_a_write_the_disk_cuts_short_never_tears_a_line_of_the_event_log() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let events_arg = events.to_str().unwrap();
    // The file size limit holds for every file the server writes: its store
    // is a Postgres server's, whose files another process writes.
    let postgres = toolhost_tests::postgres::Postgres::start();
    let store = postgres.url();
    let args = [TEXT_TOOLS, "--events", events_arg, "--store", &store];
    let mut served = Served::start(&args, dir.path(), |c| {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: only async-signal-safe calls between fork and exec. A
        // file growing past the limit then fails with EFBIG (as on a full
        // disk) instead of killing the server with SIGXFSZ.
        unsafe {
            c.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let message = "m".repeat(300);
    // A first call instantiates the plugin, whose memory image is a file
    // too (a memfd): it must not meet the limit.
    let first = served.call(1, "echo", json!({"message": message}));
    assert!(first.get("result").is_some(), "{first}");
    let mut completed = vec![1];
    // The disk is nearly full: a few more outcome lines fit, then a write
    // stops halfway through a line.
    let used = std::fs::metadata(&events).unwrap().len();
    limit_file_size(served.pid(), used + 2048);
    let mut failed = None;
    for id in 2..=20 {
        let reply = served.call(id, "echo", json!({"message": message}));
        if reply.get("error").is_some() {
            failed = Some(reply);
            break;
        }
        completed.push(id);
    }
    let failed = failed.expect("the file size limit was reached within 20 calls");
    assert!(completed.len() > 1, "some outcomes fit before the limit");
    assert_eq!(failed["error"]["code"], -32002, "{failed}");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("event sink"),
        "{failed}"
    );
    // Space is freed: the next calls complete and their outcomes follow
    // the last complete line.
    limit_file_size(served.pid(), libc::RLIM_INFINITY);
    for id in 30..33 {
        let reply = served.call(id, "echo", json!({"message": message}));
        assert!(reply.get("result").is_some(), "{reply}");
        completed.push(id);
    }
    drop(served);
    let lines = parse_lines(&events);
    let ids: Vec<String> = completed.iter().map(|id| id.to_string()).collect();
    let logged = outcome_ids(&lines);
    assert!(
        logged.iter().all(|id| ids.contains(id)) && ids.iter().all(|id| logged.contains(id)),
        "the log has exactly the outcomes that were answered: {logged:?} vs {ids:?}"
    );
}

#[tokio::test]
async fn r37_an_outcome_line_holds_the_bounded_content_and_references_not_the_output() {
    let outputs = tempfile::tempdir().unwrap();
    let log = outputs.path().join("events.jsonl");
    let sink = Arc::new(JsonLinesSink::open(&log).unwrap());
    let host = builder(&outputs).event_sink(sink.clone()).build().unwrap();
    let location = host.location("/event-log-bounded");
    let _t = load(&location, TEXT_TOOLS).await;
    let big = "w".repeat(4 << 20);
    let input = json!({ "message": big }).to_string();
    let s = location
        .snapshot()
        .settle(Call::new("echo", input, context("bounded")))
        .await;
    let Outcome::Completed(done) = &s.outcome else {
        panic!("{:?}", s.outcome);
    };
    assert!(done.output.is_some(), "the settlement keeps the output");
    let line_bytes = std::fs::metadata(&log).unwrap().len();
    let lines = parse_lines(&log);
    let outcome = lines.iter().find(|l| l["event"] == "outcome").unwrap();
    assert!(
        line_bytes < 128 << 10,
        "a 4 MiB output made a {line_bytes}-byte log"
    );
    assert!(outcome.get("output").is_none(), "no output in the log");
    assert!(outcome["output_bytes"].as_u64().unwrap() > 4 << 20);
    let reference = outcome["retained"][0]["reference"].as_str().unwrap();
    assert_eq!(reference, done.retained[0].reference);
    assert_eq!(
        outcome["content"],
        serde_json::to_value(&done.content).unwrap()
    );
}

#[tokio::test]
async fn r37_the_event_log_rotates_at_its_size_keeping_a_bounded_number_of_segments() {
    let outputs = tempfile::tempdir().unwrap();
    let log = outputs.path().join("events.jsonl");
    let sink = Arc::new(
        JsonLinesSink::builder(&log)
            .rotate_bytes(4 << 10)
            .segments(2)
            .open()
            .unwrap(),
    );
    let host = builder(&outputs).event_sink(sink.clone()).build().unwrap();
    let location = host.location("/event-log-rotates");
    let _t = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot();
    for i in 0..60 {
        let input = json!({ "message": "r".repeat(200) }).to_string();
        let s = snapshot
            .settle(Call::new("echo", input, context(&format!("rot-{i}"))))
            .await;
        assert_eq!(s.outcome.status(), "completed");
    }
    drop((snapshot, location, _t, host, sink));
    let segment = |n: usize| outputs.path().join(format!("events.jsonl.{n}"));
    assert!(!segment(3).exists(), "only two rotated segments are kept");
    let mut ids = Vec::new();
    for path in [segment(2), segment(1), log.clone()] {
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= 4 << 10, "{} has {size} bytes", path.display());
        ids.extend(outcome_ids(&parse_lines(&path)));
    }
    // The segments hold the latest outcomes, oldest first, none twice.
    let expected: Vec<String> = (60 - ids.len()..60).map(|i| format!("rot-{i}")).collect();
    assert_eq!(ids, expected);
    assert!(ids.len() >= 10, "{ids:?}");
}
