//! Operations of `toolhost serve --http` (issue 25): `/healthz`, `/readyz`
//! (after loading; not while a stop drains calls; not while the store is
//! down), `/metrics` (counts that match the calls made, no ids as labels,
//! on an address of its own with `--metrics`), and `--log-format json`.
//! The real binary on loopback, a real Postgres; every wait is for an
//! event, within a bound.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_tests::postgres::Postgres;
use toolhost_tests::wait::PATIENCE;
use toolhost_tests::wait_until;

use crate::{CHAOS, TEXT_TOOLS};

/// A running `toolhost serve --http 127.0.0.1:0`, killed when dropped.
struct Served {
    child: Child,
    /// `127.0.0.1:PORT` of `/mcp` and the operator routes.
    addr: String,
    /// Its stderr lines, after the one that named the address.
    lines: mpsc::Receiver<String>,
    /// The lines up to it.
    head: Vec<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address in a `serving … at http://ADDR/…` line (text or JSON).
fn serving_at(line: &str, what: &str) -> Option<String> {
    let text = match serde_json::from_str::<Value>(line) {
        Ok(json) => json["fields"]["message"].as_str()?.to_owned(),
        Err(_) => line.to_owned(),
    };
    let rest = text.split_once(&format!("serving {what} at http://"))?.1;
    Some(rest.split('/').next()?.to_owned())
}

fn serve(dir: &std::path::Path, sources: &[&str], args: &[&str], env: &[(&str, &str)]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("serve")
        .args(sources)
        .args(["--http", "127.0.0.1:0", "--no-cache", "--state-dir"])
        .arg(dir.join("state"))
        .arg("--events")
        .arg(dir.join("events.jsonl"))
        .args(args)
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut head = Vec::new();
    let addr = loop {
        let line = lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("serve printed no address; stderr: {head:?}"));
        head.push(line.clone());
        if let Some(addr) = serving_at(&line, "MCP") {
            break addr;
        }
    };
    Served {
        child,
        addr,
        lines,
        head,
    }
}

/// One HTTP/1.1 request on a connection of its own: the status and body.
fn http(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    send(
        TcpStream::connect(addr).unwrap(),
        addr,
        method,
        path,
        headers,
        body,
    )
}

/// One HTTP/1.1 request on `stream`, asking the server to close it after
/// the reply: the status and body.
fn send(
    mut stream: TcpStream,
    addr: &str,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (u16, String) {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {reply:?}"));
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn get(addr: &str, path: &str) -> (u16, String) {
    http(addr, "GET", path, "", "")
}

/// A stateless (2026-07-28) `tools/call`, grouped under `session`.
fn call(addr: &str, id: u64, tool: &str, arguments: Value, session: &str) -> (u16, String) {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "ops-test", "version": "1"},
                "io.toolhost/session-id": session,
            },
        },
    });
    let headers = format!(
        "content-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: {tool}\r\n"
    );
    http(addr, "POST", "/mcp", &headers, &body.to_string())
}

/// Waits until `path` answers `status`.
fn until_status(addr: &str, path: &str, status: u16) {
    let mut last = (0, String::new());
    let reached = wait_until(PATIENCE, || {
        last = get(addr, path);
        last.0 == status
    });
    assert!(reached, "{path} never answered {status}; last: {last:?}");
}

/// The value of the sample `name` (with its labels, exactly as shown) in
/// OpenMetrics text.
fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (key, value) = line.rsplit_once(' ')?;
        (key == name).then(|| value.parse().unwrap())
    })
}

fn sigterm(child: &Child) {
    // SAFETY: kill only sends a signal to the child we started.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
}

#[test]
fn probes_answer_and_metrics_count_the_calls_without_ids() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path(), &[TEXT_TOOLS], &[], &[]);
    let addr = &served.addr;
    assert_eq!(get(addr, "/healthz").0, 200, "alive at once");
    until_status(addr, "/readyz", 200);

    let session = format!("ops-session-{}", uuid_like());
    let echoes = 7;
    for id in 0..echoes {
        let (status, body) = call(addr, id, "echo", json!({"message": "hi"}), &session);
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"result\""), "{body}");
    }
    call(addr, 100, "no_such_tool_anywhere", json!({}), &session);
    let (status, metrics) = get(addr, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(
        sample(
            &metrics,
            r#"toolhost_calls_total{tool="echo",status="completed"}"#
        ),
        Some(echoes as f64),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"toolhost_call_duration_seconds_count{tool="echo"}"#
        ),
        Some(echoes as f64),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"toolhost_calls_total{tool="other",status="error"}"#
        ),
        Some(1.0),
        "an unknown tool is `other`: {metrics}"
    );
    assert_eq!(
        sample(&metrics, "toolhost_queue_wait_seconds_count"),
        Some(echoes as f64 + 1.0)
    );
    assert_eq!(sample(&metrics, "toolhost_calls_in_flight"), Some(0.0));
    assert_eq!(
        sample(
            &metrics,
            r#"toolhost_http_requests_total{route="mcp",code="200"}"#
        ),
        Some(echoes as f64 + 1.0),
        "{metrics}"
    );
    assert!(
        sample(
            &metrics,
            r#"toolhost_store_duration_seconds_count{operation="record"}"#
        )
        .is_some_and(|n| n >= echoes as f64),
        "the store's operations are timed: {metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"toolhost_store_duration_seconds_count{operation="claim"}"#
        ),
        None,
        "calls under minted message ids run unclaimed, one write each: {metrics}"
    );
    assert!(!metrics.contains(&session), "a session id in the metrics");
    assert!(
        !metrics.contains("no_such_tool"),
        "a made-up tool name as a label"
    );
    assert!(
        !metrics.contains("ops-test"),
        "a client name in the metrics"
    );
}

#[test]
fn readyz_turns_503_at_sigterm_while_a_call_is_still_running() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(
        dir.path(),
        &[CHAOS],
        &["--grace", "60s", "--timeout", "120s"],
        &[],
    );
    let addr = served.addr.clone();
    until_status(&addr, "/readyz", 200);
    let (done, replied) = mpsc::channel();
    let caller = addr.clone();
    std::thread::spawn(move || {
        let _ = done.send(call(&caller, 1, "busy", json!({}), "ops-drain"));
    });
    // The call runs (its `busy` said so) when the stop comes.
    let events = dir.path().join("events.jsonl");
    let started = wait_until(PATIENCE, || {
        std::fs::read_to_string(&events).is_ok_and(|log| log.contains("\"started\""))
    });
    assert!(started, "busy never reported that it started");
    // A probe's connection accepted before the stop, its request not yet
    // sent: accepted once the server has answered one opened after it.
    let early = TcpStream::connect(&addr).unwrap();
    assert_eq!(get(&addr, "/healthz").0, 200);
    sigterm(&served.child);
    until_status(&addr, "/readyz", 503);
    let (status, body) = send(early, &addr, "GET", "/readyz", "", "");
    assert_eq!(status, 503, "the early connection is answered: {body}");
    assert!(
        replied.try_recv().is_err(),
        "the call ended before /readyz turned 503"
    );
    assert_eq!(get(&addr, "/healthz").0, 200, "still alive while draining");
    let (status, metrics) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(sample(&metrics, "toolhost_calls_in_flight"), Some(1.0));
    let (status, body) = call(&addr, 2, "busy", json!({"iterations": 1}), "ops-drain");
    assert_eq!(status, 503, "a new request while stopping: {body}");
    assert!(
        replied.try_recv().is_err(),
        "the call ended while the server drained (grace is 60 s)"
    );
}

/// A client that connects before a stop and never sends its request does
/// not hold the stop: its head is waited for only until the hard stop, not
/// for the header timeout, which is longer than this test waits.
#[test]
fn a_silent_connection_accepted_before_a_stop_does_not_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut served = serve(dir.path(), &[TEXT_TOOLS], &["--header-timeout", "1h"], &[]);
    let addr = served.addr.clone();
    until_status(&addr, "/readyz", 200);
    let mut silent = TcpStream::connect(&addr).unwrap();
    silent.set_read_timeout(Some(PATIENCE)).unwrap();
    assert_eq!(get(&addr, "/healthz").0, 200);
    sigterm(&served.child);
    let mut status = None;
    let exited = wait_until(PATIENCE, || {
        status = served.child.try_wait().unwrap();
        status.is_some()
    });
    assert!(exited, "serve waited on a connection that sent nothing");
    assert_eq!(status.unwrap().code(), Some(0));
    let mut reply = Vec::new();
    let _ = silent.read_to_end(&mut reply);
    assert!(reply.is_empty(), "{}", String::from_utf8_lossy(&reply));
}

#[test]
fn readyz_follows_the_store() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let url = postgres.url();
    let served = serve(dir.path(), &[TEXT_TOOLS], &["--store", &url], &[]);
    let addr = &served.addr;
    until_status(addr, "/readyz", 200);
    postgres.stop();
    until_status(addr, "/readyz", 503);
    let (_, body) = get(addr, "/readyz");
    assert!(body.contains("store"), "{body}");
    assert!(
        !body.contains("127.0.0.1"),
        "the probe tells no store address: {body}"
    );
    assert_eq!(get(addr, "/healthz").0, 200, "alive without its store");
    postgres.restart();
    until_status(addr, "/readyz", 200);
    let (_, metrics) = get(addr, "/metrics");
    assert!(
        sample(
            &metrics,
            r#"toolhost_store_errors_total{operation="ready"}"#
        )
        .is_some_and(|n| n >= 1.0),
        "{metrics}"
    );
}

#[test]
fn metrics_on_their_own_address_and_json_logs() {
    let dir = tempfile::tempdir().unwrap();
    let mut served = serve(
        dir.path(),
        &[TEXT_TOOLS],
        &[
            "--metrics",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--workers",
            "3",
        ],
        &[("TOOLHOST_LOG", "info")],
    );
    let metrics_addr = served
        .head
        .iter()
        .find_map(|l| serving_at(l, "metrics"))
        .expect("serve names its metrics address before its MCP address");
    until_status(&served.addr, "/readyz", 200);
    let (status, body) = call(&served.addr, 1, "echo", json!({"message": "m"}), "ops-m");
    assert_eq!(status, 200, "{body}");
    let (status, metrics) = get(&metrics_addr, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(
        sample(
            &metrics,
            r#"toolhost_calls_total{tool="echo",status="completed"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "toolhost_workers"),
        Some(3.0),
        "--workers sets the runtime's threads: {metrics}"
    );
    assert_eq!(
        get(&served.addr, "/metrics").0,
        404,
        "not on the MCP address"
    );
    assert_eq!(get(&metrics_addr, "/mcp").0, 404, "only metrics there");

    sigterm(&served.child);
    let status = served.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut lines = std::mem::take(&mut served.head);
    lines.extend(served.lines.try_iter());
    // The reader thread ends with the process's stderr.
    while let Ok(line) = served.lines.recv_timeout(Duration::from_secs(5)) {
        lines.push(line);
    }
    assert!(lines.len() >= 2, "{lines:?}");
    for line in &lines {
        let parsed: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
        assert!(parsed["level"].is_string(), "{line}");
        assert!(parsed["fields"]["message"].is_string(), "{line}");
    }
}

/// A fresh value for ids the test makes up.
fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}
