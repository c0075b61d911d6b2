//! The MCP report: what serving over MCP adds to a settled call, measured
//! in one run: `echo` settled directly vs called through `toolhost serve`
//! over stdio (a child process, the official Rust SDK as client), and
//! settled echo calls per second over streamable HTTP with 1 and 16
//! concurrent clients; and the MCP bridge: `echo` of the same `toolhost
//! serve` settled through a bridging host vs called with the SDK's client.
//! Beside each, the floor: a native `echo` served by the same SDK (this
//! binary, re-run as `--floor-stdio` or `--floor-http`), driven by the same
//! client, and the ratio of Toolhost to it.
//! `cargo bench -p toolhost-cli --bench mcp`; `-- --callgrind`: only the
//! instructions each stdio server executes per call, counted by callgrind
//! (valgrind), which load on the machine does not move.

use std::ffi::OsString;
use std::io::{BufRead as _, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::json;
use toolhost::config::{McpServerConfig, PluginOptions};
use toolhost::permission::{Effect, Rule, Rules};
use toolhost::{Call, Host};
use toolhost_tests::context;

toolhost_tests::plugin_paths!();

const TOOLHOST: &str = env!("CARGO_BIN_EXE_toolhost");

/// Calls measured per series, after as many for warming up.
const CALLS: u32 = 2_000;

/// Calls a callgrind count is taken over: a run of twice as many minus a
/// run of this many, so start-up and shutdown cancel out.
const CALLGRIND_CALLS: u32 = 200;

fn echo() -> CallToolRequestParams {
    let arguments = json!({"message": "hello"});
    let serde_json::Value::Object(arguments) = arguments else {
        unreachable!()
    };
    CallToolRequestParams::new("echo").with_arguments(arguments)
}

async fn direct(state: &std::path::Path) -> Duration {
    let host = Host::builder().state_dir(state).build().unwrap();
    let location = host.location("/bench");
    let _a = location
        .load(TEXT_TOOLS, &PluginOptions::default())
        .await
        .unwrap();
    let snapshot = location.snapshot();
    let input = r#"{"message":"hello"}"#;
    let run = |n| {
        let snapshot = snapshot.clone();
        async move {
            let start = Instant::now();
            for _ in 0..n {
                let s = snapshot
                    .settle(Call::new("echo", input, context("b")))
                    .await;
                assert_eq!(s.outcome.status(), "completed");
            }
            start.elapsed()
        }
    };
    run(CALLS).await;
    run(CALLS).await / CALLS
}

/// The floor: the SDK serving a native `echo`, nothing else.
#[derive(Clone)]
struct Floor;

impl rmcp::ServerHandler for Floor {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let schema = json!({"type": "object", "properties": {"message": {"type": "string"}}});
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        let tool = rmcp::model::Tool::new("echo", "Echo the message", schema);
        Ok(rmcp::model::ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let message = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("message"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let content = vec![rmcp::model::ContentBlock::text(message)];
        Ok(rmcp::model::CallToolResult::success(content).into())
    }
}

/// Serves the floor on stdio until the client leaves.
async fn floor_stdio() {
    let running = Floor.serve(rmcp::transport::stdio()).await.unwrap();
    let _ = running.waiting().await;
}

/// Serves the floor over streamable HTTP on a free port; prints its URL on
/// stderr as `toolhost serve` does.
async fn floor_http() {
    use rmcp::transport::streamable_http_server::StreamableHttpService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    let service = StreamableHttpService::new(
        || Ok(Floor),
        LocalSessionManager::default().into(),
        Default::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    eprintln!(
        "serving MCP at http://{}/mcp",
        listener.local_addr().unwrap()
    );
    axum::serve(listener, router).await.unwrap();
}

/// This benchmark re-run as the floor server.
fn floor_command(flag: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.arg(flag);
    command
}

async fn floor_over_stdio() -> Duration {
    let mut command = tokio::process::Command::from(floor_command("--floor-stdio"));
    command.stderr(Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    sequential(&client, CALLS).await;
    let per_call = sequential(&client, CALLS).await / CALLS;
    client.cancel().await.unwrap();
    per_call
}

async fn sequential(client: &RunningService<RoleClient, ()>, n: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        let r = client.call_tool(echo()).await.unwrap();
        assert_eq!(r.is_error, Some(false));
    }
    start.elapsed()
}

async fn over_stdio(cache: &std::path::Path, state: &std::path::Path) -> Duration {
    let mut command = tokio::process::Command::new(TOOLHOST);
    command
        .args(["serve", TEXT_TOOLS, "--cache-dir"])
        .arg(cache)
        .arg("--state-dir")
        .arg(state)
        .stderr(Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    sequential(&client, CALLS).await;
    let per_call = sequential(&client, CALLS).await / CALLS;
    client.cancel().await.unwrap();
    per_call
}

/// `echo` of `toolhost serve` over stdio, settled through a host that
/// bridges it (permission allowed by a rule, as a configured server's is).
async fn bridged(cache: &std::path::Path, state: &std::path::Path) -> Duration {
    let outer = state.join("bridging");
    let host = Host::builder()
        .state_dir(&outer)
        .rules(Rules(vec![Rule::new("mcp", "*", Effect::Allow)]))
        .build()
        .unwrap();
    let location = host.location("/bench");
    let args = [
        "serve",
        TEXT_TOOLS,
        "--cache-dir",
        &cache.to_string_lossy(),
        "--state-dir",
        &state.join("bridged").to_string_lossy(),
    ]
    .map(str::to_owned);
    let _bridge = location
        .connect_mcp(McpServerConfig::stdio("inner", TOOLHOST, args))
        .await
        .unwrap();
    let snapshot = location.snapshot();
    let run = |n| {
        let snapshot = snapshot.clone();
        async move {
            let start = Instant::now();
            for _ in 0..n {
                let s = snapshot
                    .settle(Call::new(
                        "inner_echo",
                        r#"{"message":"hello"}"#,
                        context("b"),
                    ))
                    .await;
                assert_eq!(s.outcome.status(), "completed");
            }
            start.elapsed()
        }
    };
    run(CALLS).await;
    run(CALLS).await / CALLS
}

/// Starts `toolhost serve --http` on a free port; its URL.
fn http_server(cache: &std::path::Path, state: &std::path::Path) -> (std::process::Child, String) {
    let mut command = Command::new(TOOLHOST);
    command
        .args(["serve", TEXT_TOOLS, "--http", "127.0.0.1:0", "--cache-dir"])
        .arg(cache)
        .arg("--state-dir")
        .arg(state);
    served(command)
}

/// Starts `command`, an HTTP server that names its URL on stderr.
fn served(mut command: Command) -> (std::process::Child, String) {
    let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = lines
        .find_map(|l| {
            let l = l.unwrap();
            l.split_once("serving MCP at ")
                .map(|(_, u)| u.trim().to_owned())
        })
        .unwrap();
    (child, url)
}

async fn over_http(url: &str, clients: u32) -> f64 {
    let mut connected = Vec::new();
    for _ in 0..clients {
        let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
        connected.push(().serve(transport).await.unwrap());
    }
    let per_client = CALLS / clients;
    let start = Instant::now();
    let runs = connected.iter().map(|c| sequential(c, per_client));
    futures::future::join_all(runs).await;
    f64::from(per_client * clients) / start.elapsed().as_secs_f64()
}

/// Instructions the stdio server `server` (program and arguments)
/// executes per `echo` call.
fn instructions_per_call(server: &[OsString]) -> f64 {
    let short = instructions(server, CALLGRIND_CALLS);
    let long = instructions(server, 2 * CALLGRIND_CALLS);
    long.saturating_sub(short) as f64 / f64::from(CALLGRIND_CALLS)
}

/// Callgrind's instruction count for a run of `server` that initializes
/// and answers `calls` sequential `echo` calls (newline-delimited JSON-RPC
/// on its stdin and stdout), then sees its stdin close.
fn instructions(server: &[OsString], calls: u32) -> u64 {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg("--smc-check=all-non-file")
        .arg(format!("--log-file={}", log.path().display()))
        .args(server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("valgrind (Debian's `valgrind` package)");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ask = |id: u32, method: &str, params: serde_json::Value| {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "the server stopped"
            );
            let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
            if reply["id"] == id {
                assert!(reply.get("result").is_some(), "{reply}");
                break;
            }
        }
        if method == "initialize" {
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            writeln!(stdin, "{initialized}").unwrap();
            stdin.flush().unwrap();
        }
    };
    let client = json!({"name": "callgrind", "version": "1"});
    ask(
        0,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}),
    );
    for id in 1..=calls {
        ask(
            id,
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "hello"}}),
        );
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(log.path()).unwrap();
    text.lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in callgrind's log:\n{text}"))
}

/// The callgrind section: `toolhost serve` (its pool small enough for
/// valgrind's address space) and the floor, per call. The cache is warmed
/// under valgrind too: code compiled for the real CPU's features (AVX-512
/// here) does not load on the CPU valgrind emulates.
fn callgrind(cache: &std::path::Path, state: &std::path::Path) {
    let compiled = Command::new("valgrind")
        .args(["-q", "--tool=none", "--trace-children=yes", TOOLHOST])
        .args(["compile", TEXT_TOOLS, "--max-instances", "4", "--cache-dir"])
        .arg(cache)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(compiled.success());
    let serve: Vec<OsString> = [TOOLHOST, "serve", TEXT_TOOLS, "--max-instances", "4"]
        .iter()
        .map(OsString::from)
        .chain([
            "--cache-dir".into(),
            cache.into(),
            "--state-dir".into(),
            state.into(),
        ])
        .collect();
    let floor = vec![
        std::env::current_exe().unwrap().into(),
        "--floor-stdio".into(),
    ];
    let toolhost = instructions_per_call(&serve);
    let native = instructions_per_call(&floor);
    println!(
        "instructions per call (callgrind), stdio: toolhost serve {toolhost:.0}, floor {native:.0}"
    );
    println!("  ratio Toolhost / floor: {:.2}x", toolhost / native);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    match std::env::args().nth(1).as_deref() {
        Some("--floor-stdio") => return runtime.block_on(floor_stdio()),
        Some("--floor-http") => return runtime.block_on(floor_http()),
        _ => {}
    }
    let cache = tempfile::tempdir().unwrap();
    // The store on tmpfs where there is one: every outcome is committed
    // (and synced) before its reply, and on a disk that sync, not the
    // front door, would be most of what is measured. One line below shows
    // it on the disk.
    let memory = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let disk = tempfile::tempdir().unwrap();
    let (state, on_disk) = (memory.path(), disk.path());
    if std::env::args().any(|a| a == "--callgrind") {
        return callgrind(cache.path(), state);
    }
    let micros = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
    runtime.block_on(async {
        println!(
            "the store in {} (tmpfs when /dev/shm exists)",
            state.display()
        );
        let direct = direct(state).await;
        let stdio = over_stdio(cache.path(), state).await;
        println!(
            "settled echo, direct                   mean {}",
            micros(direct)
        );
        println!(
            "settled echo, MCP over stdio (rmcp)    mean {}",
            micros(stdio)
        );
        println!(
            "  ratio MCP stdio / direct:            {:.1}x",
            stdio.as_secs_f64() / direct.as_secs_f64()
        );
        let synced = over_stdio(cache.path(), on_disk).await;
        println!(
            "settled echo, MCP over stdio, store on disk mean {}",
            micros(synced)
        );
        let floor = floor_over_stdio().await;
        println!(
            "native echo, rmcp over stdio (floor)   mean {}",
            micros(floor)
        );
        println!(
            "  ratio Toolhost stdio / floor (goal <= 1.2x): {:.2}x",
            stdio.as_secs_f64() / floor.as_secs_f64()
        );
        let bridge = bridged(cache.path(), state).await;
        println!(
            "echo of serve (stdio), bridged + settled mean {}",
            micros(bridge)
        );
        println!(
            "  ratio bridged / MCP client directly:   {:.2}x",
            bridge.as_secs_f64() / stdio.as_secs_f64()
        );
        let (mut server, url) = http_server(cache.path(), state);
        over_http(&url, 1).await;
        let one = over_http(&url, 1).await;
        let sixteen = over_http(&url, 16).await;
        println!("settled echo over HTTP, 1 client       {one:.0} calls/s");
        println!("settled echo over HTTP, 16 clients     {sixteen:.0} calls/s");
        let _ = server.kill();
        let (mut floor, url) = served(floor_command("--floor-http"));
        over_http(&url, 1).await;
        let floor_one = over_http(&url, 1).await;
        let floor_sixteen = over_http(&url, 16).await;
        let _ = floor.kill();
        println!("native echo over HTTP (floor), 1 client  {floor_one:.0} calls/s");
        println!("native echo over HTTP (floor), 16 clients {floor_sixteen:.0} calls/s");
        println!(
            "  ratio Toolhost / floor (goal >= 0.8x): 1 client {:.2}x, 16 clients {:.2}x",
            one / floor_one,
            sixteen / floor_sixteen
        );
    });
}
