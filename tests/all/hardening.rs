//! Hardening (R28-R31): a hostile plugin, written against `wit/` without the
//! SDK, pushes on every limit; the host bounds and counts what it sends and
//! stays healthy.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tempfile::TempDir;
use toolhost::config::{DirGrant, Grants, OutputBounds, PluginOptions};
use toolhost::limits::{
    MAX_COUNTED_VIOLATIONS, MAX_HANDLES_PER_CALL, MAX_HOST_COPY_BYTES, MAX_LISTED_VIOLATIONS,
    MAX_MESSAGE_BYTES, MAX_PLUGIN_BYTES,
};
use toolhost::permission::{Approver, Effect, PermissionRequest, Reply, Rule, Rules};
use toolhost::{Activation, BudgetOverrides, Call, Error, Host, Outcome, Settlement, Snapshot};

use crate::{BULK_OUTPUT, CHAOS, HOSTILE, TEXT_TOOLS};
use toolhost_tests::{builder, context, host, load, retained, settle, texts};

/// Options that pick the hostile plugin's activation mode.
fn mode(mode: &str) -> PluginOptions {
    PluginOptions {
        config: json!({ "mode": mode }),
        ..Default::default()
    }
}

#[tokio::test]
async fn r28_activation_messages_are_bounded() {
    let (host, _out) = host();
    let location = host.location("/r28-activation");
    match location.load(HOSTILE, &mode("huge-error")).await {
        Err(Error::Activation { message, .. }) => {
            assert!(message.len() <= 4096 + 200, "{} bytes", message.len());
            assert!(
                message.contains("bytes in all"),
                "{}",
                &message[message.len() - 100..]
            );
        }
        other => panic!("expected an activation error, got {other:?}"),
    }
}

/// A location with the hostile plugin in its default mode, and the host.
async fn hostile(name: &str, options: PluginOptions) -> (Snapshot, Activation, TempDir) {
    let (_, snapshot, activation, state) = hostile_host(name, options).await;
    (snapshot, activation, state)
}

/// As [`hostile`], with the host, to read retained outputs back.
async fn hostile_host(name: &str, options: PluginOptions) -> (Host, Snapshot, Activation, TempDir) {
    let state = tempfile::tempdir().unwrap();
    let host = builder(&state).build().unwrap();
    let location = host.location(format!("/{name}"));
    let activation = location.load(HOSTILE, &options).await.unwrap();
    (host, location.snapshot(), activation, state)
}

/// Options granting `dir`, read-only, as `/data`.
fn data_at_slash_data(dir: &Path) -> PluginOptions {
    PluginOptions {
        grants: Grants {
            dirs: vec![DirGrant::read_only(dir, "/data")],
            ..Default::default()
        },
        ..Default::default()
    }
}

fn message(s: &Settlement) -> &str {
    match &s.outcome {
        Outcome::Error { message, .. } | Outcome::Defect { message, .. } => message,
        other => panic!("expected an error or a defect, got {other:?}"),
    }
}

#[tokio::test]
async fn r28_oversized_registrations_are_refused_before_they_are_parsed() {
    let (host, _out) = host();
    let location = host.location("/r28-registration");
    for (mode, expected) in [
        ("huge-schemas", "per schema"),
        ("many-tools", "at most 1024 tools"),
    ] {
        match location.load(HOSTILE, &self::mode(mode)).await {
            Err(Error::Activation { message, .. }) => {
                assert!(message.contains(expected), "{mode}: {message}");
                assert!(message.len() <= MAX_MESSAGE_BYTES + 100, "{mode}");
            }
            other => panic!("{mode}: expected an activation error, got {other:?}"),
        }
    }
    assert!(location.catalog().is_empty(), "nothing was registered");
}

#[tokio::test]
async fn an_activation_that_kept_no_registration_fails_saying_keep_the_handle() {
    let (host, _out) = host();
    let location = host.location("/dropped-handle");
    match location.load(HOSTILE, &mode("drop-registration")).await {
        Err(Error::RegistrationsDropped { plugin, tools }) => {
            assert_eq!(plugin, "hostile");
            assert!(tools > 0);
        }
        other => panic!("expected RegistrationsDropped, got {other:?}"),
    }
    assert!(location.catalog().is_empty(), "no tool remains");
    // The same plugin keeping its handle activates.
    let _kept = location
        .load(HOSTILE, &PluginOptions::default())
        .await
        .unwrap();
    assert!(!location.catalog().is_empty());
}

#[tokio::test]
async fn r28_violation_lists_are_bounded_and_counting_stops() {
    let (snapshot, _a, _out) = hostile("r28-violations", PluginOptions::default()).await;
    // A million schema violations in the input.
    let numbers = vec!["x"; 1_000_000];
    let s = settle(&snapshot, "sum", json!({ "numbers": numbers })).await;
    let m = message(&s);
    assert_eq!(
        m.matches("\n- /numbers/").count(),
        MAX_LISTED_VIOLATIONS,
        "{m}"
    );
    assert!(
        m.contains(&format!("- and at least {MAX_COUNTED_VIOLATIONS} more")),
        "{m}"
    );
    assert!(m.len() < 16 << 10, "{} bytes", m.len());
    // And a hundred thousand in the output.
    let s = settle(&snapshot, "violations", json!({ "count": 100_000 })).await;
    let m = message(&s);
    assert!(m.contains("does not match its output schema"), "{m}");
    assert!(m.contains("more"), "{m}");
    assert!(m.len() < 16 << 10, "{} bytes", m.len());
}

#[tokio::test]
async fn r28_the_text_bound_applies_to_all_parts_together_and_nothing_is_lost() {
    let (host, snapshot, _a, _out) = hostile_host("r28-parts", PluginOptions::default()).await;
    let s = settle(
        &snapshot,
        "many_parts",
        json!({"count": 2_000, "bytes": 50_000}),
    )
    .await;
    let bounds = OutputBounds::default();
    let shown: usize = texts(&s).iter().map(|t| t.len()).sum();
    let lines: usize = texts(&s).iter().map(|t| t.lines().count()).sum();
    assert!(shown <= bounds.max_bytes, "{shown} bytes reach the model");
    assert!(lines <= bounds.max_lines, "{lines} lines reach the model");
    let Outcome::Completed(c) = &s.outcome else {
        unreachable!()
    };
    // The first part fits whole; the second is previewed in what is left
    // and retained; the other 1,998 are retained together.
    assert_eq!(c.retained.len(), 2);
    let part = "l".repeat(79) + "\n";
    let part = part.repeat(50_000 / 80 + 1)[..50_000].to_owned();
    let first = retained(&host, &s, 0).await;
    assert!(first == part, "{} bytes retained", first.len());
    let rest = retained(&host, &s, 1).await;
    assert!(
        rest == vec![part.as_str(); 1_998].join("\n"),
        "{} bytes retained",
        rest.len()
    );
    assert!(texts(&s)[0] == part, "the first part stays whole");
    assert!(texts(&s).last().unwrap().contains("1998 more text parts"));
}

#[tokio::test]
async fn r28_media_failures_and_machine_output_are_bounded() {
    let (snapshot, _a, _out) = hostile("r28-media", PluginOptions::default()).await;
    let s = settle(
        &snapshot,
        "many_media",
        json!({"count": 20, "bytes": 5 << 20}),
    )
    .await;
    assert!(
        message(&s).contains("bytes of media in one result"),
        "{}",
        message(&s)
    );

    let s = settle(&snapshot, "huge_failure", json!({"bytes": 50 << 20})).await;
    assert!(message(&s).len() <= MAX_MESSAGE_BYTES + 100);
    assert!(
        message(&s).ends_with("bytes in all)"),
        "{}",
        &message(&s)[4000..]
    );

    let s = settle(&snapshot, "huge_output", json!({"bytes": 20 << 20})).await;
    assert!(
        message(&s).contains("machine output") && message(&s).contains("max_machine_output"),
        "{}",
        message(&s)
    );
    // A plugin allowed more gets it.
    let roomy = PluginOptions {
        bounds: Some(OutputBounds {
            max_machine_output: 64 << 20,
            ..OutputBounds::default()
        }),
        ..Default::default()
    };
    let (snapshot, _b, _out2) = hostile("r28-roomy", roomy).await;
    let s = settle(&snapshot, "huge_output", json!({"bytes": 20 << 20})).await;
    assert_eq!(s.outcome.status(), "completed");
}

#[tokio::test]
async fn r28_oversized_permission_requests_are_refused() {
    let (snapshot, _a, _out) = hostile("r28-ask", PluginOptions::default()).await;
    let many: Vec<String> = (0..1_000).map(|i| format!("/f{i}")).collect();
    let s = settle(
        &snapshot,
        "ask",
        json!({"action": "edit", "resources": many, "save": []}),
    )
    .await;
    assert!(
        message(&s).starts_with("Permission denied: edit"),
        "{}",
        message(&s)
    );
    assert!(message(&s).contains("at most 64"), "{}", message(&s));
}

#[tokio::test]
async fn r28_a_shadow_stack_overflow_is_named_as_likely_one() {
    let (snapshot, _a, _out) = hostile("r28-stack", PluginOptions::default()).await;
    let s = settle(&snapshot, "deep_frames", json!({"depth": 1_000})).await;
    assert!(
        message(&s).contains("often a stack overflow in the guest"),
        "{}",
        message(&s)
    );
}

/// Answers "always" and records what it was shown.
#[derive(Default)]
struct Always {
    shown: Mutex<Vec<PermissionRequest>>,
}

impl Approver for Always {
    fn ask<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        self.shown.lock().unwrap().push(request.clone());
        Box::pin(async { Reply::Always })
    }
}

fn asking(action: &str, resource: &str, save: &[&str]) -> serde_json::Value {
    json!({"action": action, "resources": [resource], "save": save})
}

#[tokio::test]
async fn r29_always_saves_only_what_was_shown_for_that_session_and_plugin() {
    let outputs = tempfile::tempdir().unwrap();
    let approver = Arc::new(Always::default());
    let host = builder(&outputs)
        .approver(approver.clone())
        .rules(Rules(vec![Rule::new("edit", "/etc/shadow", Effect::Deny)]))
        .build()
        .unwrap();
    let location = host.location("/r29");
    let _h = location
        .load(HOSTILE, &PluginOptions::default())
        .await
        .unwrap();
    let snapshot = location.snapshot();
    let ask = |input, session: &str| {
        let call = Call::new(
            "ask",
            serde_json::to_string(&input).unwrap(),
            context(session),
        );
        snapshot.settle(call)
    };
    // The escalation attempt: edit README.md, but save "*".
    let s = ask(asking("edit", "README.md", &["*"]), "ses-a").await;
    assert_eq!(s.outcome.status(), "completed");
    {
        let shown = approver.shown.lock().unwrap();
        assert_eq!(shown[0].save, ["*"], "the approver sees what always saves");
        assert_eq!(shown[0].broader_saves(), ["*"], "and that it is broader");
        assert_eq!(shown[0].plugin, "hostile");
    }
    // A deny rule still wins over any saved answer.
    let s = ask(asking("edit", "/etc/shadow", &[]), "ses-a").await;
    assert_eq!(message(&s), "Permission denied: edit /etc/shadow");
    // Another session asks again: saved answers do not travel.
    let s = ask(asking("edit", "/srv/x", &[]), "ses-b").await;
    assert_eq!(s.outcome.status(), "completed");
    assert_eq!(approver.shown.lock().unwrap().len(), 2);
    // Another plugin in the same session asks again too.
    let _c = location
        .load(CHAOS, &PluginOptions::default())
        .await
        .unwrap();
    let chaos = location.snapshot();
    let call = Call::new(
        "ask",
        json!({"action": "edit", "resource": "/srv/y"}).to_string(),
        context("ses-a"),
    );
    assert_eq!(chaos.settle(call).await.outcome.status(), "completed");
    assert_eq!(approver.shown.lock().unwrap().len(), 3);
    // And "always" for an exact resource saves exactly that resource.
    let s = ask(asking("read", "/work/a", &["/work/a"]), "ses-c").await;
    assert_eq!(s.outcome.status(), "completed");
    assert!(approver.shown.lock().unwrap()[3].broader_saves().is_empty());
    ask(asking("read", "/work/a", &[]), "ses-c").await;
    assert_eq!(approver.shown.lock().unwrap().len(), 4, "saved, not asked");
    ask(asking("read", "/work/b", &[]), "ses-c").await;
    assert_eq!(
        approver.shown.lock().unwrap().len(),
        5,
        "not covered, asked"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn r31_grants_reach_only_regular_files_and_directories() {
    let data = tempfile::tempdir().unwrap();
    let fifo = data.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::write(data.path().join("plain.txt"), "hello").unwrap();
    let (snapshot, _a, _out) = hostile("r31-fifo", data_at_slash_data(data.path())).await;
    // Opening a FIFO would block a host thread until a writer came: it is
    // refused at once, with an error to the guest and a warning.
    let s = settle(&snapshot, "read_path", json!({"path": "/data/fifo"})).await;
    assert_eq!(s.outcome.status(), "error", "{:?}", s.outcome);
    assert!(
        message(&s).contains("cannot read /data/fifo"),
        "{}",
        message(&s)
    );
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("not a regular file or directory")),
        "{:?}",
        s.warnings
    );
    let s = settle(&snapshot, "read_path", json!({"path": "/data/plain.txt"})).await;
    assert_eq!(texts(&s), ["read 5 bytes"]);
}

#[tokio::test]
async fn r31_one_call_cannot_exhaust_the_hosts_descriptors() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("f.txt"), "x").unwrap();
    let (snapshot, _a, _out) = hostile("r31-handles", data_at_slash_data(data.path())).await;
    let s = settle(
        &snapshot,
        "open_many",
        json!({"path": "/data/f.txt", "count": 20_000}),
    )
    .await;
    let report = texts(&s)[0].to_owned();
    let opened: usize = report
        .strip_prefix("opened ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{report}"));
    assert!(opened < MAX_HANDLES_PER_CALL, "{report}");
    assert!(
        s.warnings.iter().any(|w| w.contains("handles")),
        "{:?}",
        s.warnings
    );
    // The call's handles are gone with its instance; the host still loads
    // and runs plugins.
    let (host, _out2) = host();
    let location = host.location("/r31-after");
    let _t = load(&location, TEXT_TOOLS).await;
    let s = settle(&location.snapshot(), "echo", json!({"message": "fine"})).await;
    assert_eq!(s.outcome.status(), "completed");
}

#[cfg(unix)]
#[tokio::test]
async fn r31_the_loader_reads_only_regular_files_under_a_cap() {
    let (host, _out) = host();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("plugin.wasm");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let big = dir.path().join("big.wasm");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(MAX_PLUGIN_BYTES + 1)
        .unwrap();
    let options = PluginOptions::default();
    for (path, expected) in [
        (fifo.as_path(), "is a FIFO, not a file"),
        (Path::new("/dev/zero"), "is a device, not a file"),
        (dir.path(), "is a directory, not a file"),
        (big.as_path(), "is larger than"),
    ] {
        match host.compile(path, &options).await {
            Err(Error::Load(e)) => assert!(e.to_string().contains(expected), "{e}"),
            other => panic!("{}: expected a load error, got {other:?}", path.display()),
        }
    }
}

#[cfg(unix)]
#[tokio::test]
async fn r28_retained_outputs_are_private_capped_and_never_behind_a_symlink() {
    use std::os::unix::fs::PermissionsExt as _;

    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state/toolhost");
    let host = Host::builder()
        .state_dir(&state)
        .retention_quota(300_000)
        .build()
        .unwrap();
    let location = host.location("/r28-retention");
    let _a = load(&location, BULK_OUTPUT).await;
    let snapshot = location.snapshot();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let mut settled = Vec::new();
    for _ in 0..5 {
        let s = settle(&snapshot, "generate", json!({"bytes": 100_000})).await;
        assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
        settled.push(s);
    }
    // The store lives in a directory only this user may enter.
    assert_eq!(mode(&state), 0o700);
    // The quota holds: the oldest were evicted, the newest kept.
    let mut kept = 0;
    for s in &settled {
        let Outcome::Completed(c) = &s.outcome else {
            unreachable!()
        };
        let text = host
            .retained(&s.context.session_id, &c.retained[0].reference)
            .await
            .unwrap();
        kept += text.map_or(0, |t| t.len());
    }
    assert!(kept <= 300_000, "{kept}");
    assert_eq!(retained(&host, &settled[4], 0).await.len(), 100_000);
    let Outcome::Completed(first) = &settled[0].outcome else {
        unreachable!()
    };
    let evicted = host.retained(&settled[0].context.session_id, &first.retained[0].reference);
    assert_eq!(evicted.await.unwrap(), None, "the oldest was evicted");
    // One output over the whole quota fails operationally, losing nothing.
    let s = settle(&snapshot, "generate", json!({"bytes": 400_000})).await;
    assert!(message(&s).contains("retention quota"), "{}", message(&s));

    // A symlink planted where the state directory should be is refused.
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let planted = root.path().join("planted");
    std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
    let host = Host::builder().state_dir(&planted).build().unwrap();
    let location = host.location("/r28-symlink");
    let _b = load(&location, BULK_OUTPUT).await;
    let s = settle(&location.snapshot(), "generate", json!({"bytes": 100_000})).await;
    assert!(message(&s).contains("symbolic link"), "{}", message(&s));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[tokio::test]
async fn r28_values_over_the_host_copy_limit_name_it() {
    let roomy = PluginOptions {
        overrides: BudgetOverrides {
            memory: Some(1 << 30),
            ..Default::default()
        },
        bounds: Some(OutputBounds {
            max_machine_output: 1 << 30,
            ..OutputBounds::default()
        }),
        ..Default::default()
    };
    let (snapshot, _a, _out) = hostile("r28-host-copy", roomy).await;
    let bytes = MAX_HOST_COPY_BYTES + (1 << 20);
    let s = settle(&snapshot, "huge_output", json!({ "bytes": bytes })).await;
    assert_eq!(s.outcome.status(), "defect");
    assert!(message(&s).contains("host-copy limit"), "{}", message(&s));
}
