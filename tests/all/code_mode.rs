//! Code Mode (R34): `execute` runs a model's program in the interpreter
//! component; the program's tool calls settle as child calls.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::config::PluginOptions;
use toolhost::{
    Budget, BudgetOverrides, Call, CancellationToken, ContentPart, Host, Interruption, Location,
    Outcome, Settlement, Snapshot, Tool, ToolResponse,
};
use toolhost_tests::{Recorder, builder, context, error_message, load, text};

use crate::{CHAOS, INTERPRETER, TEXT_TOOLS};

/// A compile cache the Code Mode tests share, so the interpreter (7 MB of
/// wasm) is compiled once per test run rather than once per host.
fn cache_dir() -> PathBuf {
    static WARM: OnceLock<PathBuf> = OnceLock::new();
    WARM.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("code-mode-cache");
        let outputs = tempfile::tempdir().unwrap();
        // Compiles once and stores the result; later hosts load it.
        builder(&outputs)
            .cache_dir(&dir)
            .code_mode(std::fs::read(INTERPRETER).unwrap())
            .build()
            .expect("a host with Code Mode");
        dir
    })
    .clone()
}

/// Everything one test needs: a host with Code Mode and text-tools and
/// chaos loaded, and the events it recorded.
struct CodeHost {
    location: Location,
    events: Arc<Recorder>,
    _outputs: tempfile::TempDir,
    _activations: Vec<toolhost::Activation>,
}

async fn code_host(budget: Budget) -> CodeHost {
    let outputs = tempfile::tempdir().unwrap();
    let events = Arc::new(Recorder::default());
    let host: Host = builder(&outputs)
        .cache_dir(cache_dir())
        .budget(budget)
        .event_sink(events.clone())
        .code_mode(std::fs::read(INTERPRETER).unwrap())
        .build()
        .expect("a host with Code Mode");
    let location = host.location("/work/code-mode");
    let activations = vec![
        load(&location, TEXT_TOOLS).await,
        load(&location, CHAOS).await,
    ];
    CodeHost {
        location,
        events,
        _outputs: outputs,
        _activations: activations,
    }
}

async fn run(snapshot: &Snapshot, code: &str) -> Settlement {
    snapshot
        .settle(Call::new(
            "execute",
            json!({ "code": code }).to_string(),
            context("exec-1"),
        ))
        .await
}

fn assert_interrupted(settlement: &Settlement, reason: Interruption) {
    assert!(
        matches!(&settlement.outcome, Outcome::Interrupted { reason: r } if *r == reason),
        "expected interrupted ({reason}), got {:?}",
        settlement.outcome
    );
}

#[tokio::test]
async fn r34_concurrent_calls_are_child_calls_of_execute() {
    let host = code_host(Budget::default()).await;
    let snapshot = host.location.snapshot();
    let settled = run(
        &snapshot,
        r#"
        const texts = ["one two", "three four five", "six"];
        const counts = await Promise.all(texts.map(text => tools.word_count({ text })));
        return counts.reduce((sum, c) => sum + c.words, 0);
        "#,
    )
    .await;
    assert_eq!(text(&settled), "6");
    let events = host.events.settled();
    let children: Vec<&Settlement> = events.iter().filter(|s| s.tool == "word_count").collect();
    assert_eq!(children.len(), 3, "{events:?}");
    let mut ids: Vec<&str> = children
        .iter()
        .map(|s| s.context.call_id.as_str())
        .collect();
    ids.sort();
    assert_eq!(ids, ["exec-1/1", "exec-1/2", "exec-1/3"]);
    let parent = events
        .iter()
        .find(|s| s.tool == "execute")
        .expect("the parent");
    for child in &children {
        assert_eq!(child.context.session_id, "ses-exec-1");
        assert_eq!(child.context.message_id, parent.context.message_id);
        assert_eq!(child.context.agent, "tester");
        assert_eq!(child.outcome.status(), "completed");
    }
    // The parent is recorded after its children.
    assert_eq!(events.last().unwrap().tool, "execute");
}

#[tokio::test]
async fn r34_typed_outputs_chain_and_console_lines_are_content() {
    let host = code_host(Budget::default()).await;
    let settled = run(
        &host.location.snapshot(),
        r#"
        const found = await tools.regex_search({ pattern: "b+", text: "abbbc" });
        console.log("found", found);
        const echoed = await tools.echo({ message: found.matches.map(m => m.text).join(",") });
        return { echoed: echoed.message };
        "#,
    )
    .await;
    let content = text(&settled);
    assert!(content.starts_with("found {"), "{content}");
    assert!(content.ends_with(r#"{"echoed":"bbb"}"#), "{content}");
}

#[tokio::test]
async fn r34_a_caught_tool_failure_lets_the_program_continue() {
    let host = code_host(Budget::default()).await;
    let settled = run(
        &host.location.snapshot(),
        r#"
        try {
            await tools.fail({ message: "boom" });
        } catch (e) {
            console.log("caught:", e.message);
        }
        return (await tools.echo({ message: "after" })).message;
        "#,
    )
    .await;
    assert_eq!(text(&settled), "caught: boom\n\"after\"");
    let failed = host.events.of("fail");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].outcome.status(), "error");
}

#[tokio::test]
async fn r34_schema_violations_reach_the_model_with_pointer_paths() {
    let host = code_host(Budget::default()).await;
    let settled = run(
        &host.location.snapshot(),
        "console.log('before');\nawait tools.word_count({ text: 5 });",
    )
    .await;
    let message = error_message(&settled);
    assert!(message.starts_with("Error: "), "{message}");
    assert!(message.contains("/text"), "{message}");
    // The console so far is the partial snapshot.
    let Outcome::Error { partial, .. } = &settled.outcome else {
        unreachable!()
    };
    assert_eq!(partial.as_ref().unwrap()["console"], "before\n");
}

#[tokio::test]
async fn r34_unknown_tools_and_syntax_errors_are_model_visible() {
    let host = code_host(Budget::default()).await;
    let snapshot = host.location.snapshot();
    let unknown = error_message(&run(&snapshot, "await tools.nope({});").await).to_owned();
    assert!(unknown.contains("Unknown tool: nope"), "{unknown}");
    // `execute` cannot call itself.
    let nested =
        error_message(&run(&snapshot, "await tools.execute({ code: '1' });").await).to_owned();
    assert!(nested.contains("Unknown tool: execute"), "{nested}");
    let syntax = error_message(&run(&snapshot, "const a = 1;\n  let x = ;\n").await).to_owned();
    assert!(syntax.starts_with("SyntaxError"), "{syntax}");
    assert!(syntax.contains("(line 2, column"), "{syntax}");
    let thrown =
        error_message(&run(&snapshot, "throw new TypeError('bad input');").await).to_owned();
    assert_eq!(thrown, "TypeError: bad input");
}

#[tokio::test]
async fn r34_denied_permission_rejects_the_promise() {
    let host = code_host(Budget::default()).await;
    let settled = run(
        &host.location.snapshot(),
        r#"
        try {
            await tools.ask({ action: "deploy", resource: "prod" });
            return "allowed";
        } catch (e) {
            return e.message;
        }
        "#,
    )
    .await;
    let returned = text(&settled);
    assert!(
        returned.contains("Permission denied: deploy prod"),
        "{returned}"
    );
}

#[tokio::test]
async fn r34_a_program_that_loops_forever_is_interrupted_by_its_deadline() {
    let budget = Budget {
        timeout: Duration::from_millis(500),
        ..Budget::default()
    };
    let host = code_host(budget).await;
    let started = Instant::now();
    let settled = run(&host.location.snapshot(), "while (true) {}").await;
    assert_interrupted(&settled, Interruption::Deadline);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn r34_cancelling_a_spinning_program_interrupts_it_promptly() {
    let host = code_host(Budget {
        fuel: 1 << 50,
        ..Budget::default()
    })
    .await;
    // A native tool the program calls before it spins: once that call has
    // settled, the program is running.
    let about_to_spin = Tool::native("Says so", json!({"type": "object"}), None, |_, _| {
        std::future::ready(Ok(ToolResponse {
            content: Some(vec![ContentPart::text("spinning")]),
            ..Default::default()
        }))
    })
    .unwrap();
    let _about_to_spin = host
        .location
        .register([("spinning", about_to_spin)])
        .unwrap();
    let snapshot = host.location.snapshot();
    let cancel = CancellationToken::new();
    let call = Call::new(
        "execute",
        json!({ "code": "await tools.spinning({}); while (true) {}" }).to_string(),
        context("exec-1"),
    )
    .with_cancel(cancel.clone());
    let settle = tokio::spawn(async move { snapshot.settle(call).await });
    host.events
        .until("the program to call `spinning`", |r| {
            !r.of("spinning").is_empty()
        })
        .await;
    let cancelled = Instant::now();
    cancel.cancel();
    let settled = settle.await.unwrap();
    // Fuel yields every 50,000 units: the interpreter stops within about
    // a millisecond; the bound is loose for a loaded CI machine.
    assert!(
        cancelled.elapsed() < Duration::from_secs(2),
        "{:?}",
        cancelled.elapsed()
    );
    assert_interrupted(&settled, Interruption::Cancelled);
}

#[tokio::test]
async fn r34_cancelling_execute_interrupts_the_program_and_its_calls_in_flight() {
    // Fuel enough that only the cancel stops the spinning calls.
    let host = code_host(Budget {
        fuel: 1 << 50,
        ..Budget::default()
    })
    .await;
    // A native tool that says when the program reached it, then waits.
    let arrived = Arc::new(tokio::sync::Notify::new());
    let signal = arrived.clone();
    let waiter = Tool::native(
        "Wait forever",
        json!({"type": "object"}),
        None,
        move |_, _| {
            signal.notify_one();
            std::future::pending()
        },
    )
    .unwrap();
    let _waiter = host.location.register([("wait_here", waiter)]).unwrap();
    let snapshot = host.location.snapshot();
    let cancel = CancellationToken::new();
    let program =
        "await Promise.all([tools.spin_forever({}), tools.spin_forever({}), tools.wait_here({})]);";
    let call = Call::new(
        "execute",
        json!({ "code": program }).to_string(),
        context("exec-1"),
    )
    .with_cancel(cancel.clone());
    let settle = tokio::spawn(async move { snapshot.settle(call).await });
    // Both spinning calls were started before the program reached `wait_here`.
    arrived.notified().await;
    let cancelled = Instant::now();
    cancel.cancel();
    let settled = settle.await.unwrap();
    assert!(cancelled.elapsed() < Duration::from_secs(5));
    assert_interrupted(&settled, Interruption::Cancelled);
    let spun = host.events.of("spin_forever");
    assert_eq!(spun.len(), 2, "each nested call records its own outcome");
    for s in spun {
        assert_interrupted(&s, Interruption::Cancelled);
    }
}

#[tokio::test]
async fn r34_a_nested_defect_rejects_with_a_message_that_says_so() {
    let host = code_host(Budget::default()).await;
    let settled = run(
        &host.location.snapshot(),
        "try { await tools.panic({}); } catch (e) { return e.message; }",
    )
    .await;
    let returned = text(&settled);
    assert!(
        returned.contains("the call of `panic` failed"),
        "{returned}"
    );
    let panicked = host.events.of("panic");
    assert_eq!(panicked[0].outcome.status(), "defect");
}

#[tokio::test]
async fn r34_unbounded_allocation_is_a_defect_and_the_host_stays_healthy() {
    let budget = Budget {
        memory: 64 << 20,
        ..Budget::default()
    };
    let host = code_host(budget).await;
    let snapshot = host.location.snapshot();
    let settled = run(
        &snapshot,
        "const all = []; const s = 'x'.repeat(1 << 20); while (true) { all.push(s + all.length); }",
    )
    .await;
    match &settled.outcome {
        Outcome::Defect { message, .. } => assert!(message.contains("memory"), "{message}"),
        other => panic!("expected a defect, got {other:?}"),
    }
    assert_eq!(settled.usage.tripped, Some(toolhost::Limit::Memory));
    let after = run(
        &snapshot,
        "return (await tools.echo({ message: 'ok' })).message;",
    )
    .await;
    assert_eq!(text(&after), "\"ok\"");
}

#[tokio::test]
async fn r34_an_allocation_too_large_to_make_is_the_memory_limit_named() {
    let host = code_host(Budget::default()).await;
    let snapshot = host.location.snapshot();
    // Each asks for a buffer past what a wasm32 allocation can be (its size
    // overflows), so it fails before the allocator, and memory.grow, is
    // asked; 'x'.repeat(100 * 1024 * 1024) reaches memory.grow and was
    // always the memory limit.
    for code in [
        "return 'x'.repeat(200 * 1024 * 1024).length;",
        "return 'x'.padEnd(2 ** 31).length;",
        "const a = []; a.length = 2 ** 32 - 1; return a.join('xx').length;",
    ] {
        let settled = run(&snapshot, code).await;
        let Outcome::Defect { message, culprit } = &settled.outcome else {
            panic!("{code}: expected a defect, got {:?}", settled.outcome);
        };
        assert!(
            matches!(culprit, toolhost::outcome::Culprit::Guest(d) if matches!(d.kind, toolhost::outcome::DefectKind::MemoryLimit(_))),
            "{code}: {culprit:?}"
        );
        assert!(
            message.contains("memory limit of 256 MiB"),
            "{code}: {message}"
        );
        assert_eq!(
            settled.usage.tripped,
            Some(toolhost::Limit::Memory),
            "{code}"
        );
    }
    let after = run(&snapshot, "return 1 + 1;").await;
    assert_eq!(text(&after), "2");
}

#[tokio::test]
async fn r34_ten_megabytes_of_console_output_is_bounded_and_retained() {
    let host = code_host(Budget::default()).await;
    let settled = run(
        &host.location.snapshot(),
        "const line = 'x'.repeat(99); for (let i = 0; i < 100000; i++) console.log(line);",
    )
    .await;
    let Outcome::Completed(completed) = &settled.outcome else {
        panic!("{:?}", settled.outcome)
    };
    let shown: usize = text(&settled).len();
    assert!(
        shown < 100 << 10,
        "the model sees a bounded part: {shown} bytes"
    );
    assert_eq!(completed.retained.len(), 1);
    // 100,000 lines of 100 bytes, without the last newline.
    assert_eq!(completed.retained[0].bytes, 9_999_999);
    let kept = host
        .location
        .retained(
            &settled.context.session_id,
            &completed.retained[0].reference,
        )
        .await
        .unwrap()
        .expect("kept");
    assert_eq!(kept.len(), 9_999_999);
}

#[tokio::test]
async fn r34_programs_get_no_capabilities() {
    let host = code_host(Budget::default()).await;
    let settled = run(
        &host.location.snapshot(),
        "return [Date.now(), typeof fetch, typeof require, typeof setTimeout, typeof process];",
    )
    .await;
    assert_eq!(
        text(&settled),
        r#"[0,"undefined","undefined","undefined","undefined"]"#
    );
}

/// The declarations `execute` shows for the example plugins, checked
/// against a snapshot file; `TOOLHOST_BLESS=1` rewrites it.
#[tokio::test]
async fn r34_declarations_match_the_snapshot_file() {
    let host = code_host(Budget::default()).await;
    let snapshot = host.location.snapshot();
    let execute = snapshot
        .definitions()
        .iter()
        .find(|d| d.name == "execute")
        .expect("execute is advertised");
    assert_eq!(
        execute.input_schema["required"],
        json!(["code"]),
        "{execute:?}"
    );
    let declarations = execute
        .description
        .split_once("\n\n")
        .expect("a description, then the declarations")
        .1;
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/snapshots/code-mode-declarations.d.ts");
    if std::env::var_os("TOOLHOST_BLESS").is_some() {
        std::fs::write(&file, format!("{declarations}\n")).unwrap();
    }
    let expected = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        declarations,
        expected.trim_end(),
        "the declarations changed; check them and rerun with TOOLHOST_BLESS=1"
    );
    assert!(declarations.contains(
        "function word_count(input: {text: string}): Promise<{bytes: number, lines: number, words: number}>;"
    ));
}

#[tokio::test]
async fn r34_execute_is_advertised_only_when_enabled() {
    let (host, _outputs) = toolhost_tests::host();
    let location = host.location("/work/plain");
    let _text = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot();
    assert!(snapshot.definitions().iter().all(|d| d.name != "execute"));
    let settled = run(&snapshot, "return 1;").await;
    assert_eq!(error_message(&settled), "Unknown tool: execute");
    let code = code_host(Budget::default()).await;
    let names: Vec<String> = code
        .location
        .snapshot()
        .definitions()
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert!(names.contains(&"execute".to_owned()), "{names:?}");
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted: {names:?}");
}

#[tokio::test]
async fn r34_the_parent_fuel_bounds_the_interpreter() {
    let budget = Budget {
        fuel: 50_000_000,
        ..Budget::default()
    };
    let host = code_host(budget).await;
    let settled = run(
        &host.location.snapshot(),
        "let i = 0; while (true) { i++; }",
    )
    .await;
    assert_interrupted(&settled, Interruption::Fuel);
    assert_eq!(settled.usage.tripped, Some(toolhost::Limit::Fuel));
}

#[tokio::test]
async fn r34_a_nested_call_past_its_deadline_rejects_and_is_recorded_as_interrupted() {
    let outputs = tempfile::tempdir().unwrap();
    let events = Arc::new(Recorder::default());
    let host = builder(&outputs)
        .cache_dir(cache_dir())
        .event_sink(events.clone())
        .code_mode(std::fs::read(INTERPRETER).unwrap())
        .build()
        .unwrap();
    let location = host.location("/work/nested-deadline");
    let options = PluginOptions {
        overrides: BudgetOverrides {
            timeout: Some(Duration::from_millis(300)),
            ..BudgetOverrides::default()
        },
        ..PluginOptions::default()
    };
    let _chaos = location.load(CHAOS, &options).await.unwrap();
    let settled = run(
        &location.snapshot(),
        "try { await tools.spin_forever({}); } catch (e) { return e.message; }",
    )
    .await;
    assert_eq!(
        text(&settled),
        "\"the call of `spin_forever` was interrupted: deadline exceeded\""
    );
    let spun = events.of("spin_forever");
    assert_eq!(spun.len(), 1);
    assert_interrupted(&spun[0], Interruption::Deadline);
}

#[test]
fn r34_cli_call_takes_code_mode() {
    let dirs = tempfile::tempdir().unwrap();
    let toolhost = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(args)
            .arg("--cache-dir")
            .arg(cache_dir())
            .arg("--state-dir")
            .arg(dirs.path())
            .output()
            .unwrap()
    };
    let program = json!({
        "code": "const c = await tools.word_count({ text: 'a b c' });\nconsole.log('counted');\nreturn c.words * 2;"
    })
    .to_string();
    let out = toolhost(&[
        "call",
        TEXT_TOOLS,
        "execute",
        "--code-mode",
        "--input",
        &program,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "counted\n6\n");
    let bad = json!({ "code": "return 1 +;" }).to_string();
    let out = toolhost(&[
        "call",
        TEXT_TOOLS,
        "execute",
        "--code-mode",
        "--input",
        &bad,
    ]);
    assert_eq!(out.status.code(), Some(1), "a tool error: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SyntaxError") && stderr.contains("(line 1, column"),
        "{stderr}"
    );
    // Without the flag there is no `execute`.
    let out = toolhost(&["call", TEXT_TOOLS, "execute", "--input", &program]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Unknown tool: execute"));
}

#[tokio::test]
async fn r34_runaway_recursion_ends_the_program_with_an_error_the_model_can_fix() {
    let host = code_host(Budget::default()).await;
    let settled = run(
        &host.location.snapshot(),
        "function down(n) { return down(n + 1) + 1; }\nreturn down(0);",
    )
    .await;
    let message = error_message(&settled);
    assert!(
        message.starts_with("the program was stopped: ")
            && message.contains("recursive calls")
            && message.contains("400 nested calls"),
        "{message}"
    );
}

#[tokio::test]
async fn r34_a_program_is_limited_in_tool_calls() {
    let host = code_host(Budget::default()).await;
    let snapshot = host.location.snapshot();
    let settled = run(
        &snapshot,
        r#"
        const all = await Promise.allSettled(
            Array.from({ length: 65 }, () => tools.echo({ message: "x" })));
        const rejected = all.filter(r => r.status === "rejected");
        return [rejected.length, rejected[0].reason.message];
        "#,
    )
    .await;
    assert_eq!(
        text(&settled),
        r#"[1,"a program may have at most 64 tool calls in flight; await some before starting more"]"#
    );
    let settled = run(
        &snapshot,
        r#"
        for (let i = 0; i < 1000; i++) await tools.echo({ message: "x" });
        try { await tools.echo({ message: "one too many" }); } catch (e) { return e.message; }
        "#,
    )
    .await;
    assert_eq!(
        text(&settled),
        r#""a program may make at most 1000 tool calls""#
    );
}

#[tokio::test]
async fn r34_bracket_nesting_is_bounded_before_the_parser_can_overflow() {
    let host = code_host(Budget::default()).await;
    let snapshot = host.location.snapshot();
    let nested = |depth: usize| format!("return {}1{};", "(".repeat(depth), ")".repeat(depth));
    assert_eq!(text(&run(&snapshot, &nested(64)).await), "1");
    let refused =
        error_message(&run(&snapshot, &format!("\n{}", nested(100_000))).await).to_owned();
    assert!(
        refused.starts_with("SyntaxError: brackets nest more than 64 deep")
            && refused.ends_with("(line 2, column 72)"),
        "{refused}"
    );
}

/// The interpreter's first compile (seconds, on an empty compile cache)
/// is the host's, not the program's: a short deadline still runs the
/// program, and the compile is kept for the next run.
#[test]
fn r34_a_cold_compile_cache_does_not_count_against_the_programs_deadline() {
    let dirs = tempfile::tempdir().unwrap();
    let cold_cache = dirs.path().join("cache");
    let toolhost = || {
        let started = Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["call", TEXT_TOOLS, "execute", "--code-mode"])
            .args(["--timeout", "1s", "--input", r#"{"code":"return 1+1"}"#])
            .arg("--cache-dir")
            .arg(&cold_cache)
            .arg("--state-dir")
            .arg(dirs.path().join("state"))
            .output()
            .unwrap();
        (out, started.elapsed())
    };
    let (first, compiling) = toolhost();
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert_eq!(String::from_utf8_lossy(&first.stdout), "2\n");
    assert!(
        compiling > Duration::from_secs(1),
        "the compile took longer than the deadline it must not count against ({compiling:?})"
    );
    let (second, _) = toolhost();
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    assert_eq!(String::from_utf8_lossy(&second.stdout), "2\n");
}
