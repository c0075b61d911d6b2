//! Capability rules R25-R27 with real plugins and hostile attempts.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{CHAOS, FS_TOOLS};
use serde_json::{Value, json};
use toolhost::config::PluginOptions;
use toolhost::config::{DirGrant, EnvGrant, Grants};
use toolhost::limits::MAX_CAPTURED_BYTES;
use toolhost::permission::{Approver, Effect, PermissionRequest, Reply, Rule, Rules};
use toolhost::{Call, Outcome, Settlement, Snapshot};
use toolhost_tests::{builder, context, error_message, host, load, settle, text};

/// A workspace with a file inside, a secret outside, and a symlink out.
struct Sandbox {
    _root: tempfile::TempDir,
    inside: std::path::PathBuf,
    secret: std::path::PathBuf,
}

fn sandbox() -> Sandbox {
    let root = tempfile::tempdir().unwrap();
    let inside = root.path().join("granted");
    std::fs::create_dir(&inside).unwrap();
    std::fs::write(inside.join("notes.txt"), "alpha\nbeta needle\ngamma\n").unwrap();
    let secret = root.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&secret, inside.join("link.txt")).unwrap();
    Sandbox {
        _root: root,
        inside,
        secret,
    }
}

async fn fs_snapshot(
    host: &toolhost::Host,
    grants: Grants,
    rules: Rules,
) -> (Snapshot, toolhost::Activation) {
    let location = host.location(format!("/fs-{}", rand_name()));
    let options = PluginOptions {
        grants,
        rules,
        ..Default::default()
    };
    let activation = location.load(FS_TOOLS, &options).await.unwrap();
    (location.snapshot(), activation)
}

fn rand_name() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

#[tokio::test]
async fn r25_nothing_is_granted_by_default_and_stdio_is_captured() {
    let (host, _out) = host();
    let location = host.location("/r25");
    let _c = load(&location, CHAOS).await;
    let _f = load(&location, FS_TOOLS).await;
    let snapshot = location.snapshot();

    // No environment: not even PATH or HOME, which the host has.
    assert!(std::env::var_os("PATH").is_some());
    let s = settle(&snapshot, "read_env", json!({"name": "PATH"})).await;
    match &s.outcome {
        Outcome::Completed(c) => assert_eq!(c.output, Some(json!({"value": null}))),
        other => panic!("{other:?}"),
    }
    // No filesystem at all.
    for path in ["/etc/passwd", "/", "notes.txt", "../etc/passwd"] {
        let s = settle(&snapshot, "read_file", json!({"path": path})).await;
        assert_eq!(s.outcome.status(), "error", "{path}: {:?}", s.outcome);
    }
    // Guest stdout/stderr are captured per call, not inherited.
    let s = settle(
        &snapshot,
        "print",
        json!({"stdout": "to stdout", "stderr": "to stderr"}),
    )
    .await;
    assert_eq!(text(&s), "printed");
    assert_eq!(s.logs.stdout, "to stdout");
    assert_eq!(s.logs.stderr, "to stderr");
    // ...and bounded: a flood is cut, counted, and the call still completes.
    let s = settle(
        &snapshot,
        "print",
        json!({"stdout": "x".repeat(1000), "stderr": "", "repeat": 1000}),
    )
    .await;
    assert_eq!(text(&s), "printed");
    assert_eq!(s.logs.stdout.len(), MAX_CAPTURED_BYTES);
    assert_eq!(s.logs.dropped_bytes, 1_000_000 - MAX_CAPTURED_BYTES as u64);
}

#[tokio::test]
async fn r25_environment_grants_pass_only_the_named_variables() {
    let (host, _out) = host();
    let location = host.location("/r25-env");
    let options = PluginOptions {
        grants: Grants {
            env: vec![
                EnvGrant {
                    name: "MODE".into(),
                    value: Some("test".into()),
                },
                EnvGrant {
                    name: "PATH".into(),
                    value: None,
                },
            ],
            ..Default::default()
        },
        ..Default::default()
    };
    let _c = location.load(CHAOS, &options).await.unwrap();
    let snapshot = location.snapshot();
    let value = |s: Settlement| match s.outcome {
        Outcome::Completed(c) => c.output.unwrap()["value"].clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        value(settle(&snapshot, "read_env", json!({"name": "MODE"})).await),
        json!("test")
    );
    let path = std::env::var("PATH").unwrap();
    assert_eq!(
        value(settle(&snapshot, "read_env", json!({"name": "PATH"})).await),
        json!(path)
    );
    assert_eq!(
        value(settle(&snapshot, "read_env", json!({"name": "HOME"})).await),
        Value::Null
    );
}

#[tokio::test]
async fn r26_a_read_only_grant_reads_inside_and_nothing_else() {
    let (host, _out) = host();
    let sb = sandbox();
    let allow_edits = Rules(vec![Rule::new("edit", "*", Effect::Allow)]);
    let grants = Grants {
        dirs: vec![DirGrant::read_only(&sb.inside, "/data")],
        ..Default::default()
    };
    let (snapshot, _a) = fs_snapshot(&host, grants, allow_edits).await;

    let s = settle(&snapshot, "read_file", json!({"path": "/data/notes.txt"})).await;
    assert!(text(&s).contains("beta needle"));
    let s = settle(
        &snapshot,
        "grep",
        json!({"pattern": "needle", "path": "/data"}),
    )
    .await;
    assert!(text(&s).contains("needle"), "{}", text(&s));

    for hostile in [
        "/data/../secret.txt",
        "/data/../../etc/passwd",
        "/etc/passwd",
        "/data/link.txt",
        sb.secret.to_str().unwrap(),
    ] {
        let s = settle(&snapshot, "read_file", json!({"path": hostile})).await;
        let message = error_message(&s);
        assert!(
            !message.contains("top secret") && !message.contains("root:"),
            "{hostile}: {message}"
        );
    }
    // A read-only grant refuses writes, even with permission.
    let s = settle(
        &snapshot,
        "write_file",
        json!({"path": "/data/new.txt", "content": "x"}),
    )
    .await;
    error_message(&s);
    assert!(!sb.inside.join("new.txt").exists());
    let s = settle(
        &snapshot,
        "write_file",
        json!({"path": "/data/notes.txt", "content": "overwritten"}),
    )
    .await;
    error_message(&s);
    assert_eq!(
        std::fs::read_to_string(sb.inside.join("notes.txt")).unwrap(),
        "alpha\nbeta needle\ngamma\n"
    );
}

#[tokio::test]
async fn r26_a_read_write_grant_writes_inside_only() {
    let (host, _out) = host();
    let sb = sandbox();
    let allow_edits = Rules(vec![Rule::new("edit", "*", Effect::Allow)]);
    let grants = Grants {
        dirs: vec![DirGrant::read_write(&sb.inside, "/data")],
        ..Default::default()
    };
    let (snapshot, _a) = fs_snapshot(&host, grants, allow_edits).await;
    let s = settle(
        &snapshot,
        "write_file",
        json!({"path": "/data/new.txt", "content": "written"}),
    )
    .await;
    assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
    assert_eq!(
        std::fs::read_to_string(sb.inside.join("new.txt")).unwrap(),
        "written"
    );
    for hostile in ["/data/../escaped.txt", "/data/link.txt", "/tmp/escaped.txt"] {
        let s = settle(
            &snapshot,
            "write_file",
            json!({"path": hostile, "content": "pwned"}),
        )
        .await;
        error_message(&s);
    }
    assert_eq!(std::fs::read_to_string(&sb.secret).unwrap(), "top secret");
    assert!(!sb.inside.parent().unwrap().join("escaped.txt").exists());
}

#[test]
fn r27_rules_last_match_wins_and_wildcards_cross_slashes() {
    let rules = Rules(vec![
        Rule::new("*", "*", Effect::Ask),
        Rule::new("edit", "/work/*", Effect::Allow),
        Rule::new("edit", "/work/secrets/*", Effect::Deny),
        Rule::new("read", "/tmp/file?.txt", Effect::Allow),
    ]);
    assert_eq!(
        rules.evaluate("edit", "/work/src/deep/main.rs"),
        Effect::Allow
    );
    assert_eq!(rules.evaluate("edit", "/work/secrets/key"), Effect::Deny);
    assert_eq!(rules.evaluate("edit", "/elsewhere"), Effect::Ask);
    assert_eq!(rules.evaluate("read", "/tmp/file1.txt"), Effect::Allow);
    assert_eq!(rules.evaluate("read", "/tmp/file12.txt"), Effect::Ask);
    assert_eq!(
        Rules::default().evaluate("edit", "x"),
        Effect::Ask,
        "no match means ask"
    );
}

/// Answers with `reply` and counts the questions.
struct Scripted {
    reply: Reply,
    asked: AtomicUsize,
}

impl Approver for Scripted {
    fn ask<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        assert_eq!(request.action, "edit");
        assert_eq!(request.tool, "write_file");
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { self.reply })
    }
}

#[tokio::test]
async fn r27_permission_requests_follow_rules_and_the_approver() {
    let sb = sandbox();
    let grants = Grants {
        dirs: vec![DirGrant::read_write(&sb.inside, "/data")],
        ..Default::default()
    };
    let write = |name: &str| json!({"path": format!("/data/{name}"), "content": "x"});

    // No rule and no approver: ask becomes deny, and nothing is written.
    let (host, _out) = host();
    let (snapshot, _a) = fs_snapshot(&host, grants.clone(), Rules::default()).await;
    let s = settle(&snapshot, "write_file", write("a.txt")).await;
    assert_eq!(error_message(&s), "Permission denied: edit /data/a.txt");
    assert!(!sb.inside.join("a.txt").exists());

    // An explicit deny wins over an earlier allow (last match wins).
    let rules = Rules(vec![
        Rule::new("edit", "/data/*", Effect::Allow),
        Rule::new("edit", "/data/locked*", Effect::Deny),
    ]);
    let (snapshot, _b) = fs_snapshot(&host, grants.clone(), rules).await;
    assert_eq!(
        settle(&snapshot, "write_file", write("b.txt"))
            .await
            .outcome
            .status(),
        "completed"
    );
    let s = settle(&snapshot, "write_file", write("locked.txt")).await;
    assert_eq!(
        error_message(&s),
        "Permission denied: edit /data/locked.txt"
    );

    // The approver: reject, once, always (saved for the session).
    for (reply, expect_written, expect_asked) in [
        (Reply::Reject, false, 2),
        (Reply::Once, true, 2),
        (Reply::Always, true, 1),
    ] {
        let outputs = tempfile::tempdir().unwrap();
        let approver = Arc::new(Scripted {
            reply,
            asked: AtomicUsize::new(0),
        });
        let host = builder(&outputs)
            .approver(approver.clone())
            .build()
            .unwrap();
        let (snapshot, _c) = fs_snapshot(&host, grants.clone(), Rules::default()).await;
        let name = format!("{reply:?}.txt");
        for i in 0..2 {
            // Same session both times: "always" covers the second request.
            let call = Call::new(
                "write_file",
                write(&name).to_string(),
                context("same-session"),
            );
            let s = snapshot.settle(call).await;
            assert_eq!(
                s.outcome.status() == "completed",
                expect_written,
                "{reply:?} #{i}: {:?}",
                s.outcome
            );
        }
        assert_eq!(
            approver.asked.load(Ordering::SeqCst),
            expect_asked,
            "{reply:?}"
        );
        assert_eq!(sb.inside.join(&name).exists(), expect_written);
    }
}
