//! The memory report: how much resident memory `toolhost serve --http`
//! keeps after bursts of large requests. Each round queues 40 calls with
//! 15 MiB inputs behind a busy plugin slot, lets them finish, and reads the
//! server's RSS; a server whose allocator returns what bursts took stays
//! near its baseline. `cargo bench -p toolhost-cli --bench memory`
//! (`TOOLHOST_BIN=path` measures another build of the binary).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

toolhost_tests::plugin_paths!();

/// Calls queued per round, and the size of each one's input.
const QUEUED: usize = 40;
const INPUT_BYTES: usize = 15 << 20;
const ROUNDS: usize = 3;

fn binary() -> String {
    std::env::var("TOOLHOST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolhost").into())
}

/// The server, and the port it listens on.
fn start(dir: &std::path::Path) -> (Child, u16) {
    let manifest = dir.join("chaos.toml");
    std::fs::write(
        &manifest,
        format!("path = {CHAOS:?}\n\n[limits]\nconcurrency = 1\ntimeout = \"3s\"\n"),
    )
    .unwrap();
    let mut child = Command::new(binary())
        .args(["serve", "--http", "127.0.0.1:0"])
        .arg(&manifest)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .arg("--state-dir")
        .arg(dir.join("outputs"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts toolhost serve");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    for line in stderr.lines() {
        let line = line.unwrap();
        if let Some(url) = line.strip_prefix("toolhost: serving MCP at http://") {
            let port = url.split(['/', ':']).nth(1).unwrap().parse().unwrap();
            return (child, port);
        }
    }
    let _ = child.kill();
    let status = child.wait();
    panic!("toolhost serve ended before serving: {status:?}");
}

/// One stateless (2026-07-28) `tools/call`, answered in full.
fn call(port: u16, id: usize, tool: &str, arguments: &serde_json::Value) -> String {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }},
    })
    .to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: {tool}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024.0
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, port) = start(dir.path());
    call(port, 0, "compute", &serde_json::json!({"iterations": 1}));
    let baseline = rss_mib(server.id());
    println!(
        "toolhost serve --http ({}): RSS after start {baseline:.0} MiB",
        binary()
    );
    let input = serde_json::json!({"stdout": "x".repeat(INPUT_BYTES), "stderr": ""});
    for round in 1..=ROUNDS {
        std::thread::scope(|s| {
            s.spawn(|| call(port, 1, "busy", &serde_json::json!({})));
            let queued: Vec<_> = (0..QUEUED)
                .map(|i| {
                    let input = &input;
                    s.spawn(move || call(port, 100 + i, "print", input))
                })
                .collect();
            for q in queued {
                q.join().unwrap();
            }
        });
        let rss = rss_mib(server.id());
        println!(
            "round {round}: {QUEUED} queued calls of {} MiB: RSS {rss:.0} MiB ({:.2}x the baseline)",
            INPUT_BYTES >> 20,
            rss / baseline
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}
