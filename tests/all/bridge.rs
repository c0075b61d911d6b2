//! The MCP bridge (R33): MCP servers as tool sources, registered and settled
//! like plugins. Against `tests/bridge/scripted_server.py` (a hand-written
//! server whose every received message is logged), and against a real
//! `toolhost serve --http` of text-tools (Toolhost bridging Toolhost). The
//! tests against `@modelcontextprotocol/server-everything` are the
//! ignored ones at the end (they need its npm package installed).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolhost::config::McpServerConfig;
use toolhost::outcome::{Culprit, DefectKind, ErrorKind};
use toolhost::permission::{Approver, Effect, PermissionRequest, Reply, Rule, Rules};
use toolhost::registry::Level;
use toolhost::{Call, ContentPart, Interruption, Outcome, Snapshot, Tool, ToolResponse};
use toolhost_mcp::McpConnection;
use toolhost_tests::{Recorder, builder, context, eventually, names, settle, texts, within};

use crate::TEXT_TOOLS;

/// The scripted server, logging to a file in `dir`.
fn scripted(dir: &Path) -> McpServerConfig {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("tests/bridge/scripted_server.py");
    let mut config = McpServerConfig::stdio(
        "scripted",
        "python3",
        [script.to_string_lossy().into_owned()],
    );
    if let toolhost::config::McpTransport::Stdio { env, .. } = &mut config.transport {
        env.insert("LOG".into(), log_path(dir).to_string_lossy().into_owned());
    }
    config
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("server.log")
}

/// The methods (and tool names, for tools/call) the server received.
fn received(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log_path(dir)).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|m| match m["method"].as_str().unwrap_or("(reply)") {
            "tools/call" => format!("tools/call {}", m["params"]["name"].as_str().unwrap()),
            method => method.to_owned(),
        })
        .collect()
}

/// Allows every bridged call without asking.
fn allow_mcp() -> Rules {
    Rules(vec![Rule::new("mcp", "*", Effect::Allow)])
}

/// The scripted server (configured by `configure`) connected to a host
/// that allows every bridged call, at location `place`.
struct Bridged {
    dir: tempfile::TempDir,
    location: toolhost::Location,
    connection: toolhost_mcp::McpConnection,
    _host: toolhost::Host,
    _outputs: tempfile::TempDir,
}

async fn bridged(place: &str, configure: impl FnOnce(&mut McpServerConfig)) -> Bridged {
    let dir = tempfile::tempdir().unwrap();
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs).rules(allow_mcp()).build().unwrap();
    let location = host.location(place);
    let mut config = scripted(dir.path());
    configure(&mut config);
    let connection = McpConnection::connect(&location, config).await.unwrap();
    Bridged {
        dir,
        location,
        connection,
        _host: host,
        _outputs: outputs,
    }
}

/// Waits until the scripted server has received a cancellation.
async fn server_told_of_cancel(dir: &Path) {
    eventually("the server is told", || {
        received(dir).contains(&"notifications/cancelled".to_owned())
    })
    .await;
}

#[tokio::test]
async fn r33_a_servers_tools_are_one_registration_settled_through_the_pipeline() {
    let Bridged {
        dir,
        location,
        connection,
        ..
    } = &bridged("/bridge", |_| {}).await;
    assert!(
        connection.warnings().is_empty(),
        "{:?}",
        connection.warnings()
    );
    assert_eq!(
        connection.info().version,
        "1.0.0",
        "the server's own version"
    );

    let catalog = location.catalog();
    let registrations: Vec<u64> = catalog.iter().map(|e| e.registration).collect();
    assert_eq!(catalog.len(), 4);
    assert!(
        registrations.iter().all(|r| *r == registrations[0]),
        "one registration"
    );
    assert!(catalog.iter().all(|e| e.level == Level::Location));

    let snapshot = location.snapshot();
    assert_eq!(
        names(&snapshot),
        [
            "scripted_count",
            "scripted_grow",
            "scripted_progress",
            "scripted_wait"
        ]
    );
    let s = settle(&snapshot, "scripted_count", json!({"label": "a"})).await;
    assert_eq!(texts(&s), ["call 1"]);
    assert_eq!(s.usage.fuel_used, 0);
    assert!(
        s.warnings.iter().any(|w| w.contains("not metered")),
        "says why there is no fuel: {:?}",
        s.warnings
    );

    // Invalid input never reaches the server.
    let s = settle(&snapshot, "scripted_count", json!({"label": 7})).await;
    assert!(
        matches!(
            &s.outcome,
            Outcome::Error {
                kind: ErrorKind::InvalidInput,
                ..
            }
        ),
        "{:?}",
        s.outcome
    );
    let calls: Vec<String> = received(dir.path())
        .into_iter()
        .filter(|m| m.starts_with("tools/call"))
        .collect();
    assert_eq!(calls, ["tools/call count"]);

    connection.close();
    assert!(
        location.snapshot().definitions().is_empty(),
        "closing closes its tools"
    );
}

/// Answers `reply` and records each question's action and resources.
struct Recording {
    reply: Reply,
    asked: Mutex<Vec<(String, Vec<String>)>>,
}

impl Approver for Recording {
    fn ask<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        self.asked
            .lock()
            .unwrap()
            .push((request.action.clone(), request.resources.clone()));
        Box::pin(async move { self.reply })
    }
}

#[tokio::test]
async fn r33_each_bridged_call_needs_permission_mcp_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let outputs = tempfile::tempdir().unwrap();
    let approver = Arc::new(Recording {
        reply: Reply::Reject,
        asked: Mutex::default(),
    });
    let host = builder(&outputs)
        .approver(approver.clone())
        .build()
        .unwrap();
    let location = host.location("/bridge-permission");
    let mut config = scripted(dir.path());
    config.rules = Rules(vec![Rule::new("mcp", "scripted/grow", Effect::Deny)]);
    let _connection = McpConnection::connect(&location, config).await.unwrap();
    let snapshot = location.snapshot();

    // Default: ask; the approver rejects.
    let s = settle(&snapshot, "scripted_count", json!({})).await;
    let Outcome::Error {
        message,
        kind: ErrorKind::ToolFailure,
        ..
    } = &s.outcome
    else {
        panic!("{:?}", s.outcome);
    };
    assert_eq!(message, "Permission denied: mcp scripted/count");
    assert_eq!(
        *approver.asked.lock().unwrap(),
        [("mcp".to_owned(), vec!["scripted/count".to_owned()])]
    );
    // A deny rule refuses without asking.
    let s = settle(&snapshot, "scripted_grow", json!({})).await;
    assert_eq!(s.outcome.status(), "error");
    assert_eq!(approver.asked.lock().unwrap().len(), 1);
    assert!(
        !received(dir.path())
            .iter()
            .any(|m| m.starts_with("tools/call")),
        "nothing was sent: {:?}",
        received(dir.path())
    );
}

#[tokio::test]
async fn r33_server_progress_is_the_calls_progress_and_cancelling_tells_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let outputs = tempfile::tempdir().unwrap();
    let sink = Arc::new(Recorder::default());
    let host = builder(&outputs)
        .rules(allow_mcp())
        .event_sink(sink.clone())
        .build()
        .unwrap();
    let location = host.location("/bridge-progress");
    let _connection = McpConnection::connect(&location, scripted(dir.path()))
        .await
        .unwrap();
    let snapshot = location.snapshot();

    let s = settle(&snapshot, "scripted_progress", json!({})).await;
    assert_eq!(texts(&s), ["done"]);
    let updates: Vec<Value> = sink.progress().iter().map(|e| e.update.clone()).collect();
    assert_eq!(
        updates,
        [
            json!({"progress": 1.0, "total": 2.0, "message": "step 1"}),
            json!({"progress": 2.0, "total": 2.0, "message": "step 2"}),
        ]
    );

    let cancel = CancellationToken::new();
    let call = Call::new("scripted_wait", "{}", context("wait")).with_cancel(cancel.clone());
    let waiting = tokio::spawn({
        let snapshot = snapshot.clone();
        async move { snapshot.settle(call).await }
    });
    eventually("the server has the call", || {
        received(dir.path()).contains(&"tools/call wait".to_owned())
    })
    .await;
    let cancelled_at = Instant::now();
    cancel.cancel();
    let s = waiting.await.unwrap();
    let settled_in = cancelled_at.elapsed();
    assert_eq!(
        s.outcome,
        Outcome::Interrupted {
            reason: Interruption::Cancelled
        }
    );
    // Settling does not wait for the server (it never answers `wait`).
    assert!(settled_in < Duration::from_secs(1), "{settled_in:?}");
    server_told_of_cancel(dir.path()).await;
}

#[tokio::test]
async fn r33_a_deadline_interrupts_a_bridged_call() {
    let b = bridged("/bridge-deadline", |c| {
        c.timeout = Some(Duration::from_millis(300));
    })
    .await;
    let s = settle(&b.location.snapshot(), "scripted_wait", json!({})).await;
    assert_eq!(
        s.outcome,
        Outcome::Interrupted {
            reason: Interruption::Deadline
        }
    );
    server_told_of_cancel(b.dir.path()).await;
}

#[tokio::test]
async fn r33_a_server_that_crashes_mid_call_fails_it_closes_its_tools_and_comes_back() {
    let Bridged {
        location,
        connection,
        ..
    } = &bridged("/bridge-crash", |_| {}).await;
    let snapshot = location.snapshot();
    assert_eq!(
        texts(&settle(&snapshot, "scripted_count", json!({})).await),
        ["call 1"]
    );

    // The second call makes the server exit without answering.
    let s = settle(&snapshot, "scripted_count", json!({})).await;
    let Outcome::Defect {
        message,
        culprit: Culprit::Guest(defect),
    } = &s.outcome
    else {
        panic!("an operational failure, got {:?}", s.outcome);
    };
    assert!(
        matches!(defect.kind, DefectKind::McpServer(_)),
        "{defect:?}"
    );
    assert!(
        message.contains("MCP server `scripted`"),
        "names the server: {message}"
    );

    // Its tools close; the bridge reconnects (a fresh process) and they return.
    let mut saw_gap = false;
    eventually("the tools are back", || {
        let now = names(&location.snapshot());
        saw_gap |= now.is_empty();
        saw_gap && !now.is_empty()
    })
    .await;
    assert!(connection.is_connected());
    let s = settle(&location.snapshot(), "scripted_count", json!({})).await;
    assert_eq!(texts(&s), ["call 1"], "the new process counts afresh");
}

#[tokio::test]
async fn r33_a_changed_tool_list_swaps_the_registration_without_a_gap() {
    let Bridged { location, .. } = &bridged("/bridge-changed", |_| {}).await;
    let before = location.catalog()[0].registration;
    assert_eq!(
        texts(&settle(&location.snapshot(), "scripted_grow", json!({})).await),
        ["grown"]
    );
    eventually("extra is listed", || {
        let now = names(&location.snapshot());
        // Never a gap: the old tools stay until the new registration is in.
        assert!(now.contains(&"scripted_count".to_owned()), "{now:?}");
        now.contains(&"scripted_extra".to_owned())
    })
    .await;
    let catalog = location.catalog();
    assert_eq!(catalog.len(), 5, "the old registration closed: {catalog:?}");
    assert!(catalog.iter().all(|e| e.registration > before));
    let s = settle(&location.snapshot(), "scripted_extra", json!({})).await;
    assert_eq!(texts(&s), ["extra"]);
}

#[tokio::test]
async fn r33_bridged_tools_shadow_and_reveal_like_any_registration() {
    let dir = tempfile::tempdir().unwrap();
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs).rules(allow_mcp()).build().unwrap();
    let location = host.location("/bridge-overlay");
    let native = Tool::native(
        "A native count",
        json!({"type": "object"}),
        None,
        |_, _| async {
            Ok(ToolResponse {
                content: Some(vec![ContentPart::text("native")]),
                ..Default::default()
            })
        },
    )
    .unwrap();
    let _native = location.register([("scripted_count", native)]).unwrap();
    let connection = McpConnection::connect(&location, scripted(dir.path()))
        .await
        .unwrap();
    // Latest wins (R3).
    let s = settle(&location.snapshot(), "scripted_count", json!({})).await;
    assert_eq!(texts(&s), ["call 1"]);
    // Closing the connection reveals the earlier registration (R4, R7).
    let kept = location.snapshot();
    drop(connection);
    let s = settle(&location.snapshot(), "scripted_count", json!({})).await;
    assert_eq!(texts(&s), ["native"]);
    // A snapshot taken before keeps its captured tool (R6); the server is
    // gone, so the call fails naming it rather than hanging.
    let s = settle(&kept, "scripted_count", json!({})).await;
    assert_eq!(s.outcome.status(), "defect", "{:?}", s.outcome);
}

/// A running `toolhost serve --http`; killed when dropped, so a failing
/// test leaves no server behind.
struct Served {
    child: std::process::Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `toolhost serve --http` of `sources` (and `args`) on a free port, with
/// an event log in `dir`.
fn serve(dir: &Path, sources: &[&str], args: &[&str]) -> Served {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("serve")
        .args(sources)
        .args(["--http", "127.0.0.1:0", "--no-cache", "--events"])
        .arg(dir.join("events.jsonl"))
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = lines
        .map_while(Result::ok)
        .find_map(|l| {
            l.split_once("serving MCP at ")
                .map(|(_, u)| u.trim().to_owned())
        })
        .expect("serve prints its URL");
    Served { child, url }
}

#[tokio::test]
async fn r33_toolhost_bridges_toolhost_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path(), &[TEXT_TOOLS], &[]);
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs).rules(allow_mcp()).build().unwrap();

    let direct = host.location("/direct");
    let _plugin = toolhost_tests::load(&direct, TEXT_TOOLS).await;
    let bridged = host.location("/bridged");
    let mut config = McpServerConfig::http("inner", served.url.clone());
    config.prefix = Some(String::new());
    let _connection = McpConnection::connect(&bridged, config).await.unwrap();

    let input = json!({"pattern": "t[a-z]+", "text": "tools that talk"});
    let here = settle(&direct.snapshot(), "regex_search", input.clone()).await;
    let there = settle(&bridged.snapshot(), "regex_search", input).await;
    let (Outcome::Completed(here), Outcome::Completed(there)) = (&here.outcome, &there.outcome)
    else {
        panic!("{:?} / {:?}", here.outcome, there.outcome);
    };
    assert_eq!(there.output, here.output, "the same machine output");
    assert_eq!(there.content, here.content);
    let schema = |s: Snapshot| {
        let d = s
            .definitions()
            .iter()
            .find(|d| d.name == "regex_search")
            .cloned();
        d.unwrap().input_schema
    };
    assert_eq!(schema(bridged.snapshot()), schema(direct.snapshot()));

    // Rejected here, so the inner server records no call for it.
    let s = settle(&bridged.snapshot(), "regex_search", json!({"pattern": 1})).await;
    assert!(
        matches!(
            &s.outcome,
            Outcome::Error {
                kind: ErrorKind::InvalidInput,
                ..
            }
        ),
        "{:?}",
        s.outcome
    );
    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    let outcomes = events
        .lines()
        .filter(|l| l.starts_with(r#"{"event":"outcome""#))
        .count();
    assert_eq!(
        outcomes, 1,
        "only the valid call reached the inner host:\n{events}"
    );
}

/// A manifest bridging the scripted server, logging in `dir`.
fn scripted_manifest(dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("tests/bridge/scripted_server.py");
    let manifest = dir.join("scripted.toml");
    let log = log_path(dir);
    std::fs::write(
        &manifest,
        format!(
            "[[mcp]]\nname = \"scripted\"\ncommand = \"python3\"\nargs = [{script:?}]\n\
             env = {{ LOG = {log:?} }}\n[[mcp.rules]]\naction = \"mcp\"\nresource = \"scripted/*\"\n\
             effect = \"allow\"\n"
        ),
    )
    .unwrap();
    manifest.to_string_lossy().into_owned()
}

/// Runs the CLI: exit code, stdout, stderr.
fn toolhost(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap(),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[tokio::test]
async fn r33_tools_a_hostile_server_lists_are_skipped_with_a_warning_and_the_rest_register() {
    let b = bridged("/bridge-hostile", |c| {
        if let toolhost::config::McpTransport::Stdio { env, .. } = &mut c.transport {
            env.insert("HOSTILE".into(), "1".into());
        }
    })
    .await;
    let warnings = b.connection.warnings();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert_eq!(b.connection.info().name, "scripted");
    for (tool, why) in [
        ("bad_schema", "input schema does not compile"),
        ("long", "description is 20480 bytes"),
        ("dup.a", "is taken by another of its tools"),
    ] {
        assert!(
            warnings.iter().any(|w| w
                .contains(&format!("MCP server `scripted`, tool `{tool}` skipped"))
                && w.contains(why)),
            "{tool}: {warnings:?}"
        );
    }
    let listed = names(&b.location.snapshot());
    assert_eq!(listed.len(), 6, "{listed:?}");
    assert!(listed.contains(&"scripted_dup_a".to_owned()));

    // An answer over rmcp's 16 MiB message limit is dropped: the call runs
    // to its deadline instead of the host buffering it.
    let s = b
        .location
        .snapshot()
        .settle(
            Call::new("scripted_huge", "{}", context("huge")).with_overrides(
                toolhost::BudgetOverrides {
                    timeout: Some(Duration::from_secs(2)),
                    ..Default::default()
                },
            ),
        )
        .await;
    assert_eq!(
        s.outcome,
        Outcome::Interrupted {
            reason: Interruption::Deadline
        }
    );

    let manifest = scripted_manifest(b.dir.path());
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("env = { ", "env = { HOSTILE = \"1\", "),
    )
    .unwrap();
    let (code, stdout, _) = toolhost(&["check", &manifest, "--yes"]);
    assert_eq!(code, 1, "a skipped tool fails the check: {stdout}");
    assert!(stdout.contains("tool `bad_schema` skipped"), "{stdout}");
}

#[test]
fn r33_the_cli_lists_calls_and_checks_a_bridged_server_once_it_is_allowed_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = scripted_manifest(dir.path());
    let (code, _, stderr) = toolhost(&["list", &manifest]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("runs `python3"), "{stderr}");
    assert!(stderr.contains("--yes"), "says how to allow it: {stderr}");
    assert!(!log_path(dir.path()).exists(), "the server never started");

    let (code, stdout, stderr) = toolhost(&["list", &manifest, "--yes", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let listed: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        listed,
        [
            "scripted_count",
            "scripted_grow",
            "scripted_progress",
            "scripted_wait"
        ]
    );
    assert!(
        rows.iter()
            .all(|r| r["plugin"] == "scripted" && r["version"] == "1.0.0")
    );

    let (code, stdout, stderr) =
        toolhost(&["call", &manifest, "scripted_count", "--yes", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let call: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(call["status"], "completed");
    assert_eq!(call["content"][0]["text"], "call 1");

    let (code, stdout, stderr) = toolhost(&["check", &manifest, "--yes"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("ok   scripted: connected; tools with valid schemas: scripted_count"),
        "{stdout}"
    );
}

/// Terminates TLS for `localhost` on a free port and forwards each
/// connection to `to`; the port and the CA's certificate (PEM).
async fn tls_proxy(to: std::net::SocketAddr) -> (u16, String) {
    let (acceptor, ca) = crate::http::private_ca();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut upstream = tokio::net::TcpStream::connect(to).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
            });
        }
    });
    (port, ca)
}

#[tokio::test]
async fn r33_a_server_is_bridged_over_https_trusting_the_hosts_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path(), &[TEXT_TOOLS], &[]);
    let plain: url_parts::Plain = served.url.parse().unwrap();
    let (port, ca) = tls_proxy(plain.addr).await;
    let https = format!("https://localhost:{port}{}", plain.path);

    // Without the private CA the handshake fails, naming the server.
    let (host, _outputs) = toolhost_tests::host();
    let e = McpConnection::connect(
        &host.location("/untrusted"),
        McpServerConfig::http("inner", https.clone()),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&e, toolhost::Error::Mcp { server, .. } if server == "inner"),
        "{e}"
    );

    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs)
        .rules(allow_mcp())
        .http_root_certificates(&ca_file)
        .build()
        .unwrap();
    let location = host.location("/trusted");
    let _connection = McpConnection::connect(&location, McpServerConfig::http("inner", https))
        .await
        .unwrap();
    let s = settle(
        &location.snapshot(),
        "inner_echo",
        json!({"message": "over tls"}),
    )
    .await;
    assert_eq!(texts(&s), ["over tls"]);
}

/// Splits `http://HOST:PORT/PATH` for the proxy.
mod url_parts {
    pub(super) struct Plain {
        pub(super) addr: std::net::SocketAddr,
        pub(super) path: String,
    }

    impl std::str::FromStr for Plain {
        type Err = String;
        fn from_str(url: &str) -> Result<Plain, String> {
            let rest = url.strip_prefix("http://").ok_or(url)?;
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let addr = authority.parse().map_err(|e| format!("{authority}: {e}"))?;
            Ok(Plain {
                addr,
                path: path.to_owned(),
            })
        }
    }
}

#[tokio::test]
async fn r33_serve_is_a_gateway_for_plugins_and_bridged_servers_under_one_event_log() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = scripted_manifest(dir.path());
    // --yes: the manifest starts a command, which needs the user's consent.
    let served = serve(dir.path(), &[TEXT_TOOLS, &manifest], &["--yes"]);

    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs).rules(allow_mcp()).build().unwrap();
    let location = host.location("/gateway");
    let _connection = McpConnection::connect(
        &location,
        McpServerConfig::http("gateway", served.url.clone()),
    )
    .await
    .unwrap();
    let snapshot = location.snapshot();
    let listed = names(&snapshot);
    assert!(listed.contains(&"gateway_echo".to_owned()), "{listed:?}");
    assert!(
        listed.contains(&"gateway_scripted_count".to_owned()),
        "{listed:?}"
    );
    let s = settle(&snapshot, "gateway_echo", json!({"message": "wasm"})).await;
    assert_eq!(texts(&s), ["wasm"]);
    let s = settle(&snapshot, "gateway_scripted_count", json!({})).await;
    assert_eq!(texts(&s), ["call 1"]);

    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    let tools: Vec<String> = events
        .lines()
        .filter(|l| l.starts_with(r#"{"event":"outcome""#))
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["tool"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(tools, ["echo", "scripted_count"], "one event log for both");

    // A change of the bridged server's tools reaches the gateway's clients:
    // `grow` adds `extra` inner, and the outer bridge re-lists.
    let s = settle(&snapshot, "gateway_scripted_grow", json!({})).await;
    assert_eq!(texts(&s), ["grown"]);
    eventually("the outer host sees extra", || {
        names(&location.snapshot()).contains(&"gateway_scripted_extra".to_owned())
    })
    .await;
}

#[tokio::test]
async fn r35_serve_gives_each_mcp_session_its_own_per_session_server() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = scripted_manifest(dir.path());
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = text.replace(
        "env = { ",
        "per_session = true\nenv = { CRASH_ON = \"99\", ",
    );
    std::fs::write(&manifest, text).unwrap();
    let served = serve(dir.path(), &[TEXT_TOOLS, &manifest], &["--yes"]);
    assert!(
        received(dir.path()).is_empty(),
        "no server before a session asks"
    );

    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs).rules(allow_mcp()).build().unwrap();
    let (a, b) = (host.location("/a"), host.location("/b"));
    let _to_a = McpConnection::connect(&a, McpServerConfig::http("g", served.url.clone()))
        .await
        .unwrap();
    let _to_b = McpConnection::connect(&b, McpServerConfig::http("g", served.url.clone()))
        .await
        .unwrap();
    // Each MCP session lists its own server's tools beside the plugin's.
    for location in [&a, &b] {
        let listed = names(&location.snapshot());
        assert!(listed.contains(&"g_echo".to_owned()), "{listed:?}");
        assert!(
            listed.contains(&"g_scripted_count".to_owned()),
            "{listed:?}"
        );
    }
    let count = |location: &toolhost::Location| {
        let snapshot = location.snapshot();
        async move { texts(&settle(&snapshot, "g_scripted_count", json!({})).await) }
    };
    assert_eq!(count(&a).await, ["call 1"]);
    assert_eq!(count(&a).await, ["call 2"]);
    assert_eq!(
        count(&b).await,
        ["call 1"],
        "session b has a server of its own"
    );
    let started = received(dir.path())
        .iter()
        .filter(|m| *m == "initialize")
        .count();
    assert_eq!(started, 2, "one server process per session");
}

#[tokio::test]
async fn r35_a_slow_per_session_server_delays_only_its_own_session() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = scripted_manifest(dir.path());
    // Each session's server answers `initialize` only while the gate file
    // exists: the test decides when a server has started.
    let gate = dir.path().join("gate");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = text.replace(
        "env = { ",
        &format!("per_session = true\nenv = {{ START_GATE = {gate:?}, CRASH_ON = \"99\", "),
    );
    std::fs::write(&manifest, text).unwrap();
    let served = serve(dir.path(), &[TEXT_TOOLS, &manifest], &["--yes"]);
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs).rules(allow_mcp()).build().unwrap();
    let initialized = || {
        received(dir.path())
            .iter()
            .filter(|m| *m == "initialize")
            .count()
    };
    // Session a's server starts through the open gate...
    std::fs::write(&gate, "").unwrap();
    let a = host.location("/a");
    let _to_a = McpConnection::connect(&a, McpServerConfig::http("g", served.url.clone()))
        .await
        .unwrap();
    eventually("session a's server to list its tools", || {
        received(dir.path()).contains(&"tools/list".to_owned())
    })
    .await;
    std::fs::remove_file(&gate).unwrap();
    // ...and session b's first request starts a server that waits at the
    // closed gate for as long as the test keeps it closed...
    let b = host.location("/b");
    let url = served.url.clone();
    let joining = tokio::spawn(async move {
        let connection = McpConnection::connect(&b, McpServerConfig::http("g", url)).await;
        (b, connection)
    });
    eventually("session b's server to be asked to initialize", || {
        initialized() == 2
    })
    .await;
    // ...while session a's calls go on: one completes before b can join.
    let s = within(
        "session a's call",
        settle(&a.snapshot(), "g_echo", json!({"message": "meanwhile"})),
    )
    .await;
    assert_eq!(texts(&s), ["meanwhile"]);
    assert!(
        !joining.is_finished(),
        "session b joined before its server started"
    );
    // Opening the gate lets session b's server answer, and b joins.
    std::fs::write(&gate, "").unwrap();
    let (b, connection) = within("session b to join", joining).await.unwrap();
    let _to_b = connection.unwrap();
    assert!(names(&b.snapshot()).contains(&"g_scripted_count".to_owned()));
    assert_eq!(initialized(), 2, "one server process per session");
}

/// `@modelcontextprotocol/server-everything` as `example-plugins/mcp-everything`
/// bridges it (`npm ci` there first; `cargo xtask test` does).
async fn everything(host: &toolhost::Host) -> (toolhost::Location, toolhost_mcp::McpConnection) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("example-plugins/mcp-everything/toolhost.toml");
    let Some(toolhost::manifest::Source::Mcp(config)) =
        toolhost::manifest::Source::load(&manifest).unwrap().pop()
    else {
        panic!("{} bridges one MCP server", manifest.display());
    };
    let location = host.location("/everything");
    let connection = McpConnection::connect(&location, config)
        .await
        .expect("server-everything runs: `npm ci` in example-plugins/mcp-everything");
    (location, connection)
}

#[tokio::test]
#[ignore = "needs Node and `npm ci` in example-plugins/mcp-everything; cargo xtask test runs it"]
async fn r33_server_everything_tools_are_listed_and_called() {
    let (host, _outputs) = toolhost_tests::host();
    let (location, connection) = everything(&host).await;
    assert!(
        connection.warnings().is_empty(),
        "{:?}",
        connection.warnings()
    );
    let snapshot = location.snapshot();
    let listed = names(&snapshot);
    for expected in [
        "everything_echo",
        "everything_get-sum",
        "everything_get-structured-content",
        "everything_get-tiny-image",
        "everything_trigger-long-running-operation",
    ] {
        assert!(
            listed.contains(&expected.to_owned()),
            "{expected} in {listed:?}"
        );
    }
    // The manifest's rule allows its calls.
    let s = settle(&snapshot, "everything_echo", json!({"message": "hi"})).await;
    assert_eq!(texts(&s), ["Echo: hi"]);
    let s = settle(&snapshot, "everything_get-sum", json!({"a": 2, "b": 3})).await;
    assert!(texts(&s)[0].contains('5'), "{:?}", texts(&s));

    // Structured output, checked against the server's output schema.
    let definition = snapshot
        .definitions()
        .iter()
        .find(|d| d.name == "everything_get-structured-content")
        .cloned()
        .unwrap();
    assert!(definition.output_schema.is_some());
    let s = settle(
        &snapshot,
        "everything_get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await;
    let Outcome::Completed(completed) = &s.outcome else {
        panic!("{:?}", s.outcome);
    };
    let output = completed
        .output
        .as_ref()
        .expect("structuredContent is the output");
    assert!(output["temperature"].is_number(), "{output}");

    // An image is a media part.
    let s = settle(&snapshot, "everything_get-tiny-image", json!({})).await;
    assert!(
        texts(&s).contains(&"<image/png>".to_owned()),
        "{:?}",
        texts(&s)
    );
}

#[tokio::test]
#[ignore = "needs Node and `npm ci` in example-plugins/mcp-everything; cargo xtask test runs it"]
async fn r33_server_everything_progress_then_cancel_mid_way() {
    let outputs = tempfile::tempdir().unwrap();
    let sink = Arc::new(Recorder::default());
    let host = builder(&outputs).event_sink(sink.clone()).build().unwrap();
    let (location, _connection) = everything(&host).await;
    let cancel = CancellationToken::new();
    let call = Call::new(
        "everything_trigger-long-running-operation",
        r#"{"duration": 20, "steps": 20}"#,
        context("long"),
    )
    .with_cancel(cancel.clone());
    let snapshot = location.snapshot();
    let running = tokio::spawn(async move { snapshot.settle(call).await });
    sink.until("two progress updates", |r| r.progress.len() >= 2)
        .await;
    let first = sink.progress()[0].update.clone();
    assert_eq!(first["total"], json!(20.0), "{first}");
    cancel.cancel();
    let s = running.await.unwrap();
    assert_eq!(
        s.outcome,
        Outcome::Interrupted {
            reason: Interruption::Cancelled
        }
    );
    assert!(
        s.usage.wall_time < Duration::from_secs(15),
        "stopped mid-way: {:?}",
        s.usage.wall_time
    );
}
