//! `toolhost serve` over stdio, driven with raw JSON-RPC lines: what a
//! client gets for a request too large to read, or for a line that is no
//! message, and what stdin and stdout may be.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::TEXT_TOOLS;

/// How long a test waits for one reply before it fails.
const REPLY_WITHIN: Duration = Duration::from_secs(60);

/// A `toolhost serve` child speaking MCP on its stdin and stdout, already
/// initialized. Dropping it kills the child.
pub(crate) struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Served {
    /// `toolhost serve ARGS` with a private output directory and no compile
    /// cache, initialized as a 2025-06-18 client. `prepare` may change the
    /// command before it is spawned.
    pub(crate) fn start(
        args: &[&str],
        dir: &std::path::Path,
        prepare: impl FnOnce(&mut Command),
    ) -> Served {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        command
            .arg("serve")
            .args(args)
            .arg("--no-cache")
            .arg("--state-dir")
            .arg(dir.join("outputs"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        prepare(&mut command);
        let mut child = command.spawn().expect("runs toolhost serve");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let lines = lines_of(stdout);
        let mut served = Served {
            child,
            stdin,
            lines,
        };
        served.send(&json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "stdio-test", "version": "1"}
            }
        }));
        let init = served.reply(0);
        assert!(init.get("result").is_some(), "{init}");
        served.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        served
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one message as a line.
    pub(crate) fn send(&mut self, message: &Value) {
        self.send_raw(message.to_string().as_bytes());
    }

    /// Writes `bytes` and a newline, as they are.
    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("writes to the server");
        stdin.write_all(b"\n").expect("writes to the server");
        stdin.flush().expect("flushes");
    }

    /// The response with `id`, skipping notifications; fails the test if
    /// none comes within [`REPLY_WITHIN`] or the server closes stdout.
    pub(crate) fn reply(&self, id: i64) -> Value {
        let deadline = Instant::now() + REPLY_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(e) => panic!("no reply to request {id} ({e:?})"),
            };
            let message: Value = serde_json::from_str(&line).expect("the server writes JSON");
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    /// Calls `tool` with `arguments` as request `id` and returns the reply.
    pub(crate) fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        self.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}
        }));
        self.reply(id)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines `output` carries, read on a thread of their own until it
/// ends or the receiver is dropped.
fn lines_of(output: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// A `tools/call` line of about `bytes` bytes, its id where `id_first` says.
fn oversized_call(id: i64, bytes: usize, id_first: bool) -> Vec<u8> {
    let message = "x".repeat(bytes);
    let params = json!({"name": "echo", "arguments": {"message": message}});
    let text = if id_first {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
    } else {
        // The TypeScript SDK's order: the id comes last.
        format!(r#"{{"method":"tools/call","params":{params},"jsonrpc":"2.0","id":{id}}}"#)
    };
    text.into_bytes()
}

#[test]
fn a_request_too_large_to_read_is_answered_with_an_error_and_the_connection_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut served = Served::start(&[TEXT_TOOLS], dir.path(), |_| {});
    let limit = toolhost_mcp::limits::MAX_STDIO_MESSAGE_BYTES;
    for (id, id_first) in [(1, true), (2, false)] {
        served.send_raw(&oversized_call(id, limit + 1024, id_first));
        let reply = served.reply(id);
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("MAX_STDIO_MESSAGE_BYTES") && message.contains("16 MiB"),
            "{message}"
        );
    }
    // Just under the limit is read and settled as usual.
    let fits = served.call(3, "echo", json!({"message": "y".repeat(limit - 1024)}));
    assert!(fits.get("result").is_some(), "{fits}");
    let after = served.call(4, "echo", json!({"message": "still here"}));
    assert_eq!(
        after["result"]["structuredContent"]["message"],
        "still here"
    );
}

#[test]
fn a_line_that_is_no_message_is_dropped_or_refused_and_the_connection_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut served = Served::start(&[TEXT_TOOLS], dir.path(), |_| {});
    // Not JSON, and an empty line: dropped unanswered. JSON that is no
    // message: answered with Invalid Request, without an id.
    served.send_raw(b"not json");
    served.send_raw(b"");
    served.send_raw(br#"{"a":1}"#);
    let call = json!({
        "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "after"}}
    });
    served.send_raw(format!("  {call}\r").as_bytes());
    let mut before = Vec::new();
    let deadline = Instant::now() + REPLY_WITHIN;
    let reply = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = served
            .lines
            .recv_timeout(left)
            .expect("a reply to the call");
        let message: Value = serde_json::from_str(&line).expect("the server writes JSON");
        if message["id"] == json!(5) {
            break message;
        }
        if message.get("method").is_none() {
            before.push(message);
        }
    };
    assert_eq!(before.len(), 1, "one answer before the call's: {before:?}");
    assert_eq!(before[0]["error"]["code"], -32600, "{}", before[0]);
    assert!(before[0]["id"].is_null(), "{}", before[0]);
    assert_eq!(
        reply["result"]["structuredContent"]["message"], "after",
        "{reply}"
    );
}

/// A socket for stdin and one pipe shared by stdout and stderr: the cases
/// where the server keeps tokio's own stdin and stdout rather than polling
/// the pipe (a pipe stderr shares must stay blocking for stderr's writes).
#[test]
fn a_socket_for_stdin_and_a_pipe_shared_with_stderr_are_served_too() {
    let dir = tempfile::tempdir().unwrap();
    let (mut client, server_end) = UnixStream::pair().unwrap();
    let (output, output_writer) = std::io::pipe().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", TEXT_TOOLS, "--no-cache", "--state-dir"])
        .arg(dir.path().join("outputs"))
        .stdin(Stdio::from(OwnedFd::from(server_end)))
        .stdout(output_writer.try_clone().unwrap())
        .stderr(output_writer)
        .spawn()
        .expect("runs toolhost serve");
    let lines = lines_of(output);
    let mut ask = |id: i64, method: &str, params: Value| {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(client, "{request}").expect("writes to the server");
        let deadline = Instant::now() + REPLY_WITHIN;
        let reply = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines.recv_timeout(left).expect("a reply");
            // stderr's log lines arrive on the same pipe.
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == json!(id) {
                break message;
            }
        };
        if method == "initialize" {
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            writeln!(client, "{initialized}").expect("writes to the server");
        }
        reply
    };
    let client_info = json!({"name": "stdio-test", "version": "1"});
    let init = ask(
        0,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client_info}),
    );
    assert!(init.get("result").is_some(), "{init}");
    let reply = ask(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "through a socket"}}),
    );
    assert_eq!(
        reply["result"]["structuredContent"]["message"], "through a socket",
        "{reply}"
    );
    for fd in [0, 1, 2] {
        assert!(
            !non_blocking(child.id(), fd),
            "fd {fd} was made non-blocking"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Stdin and stdout pipes, as clients launch servers: both are read and
/// written through the runtime's poller, in non-blocking mode.
#[test]
fn stdin_and_stdout_pipes_are_polled() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&[TEXT_TOOLS], dir.path(), |_| {});
    assert!(non_blocking(served.pid(), 0), "stdin is not polled");
    assert!(non_blocking(served.pid(), 1), "stdout is not polled");
}

/// Whether process `pid`'s descriptor `fd` is in non-blocking mode, as
/// `/proc` tells (its open flags, in octal).
fn non_blocking(pid: u32, fd: u32) -> bool {
    const O_NONBLOCK: u32 = 0o4000;
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap();
    let flags = info
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
        .unwrap_or_else(|| panic!("no flags in fdinfo: {info}"));
    flags & O_NONBLOCK != 0
}
