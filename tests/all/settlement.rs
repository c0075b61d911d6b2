//! Settlement rules R13-R19 and R24, driven through real wasm plugins.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::{BULK_OUTPUT, CHAOS, PROGRESS_IN_ACTIVATE, TEXT_TOOLS};
use serde_json::{Value, json};
use toolhost::config::OutputBounds;
use toolhost::events::{EventSink, JsonLinesSink, ProgressEvent, SinkFuture};
use toolhost::hooks::{AfterHook, HookCall};
use toolhost::outcome::{Culprit, ErrorKind, FaultKind, HostFault};
use toolhost::{Call, ContentPart, Outcome, Settlement, Tool, ToolResponse};
use toolhost_tests::{builder, completed, context, host, load, retained, settle, text};

/// Lines as the bounds count them: breaks, plus an unterminated last line.
fn count_lines(text: &str) -> usize {
    text.lines().count()
}

fn within(text: &str, bounds: &OutputBounds) -> bool {
    text.len() <= bounds.max_bytes && count_lines(text) <= bounds.max_lines
}

fn error(s: &Settlement) -> (&str, ErrorKind, Option<&Value>) {
    match &s.outcome {
        Outcome::Error {
            message,
            kind,
            partial,
            ..
        } => (message, *kind, partial.as_ref()),
        other => panic!("expected error, got {other:?}"),
    }
}

/// A native tool with a run counter, to prove what never ran.
fn counted(runs: Arc<AtomicUsize>) -> Tool {
    Tool::native(
        "counts its runs",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        None,
        move |_, _| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(ToolResponse {
                    output: Some(json!("ran")),
                    ..Default::default()
                })
            }
        },
    )
    .unwrap()
}

/// A native tool returning `response` whatever the input.
fn returning(output_schema: Option<Value>, response: ToolResponse) -> Tool {
    Tool::native(
        "fixed",
        json!({"type": "object"}),
        output_schema,
        move |_, _| {
            let response = response.clone();
            async move { Ok(response) }
        },
    )
    .unwrap()
}

#[tokio::test]
async fn r13_invalid_input_lists_each_violation_and_the_tool_never_runs() {
    let (host, _out) = host();
    let location = host.location("/r13");
    let _a = load(&location, TEXT_TOOLS).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let _n = location
        .register([("counted", counted(runs.clone()))])
        .unwrap();
    let snapshot = location.snapshot();

    let s = settle(&snapshot, "echo", json!({"message": 5, "extra": true})).await;
    let (message, kind, _) = error(&s);
    assert_eq!(kind, ErrorKind::InvalidInput);
    assert!(
        message.contains("- /message: 5 is not of type \"string\""),
        "{message}"
    );
    assert!(
        message.contains(r#"Arguments given: {"extra":true,"message":5}"#),
        "{message}"
    );
    assert!(message.contains("call the tool again"), "{message}");
    assert_eq!(s.usage.wall_time, std::time::Duration::ZERO);

    let s = settle(&snapshot, "counted", json!({"n": "x"})).await;
    let (message, kind, _) = error(&s);
    assert_eq!(kind, ErrorKind::InvalidInput);
    assert!(message.contains("/n"), "{message}");
    let s = settle(&snapshot, "counted", json!({})).await;
    assert!(
        error(&s).0.contains("\"n\" is a required property"),
        "{}",
        error(&s).0
    );

    let s = snapshot
        .settle(Call::new("counted", "{\"n\": 1", context("malformed")))
        .await;
    let (message, kind, _) = error(&s);
    assert_eq!(kind, ErrorKind::MalformedInput);
    assert!(message.contains("not valid JSON"), "{message}");
    assert!(message.contains("Arguments given: {\"n\": 1"), "{message}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "invalid input never executes"
    );

    let s = settle(&snapshot, "counted", json!({"n": 1})).await;
    completed(&s);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn r14_output_violating_the_output_schema_is_never_success() {
    let (host, _out) = host();
    let location = host.location("/r14");
    let _a = load(&location, CHAOS).await;
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let _n = location
        .register([
            (
                "missing",
                returning(
                    Some(schema.clone()),
                    ToolResponse {
                        content: Some(vec![ContentPart::text("x")]),
                        ..Default::default()
                    },
                ),
            ),
            (
                "valid",
                returning(
                    Some(schema),
                    ToolResponse {
                        output: Some(json!({"n": 1})),
                        ..Default::default()
                    },
                ),
            ),
        ])
        .unwrap();
    let snapshot = location.snapshot();
    let s = settle(&snapshot, "bad_output", json!({})).await;
    let (message, kind, _) = error(&s);
    assert_eq!(kind, ErrorKind::InvalidOutput);
    assert!(message.contains("/count"), "{message}");
    assert!(
        message.contains("does not match its output schema"),
        "{message}"
    );

    let s = settle(&snapshot, "missing", json!({})).await;
    assert_eq!(error(&s).1, ErrorKind::InvalidOutput);
    let s = settle(&snapshot, "valid", json!({})).await;
    assert_eq!(completed(&s).output, Some(json!({"n": 1})));
}

#[tokio::test]
async fn r15_content_is_kept_or_derived_once_and_never_empty() {
    let (host, _out) = host();
    let location = host.location("/r15");
    let _a = load(&location, CHAOS).await;
    let given = vec![ContentPart::text("given")];
    let _n = location
        .register([
            (
                "string_output",
                returning(
                    None,
                    ToolResponse {
                        output: Some(json!("plain text")),
                        ..Default::default()
                    },
                ),
            ),
            (
                "object_output",
                returning(
                    None,
                    ToolResponse {
                        output: Some(json!({"a": [1, 2]})),
                        ..Default::default()
                    },
                ),
            ),
            (
                "given",
                returning(
                    None,
                    ToolResponse {
                        output: Some(json!({"a": 1})),
                        content: Some(given.clone()),
                        ..Default::default()
                    },
                ),
            ),
            ("nothing", returning(None, ToolResponse::default())),
        ])
        .unwrap();
    let snapshot = location.snapshot();
    let s = settle(&snapshot, "string_output", json!({})).await;
    assert_eq!(completed(&s).content, [ContentPart::text("plain text")]);
    let s = settle(&snapshot, "object_output", json!({})).await;
    assert_eq!(completed(&s).content, [ContentPart::text(r#"{"a":[1,2]}"#)]);
    assert_eq!(completed(&s).output, Some(json!({"a": [1, 2]})));
    let s = settle(&snapshot, "given", json!({})).await;
    assert_eq!(completed(&s).content, given);
    for tool in ["nothing", "no_content"] {
        let s = settle(&snapshot, tool, json!({})).await;
        match &s.outcome {
            Outcome::Defect { message, .. } => assert!(message.contains("content"), "{message}"),
            other => panic!("{tool}: expected defect, got {other:?}"),
        }
    }
}

/// The one text `s` retained.
async fn retained_text(host: &toolhost::Host, s: &toolhost::Settlement) -> String {
    assert_eq!(completed(s).retained.len(), 1);
    retained(host, s, 0).await
}

#[tokio::test]
async fn r16_big_output_is_retained_whole_and_previewed_head_marker_tail() {
    let (host, _out) = host();
    let location = host.location("/r16");
    let _a = load(&location, BULK_OUTPUT).await;
    let s = settle(
        &location.snapshot(),
        "generate",
        json!({"bytes": 10_000_000}),
    )
    .await;
    let c = completed(&s);
    let preview = text(&s);
    let bounds = OutputBounds::default();
    assert!(preview.len() <= bounds.max_bytes, "{}", preview.len());
    assert!(count_lines(&preview) <= bounds.max_lines);
    let full = retained_text(&host, &s).await;
    assert_eq!(full.len(), 10_000_000);
    assert_eq!(c.retained[0].bytes, 10_000_000);
    let reference = &c.retained[0].reference;
    assert!(reference.starts_with("toolhost-output:"));
    // Only the session that produced it may read it.
    let elsewhere = host.retained("another-session", reference).await.unwrap();
    assert_eq!(elsewhere, None);
    let (head, rest) = preview.split_once("[... ").unwrap();
    let (marker, tail) = rest.split_once(" ...]\n").unwrap();
    assert!(full.starts_with(head) && full.ends_with(tail));
    assert!(head.ends_with('\n') && !head.is_empty() && !tail.is_empty());
    let omitted = full.len() - head.len() - tail.len();
    let omitted_lines = full[head.len()..full.len() - tail.len()]
        .matches('\n')
        .count();
    assert_eq!(
        marker,
        format!(
            "{omitted_lines} lines ({omitted} bytes) omitted; full output retained as {reference}"
        )
    );
    // Split evenly: head and tail take the same share of lines.
    assert!(
        count_lines(head).abs_diff(count_lines(tail)) <= 1,
        "{} vs {}",
        count_lines(head),
        count_lines(tail)
    );
}

#[tokio::test]
async fn r16_utf8_is_cut_only_at_boundaries_and_retained_byte_for_byte() {
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs)
        .bounds(OutputBounds {
            max_lines: 10,
            max_bytes: 1_000,
            ..OutputBounds::default()
        })
        .build()
        .unwrap();
    let location = host.location("/r16-utf8");
    let one_line = "日本語é".repeat(10_000);
    let many_lines: String = (0..100).map(|i| format!("行 {i} ü\n")).collect();
    let _n = location
        .register([
            (
                "one_line",
                returning(
                    None,
                    ToolResponse {
                        output: Some(json!(one_line.clone())),
                        ..Default::default()
                    },
                ),
            ),
            (
                "many_lines",
                returning(
                    None,
                    ToolResponse {
                        output: Some(json!(many_lines.clone())),
                        ..Default::default()
                    },
                ),
            ),
        ])
        .unwrap();
    let snapshot = location.snapshot();
    let s = settle(&snapshot, "one_line", json!({})).await;
    assert_eq!(
        retained_text(&host, &s).await,
        one_line,
        "retained byte for byte"
    );
    let preview = text(&s);
    let (head, rest) = preview.split_once("\n[... ").unwrap();
    let tail = rest.split_once(" ...]\n").unwrap().1;
    assert!(one_line.starts_with(head) && one_line.ends_with(tail));
    assert!(
        head.len() > 300 && tail.len() > 300,
        "{} {}",
        head.len(),
        tail.len()
    );

    let s = settle(&snapshot, "many_lines", json!({})).await;
    assert_eq!(retained_text(&host, &s).await, many_lines);
    let preview = text(&s);
    assert!(
        preview.starts_with("行 0 ü\n行 1 ü\n行 2 ü\n行 3 ü\n[... 92 lines"),
        "{preview}"
    );
    assert!(
        preview.ends_with("...]\n行 96 ü\n行 97 ü\n行 98 ü\n行 99 ü\n"),
        "{preview}"
    );
    assert!(count_lines(&preview) <= 10);
}

#[tokio::test]
async fn r16_media_is_untouched_and_oversized_media_rejected() {
    let (host, _out) = host();
    let location = host.location("/r16-media");
    let _a = load(&location, CHAOS).await;
    let snapshot = location.snapshot();
    let s = settle(&snapshot, "media", json!({"bytes": 1_000_000})).await;
    let c = completed(&s);
    assert!(c.retained.is_empty());
    let media = c
        .content
        .iter()
        .find_map(|p| match p {
            ContentPart::Media { data, .. } => Some(data),
            _ => None,
        })
        .unwrap();
    assert_eq!(media.len(), 1_000_000);
    let s = settle(&snapshot, "media", json!({"bytes": 6 << 20})).await;
    match &s.outcome {
        Outcome::Defect { message, .. } => assert!(message.contains("media part"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn r16_retention_failure_is_operational_never_lossy() {
    // A store with no room for the output: the call fails, the host named.
    let state = tempfile::tempdir().unwrap();
    let host = builder(&state).retention_quota(50_000).build().unwrap();
    let location = host.location("/r16-fail");
    let _a = load(&location, BULK_OUTPUT).await;
    let s = settle(&location.snapshot(), "generate", json!({"bytes": 100_000})).await;
    let (message, kind) = host_fault(&s);
    assert!(
        message.contains("cannot retain oversized output"),
        "{message}"
    );
    assert_eq!(kind, FaultKind::Retention);
    // Small output needs no retention and still succeeds.
    let s = settle(&location.snapshot(), "generate", json!({"bytes": 1_000})).await;
    completed(&s);

    // A state directory that is a file: no store, so no call can be
    // recorded, and each fails operationally naming the store.
    let file = state.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let broken = toolhost::Host::builder().state_dir(&file).build().unwrap();
    let location = broken.location("/r16-fail");
    let _b = load(&location, BULK_OUTPUT).await;
    let s = settle(&location.snapshot(), "generate", json!({"bytes": 1_000})).await;
    let (message, kind) = host_fault(&s);
    assert!(message.contains("could not open the store"), "{message}");
    assert!(message.contains("not-a-dir"), "{message}");
    assert_eq!(kind, FaultKind::Store);
}

/// The message and kind of an operational failure of the host.
fn host_fault(s: &toolhost::Settlement) -> (&str, FaultKind) {
    match &s.outcome {
        Outcome::Defect {
            message,
            culprit: Culprit::Host(HostFault { kind, .. }),
        } => (message, *kind),
        other => panic!("expected an operational failure of the host, got {other:?}"),
    }
}

#[tokio::test]
async fn r17_a_tool_failure_keeps_its_metadata_checked_like_success_metadata() {
    let (host, _out) = host();
    let location = host.location("/r17-failure");
    let _a = load(&location, CHAOS).await;
    let snapshot = location.snapshot();
    let input = json!({"message": "no such row", "metadata": {"row": 7, "table": "users"}});
    let s = settle(&snapshot, "fail", input).await;
    match &s.outcome {
        Outcome::Error {
            message, metadata, ..
        } => {
            assert_eq!(message, "no such row");
            assert_eq!(
                metadata.clone().map(Value::Object),
                Some(json!({"row": 7, "table": "users"}))
            );
        }
        other => panic!("{other:?}"),
    }
    let s = settle(
        &snapshot,
        "fail",
        json!({"message": "m", "metadata": [1, 2]}),
    )
    .await;
    assert!(
        matches!(&s.outcome, Outcome::Error { metadata: None, .. }),
        "{:?}",
        s.outcome
    );
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("must be a JSON object")),
        "{:?}",
        s.warnings
    );
}

#[tokio::test]
async fn r17_metadata_must_be_a_small_object_or_is_dropped_with_a_warning() {
    let (host, _out) = host();
    let location = host.location("/r17");
    let _a = load(&location, CHAOS).await;
    let _t = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot();
    let s = settle(&snapshot, "bad_metadata", json!({})).await;
    assert_eq!(completed(&s).metadata, None);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("must be a JSON object")),
        "{:?}",
        s.warnings
    );

    let s = settle(&snapshot, "huge_metadata", json!({"kib": 20})).await;
    assert_eq!(completed(&s).metadata, None);
    assert!(
        s.warnings.iter().any(|w| w.contains("16384-byte limit")),
        "{:?}",
        s.warnings
    );

    let s = settle(&snapshot, "huge_metadata", json!({"kib": 1})).await;
    assert!(completed(&s).metadata.is_some());
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);

    let s = settle(&snapshot, "echo", json!({"message": "hi"})).await;
    assert_eq!(completed(&s).metadata, None, "absent stays absent");
}

struct Rewrite {
    seen_retained: Mutex<Vec<usize>>,
}

impl AfterHook for Rewrite {
    fn after(&self, call: &HookCall<'_>, outcome: &mut Outcome) {
        if let Outcome::Completed(c) = outcome {
            self.seen_retained.lock().unwrap().push(c.retained.len());
            if call.tool == "echo" {
                c.content = vec![ContentPart::text("x\n".repeat(5_000))];
                let mut big = serde_json::Map::new();
                big.insert("padding".into(), json!("y".repeat(20_000)));
                c.metadata = Some(big);
            }
        }
    }
}

#[tokio::test]
async fn r18_after_hooks_see_the_bounded_outcome_and_changes_are_bounded_again() {
    let outputs = tempfile::tempdir().unwrap();
    let hook = Arc::new(Rewrite {
        seen_retained: Mutex::default(),
    });
    let host = builder(&outputs).after_hook(hook.clone()).build().unwrap();
    let location = host.location("/r18");
    let _a = load(&location, BULK_OUTPUT).await;
    let _t = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot();
    // The hook sees the already bounded outcome with its retained reference.
    let s = settle(&snapshot, "generate", json!({"bytes": 200_000})).await;
    assert_eq!(completed(&s).retained.len(), 1);
    // A hook's oversized change is bounded again and retained.
    let s = settle(&snapshot, "echo", json!({"message": "hi"})).await;
    let c = completed(&s);
    assert!(count_lines(&text(&s)) <= 2_000);
    assert!(text(&s).contains("full output retained as toolhost-output:"));
    assert_eq!(retained_text(&host, &s).await, "x\n".repeat(5_000));
    assert_eq!(
        c.metadata, None,
        "a hook's oversized metadata is dropped too"
    );
    assert!(
        s.warnings.iter().any(|w| w.contains("16384-byte limit")),
        "{:?}",
        s.warnings
    );
    assert_eq!(*hook.seen_retained.lock().unwrap(), [1, 0]);
}

#[derive(Default)]
struct Recorder {
    progress: Mutex<Vec<ProgressEvent>>,
    outcomes: Mutex<Vec<Settlement>>,
}

impl EventSink for Recorder {
    fn progress(&self, event: &ProgressEvent) {
        self.progress.lock().unwrap().push(event.clone());
    }
    fn outcome<'a>(&'a self, settlement: &'a Settlement) -> SinkFuture<'a> {
        self.outcomes.lock().unwrap().push(settlement.clone());
        Box::pin(std::future::ready(Ok(())))
    }
}

#[tokio::test]
async fn r19_outcomes_carry_exact_ids_and_errors_keep_the_last_progress() {
    let outputs = tempfile::tempdir().unwrap();
    let sink = Arc::new(Recorder::default());
    let host = builder(&outputs).event_sink(sink.clone()).build().unwrap();
    let location = host.location("/r19");
    let _a = load(&location, CHAOS).await;
    let _t = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot();
    let ctx = toolhost::CallContext::new("ses_01J", "build", "msg_01J", "toolu_42");
    let s = snapshot
        .settle(Call::new("echo", r#"{"message":"hi"}"#, ctx.clone()))
        .await;
    assert_eq!(s.context, ctx);
    assert_eq!(completed(&s).content, [ContentPart::text("hi")]);
    let mut next = ctx.clone();
    next.call_id = "toolu_43".into();
    let s = snapshot
        .settle(Call::new("fail", r#"{"message":"it broke"}"#, next.clone()))
        .await;
    let (message, kind, partial) = error(&s);
    assert_eq!((message, kind), ("it broke", ErrorKind::ToolFailure));
    assert_eq!(partial, Some(&json!({"stage": "before-failure"})));
    let outcomes = sink.outcomes.lock().unwrap();
    assert_eq!(outcomes.len(), 2);
    assert_eq!((&outcomes[0].context, &outcomes[1].context), (&ctx, &next));
    assert_eq!(outcomes[1].outcome.status(), "error");
}

#[test]
fn r19_json_lines_sink_keeps_only_complete_lines_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    // A previous process crashed mid-write: the last line is incomplete.
    std::fs::write(&path, "{\"event\":\"outcome\",\"a\":1}\n{\"event\":\"outc").unwrap();
    let sink = JsonLinesSink::open(&path).unwrap();
    sink.progress(&ProgressEvent {
        context: context("c1"),
        tool: "generate".into(),
        update: json!({"done": 1}),
    });
    drop(sink);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["event"], "progress");
    assert_eq!(lines[1]["context"]["call_id"], "c1");
    assert!(text.ends_with('\n'));
}

#[tokio::test]
async fn r24_progress_reaches_the_sink_while_the_call_runs() {
    let outputs = tempfile::tempdir().unwrap();
    let sink = Arc::new(Recorder::default());
    let host = builder(&outputs).event_sink(sink.clone()).build().unwrap();
    let location = host.location("/r24");
    let _a = load(&location, BULK_OUTPUT).await;
    let s = settle(
        &location.snapshot(),
        "generate",
        json!({"bytes": 3_000_000}),
    )
    .await;
    completed(&s);
    let progress = sink.progress.lock().unwrap();
    assert!(progress.len() >= 2, "{}", progress.len());
    assert!(
        progress
            .iter()
            .all(|p| p.tool == "generate" && p.context == s.context)
    );
    assert!(progress.iter().all(|p| p.update.is_object()));
    let outcomes = sink.outcomes.lock().unwrap();
    assert_eq!(outcomes.len(), 1, "progress came before the one outcome");
}

#[tokio::test]
async fn r16_retained_outputs_older_than_the_retention_age_are_removed() {
    let state = tempfile::tempdir().unwrap();
    let week = builder(&state).build().unwrap();
    let location = week.location("/r16-age");
    let _a = load(&location, BULK_OUTPUT).await;
    let old = settle(&location.snapshot(), "generate", json!({"bytes": 100_000})).await;
    assert_eq!(retained(&week, &old, 0).await.len(), 100_000);
    let written = std::time::SystemTime::now();
    // Once the store's millisecond clock has moved on, an output retained
    // by a host that keeps outputs for no time at all expires the old one.
    toolhost_tests::eventually("the clock to move on", || {
        written
            .elapsed()
            .is_ok_and(|e| e >= std::time::Duration::from_millis(2))
    })
    .await;
    let now = builder(&state)
        .retention(std::time::Duration::ZERO)
        .build()
        .unwrap();
    let location = now.location("/r16-age");
    let _b = load(&location, BULK_OUTPUT).await;
    let fresh = settle(&location.snapshot(), "generate", json!({"bytes": 100_000})).await;
    assert_eq!(
        retained(&now, &fresh, 0).await.len(),
        100_000,
        "the new one is kept"
    );
    let Outcome::Completed(c) = &old.outcome else {
        unreachable!()
    };
    let expired = now.retained(&old.context.session_id, &c.retained[0].reference);
    assert_eq!(expired.await.unwrap(), None, "the expired one is gone");
}

#[tokio::test]
async fn r16_bounds_are_configurable_per_plugin_and_per_tool() {
    let (host, _out) = host();
    let small = OutputBounds {
        max_lines: 10,
        max_bytes: 1_000,
        ..OutputBounds::default()
    };
    let location = host.location("/r16-config");
    let options = toolhost::config::PluginOptions {
        bounds: Some(small),
        ..Default::default()
    };
    let _a = location.load(BULK_OUTPUT, &options).await.unwrap();
    let fifty_lines = "line\n".repeat(50);
    let native = returning(
        None,
        ToolResponse {
            output: Some(json!(fifty_lines.clone())),
            ..Default::default()
        },
    );
    let _n = location
        .register([
            ("default_bounds", native.clone()),
            ("small_bounds", native.with_bounds(small)),
        ])
        .unwrap();
    let snapshot = location.snapshot();
    // 5,000 bytes: within the host's defaults, over this plugin's bounds.
    let s = settle(&snapshot, "generate", json!({"bytes": 5_000})).await;
    let c = completed(&s);
    assert_eq!(c.retained.len(), 1);
    assert!(within(&text(&s), &small));
    let s = settle(&snapshot, "default_bounds", json!({})).await;
    assert!(completed(&s).retained.is_empty());
    let s = settle(&snapshot, "small_bounds", json!({})).await;
    assert_eq!(retained_text(&host, &s).await, fifty_lines);
    assert!(within(&text(&s), &small));
}

#[tokio::test]
async fn r24_progress_outside_a_running_call_is_refused() {
    let (host, _out) = host();
    let location = host.location("/r24-outside");
    let err = location
        .load(
            PROGRESS_IN_ACTIVATE,
            &toolhost::config::PluginOptions::default(),
        )
        .await
        .unwrap_err();
    match &err {
        toolhost::Error::Defect(d) => {
            assert_eq!(d.tool, "activate");
            assert!(
                d.to_string()
                    .contains("used call.progress outside a tool call"),
                "{d}"
            );
        }
        other => panic!("expected a defect, got {other:?}"),
    }
    assert!(location.catalog().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r19_concurrent_outcomes_are_each_durable_exactly_once_when_settle_returns() {
    let outputs = tempfile::tempdir().unwrap();
    let log = outputs.path().join("events.jsonl");
    let sink = Arc::new(JsonLinesSink::open(&log).unwrap());
    let host = builder(&outputs).event_sink(sink.clone()).build().unwrap();
    let location = host.location("/r19-group");
    let _t = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot();
    let calls = (0..64).map(|i| {
        let snapshot = snapshot.clone();
        let log = log.clone();
        tokio::spawn(async move {
            let id = format!("group-{i}");
            let s = snapshot
                .settle(Call::new("echo", r#"{"message":"hi"}"#, context(&id)))
                .await;
            // Durable when settle returns: the line is already in the file.
            let text = std::fs::read_to_string(&log).unwrap();
            assert!(text.contains(&format!("\"call_id\":\"{id}\"")), "{id}");
            s
        })
    });
    for call in calls.collect::<Vec<_>>() {
        assert_eq!(call.await.unwrap().outcome.status(), "completed");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let mut ids: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "outcome")
        .map(|v| v["context"]["call_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let mut expected: Vec<String> = (0..64).map(|i| format!("group-{i}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "each outcome exactly once");
}
