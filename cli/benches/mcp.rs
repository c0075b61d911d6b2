//! The MCP report: what serving over MCP adds to a settled call, measured
//! in one run: `echo` settled directly vs called through `toolhost serve`
//! over stdio (a child process, the official Rust SDK as client), and
//! settled echo calls per second over streamable HTTP with 1 and 16
//! concurrent clients; and the MCP bridge: `echo` of the same `toolhost
//! serve` settled through a bridging host vs called with the SDK's client.
//! Beside each, the floor: a native `echo` served by the same SDK (this
//! binary, re-run as `--floor-stdio` or `--floor-http`), driven by the same
//! client, and the ratio of Toolhost to it: stdio latency (p50 and mean),
//! HTTP calls per second, and the server's CPU time per call (from
//! `/proc`). The servers compared take turns for a few rounds, all
//! started at once, and each ratio is the median of the rounds'.
//! `TOOLHOST_BIN=path` measures another build of `toolhost`.
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
use toolhost_mcp::McpConnection;
use toolhost_tests::context;

toolhost_tests::plugin_paths!();

/// The `toolhost` binary measured: this build's, or `TOOLHOST_BIN`'s (to
/// compare two builds under the same client and floor).
fn toolhost() -> String {
    std::env::var("TOOLHOST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolhost").into())
}

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

/// What a series of sequential calls over stdio measured.
#[derive(Clone)]
struct Series {
    mean: Duration,
    p50: Duration,
    /// The server's CPU time (user and system, every thread) per call.
    cpu: Duration,
}

impl Series {
    fn show(&self, what: &str) {
        println!(
            "{what:<40} p50 {}  mean {}  server CPU/call {}",
            micros(self.p50),
            micros(self.mean),
            micros(self.cpu)
        );
    }
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// CPU time `pid` has used so far, all its threads (those ended too):
/// utime and stime of `/proc/PID/stat`, in clock ticks.
fn cpu_time(pid: u32) -> Duration {
    let fields =
        toolhost_tests::procfs::stat_after_name(&pid.to_string()).expect("the server runs");
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads its argument.
    let per_second = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap();
    Duration::from_secs_f64(ticks as f64 / per_second as f64)
}

/// Warms up, then measures [`CALLS`] sequential calls of the stdio server
/// `command` runs.
async fn stdio_series(command: tokio::process::Command) -> Series {
    let server = StdioServer::start(command).await;
    let series = server.series().await;
    server.stop().await;
    series
}

/// A server over stdio under measurement: connected, warmed up.
struct StdioServer {
    client: RunningService<RoleClient, ()>,
    pid: u32,
}

impl StdioServer {
    async fn start(command: tokio::process::Command) -> StdioServer {
        let process = TokioChildProcess::new(command).unwrap();
        let pid = process.id().unwrap();
        let client = ().serve(process).await.unwrap();
        sequential(&client, CALLS).await;
        StdioServer { client, pid }
    }

    /// One series of [`CALLS`] calls.
    async fn series(&self) -> Series {
        let cpu = cpu_time(self.pid);
        let mut times = sequential(&self.client, CALLS).await;
        let cpu = (cpu_time(self.pid) - cpu) / CALLS;
        times.sort();
        Series {
            mean: times.iter().sum::<Duration>() / CALLS,
            p50: times[times.len() / 2],
            cpu,
        }
    }

    async fn stop(self) {
        self.client.cancel().await.unwrap();
    }
}

/// Each of `commands`' servers over stdio, all started, then measured in
/// turns for [`ROUNDS`] rounds (which goes first rotating), so drift falls
/// on all alike: per server, a series per round.
async fn stdio_in_turns(commands: Vec<tokio::process::Command>) -> Vec<Vec<Series>> {
    let mut servers = Vec::new();
    for command in commands {
        servers.push(StdioServer::start(command).await);
    }
    let mut rounds = vec![Vec::new(); servers.len()];
    for round in 0..ROUNDS {
        for turn in 0..servers.len() {
            let which = (round + turn) % servers.len();
            rounds[which].push(servers[which].series().await);
        }
    }
    for server in servers {
        server.stop().await;
    }
    rounds
}

/// A server's rounds summed up: the median of each measurement.
fn typical(rounds: &[Series]) -> Series {
    let middle = |pick: fn(&Series) -> Duration| {
        let mut values: Vec<Duration> = rounds.iter().map(pick).collect();
        values.sort();
        values[values.len() / 2]
    };
    Series {
        mean: middle(|s| s.mean),
        p50: middle(|s| s.p50),
        cpu: middle(|s| s.cpu),
    }
}

/// The floor over stdio; `workers` sets its runtime's threads (tokio reads
/// `TOKIO_WORKER_THREADS`), else one per CPU.
fn floor_over_stdio(workers: Option<u16>) -> tokio::process::Command {
    let mut command = tokio::process::Command::from(floor_command("--floor-stdio"));
    command.stderr(Stdio::null());
    if let Some(workers) = workers {
        command.env("TOKIO_WORKER_THREADS", workers.to_string());
    }
    command
}

/// Each call's round trip.
async fn sequential(client: &RunningService<RoleClient, ()>, n: u32) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let start = Instant::now();
        let r = client.call_tool(echo()).await.unwrap();
        times.push(start.elapsed());
        assert_eq!(r.is_error, Some(false));
    }
    times
}

/// `toolhost serve` over stdio; `workers` is its --workers, else the
/// default (one per CPU).
fn over_stdio(
    cache: &std::path::Path,
    state: &std::path::Path,
    workers: Option<u16>,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(toolhost());
    command
        .args(["serve", TEXT_TOOLS, "--cache-dir"])
        .arg(cache)
        .arg("--state-dir")
        .arg(state)
        .stderr(Stdio::null());
    if let Some(workers) = workers {
        command.args(["--workers", &workers.to_string()]);
    }
    command
}

/// [`over_stdio`] with every outcome synced to disk before its reply.
fn over_stdio_full(cache: &std::path::Path, state: &std::path::Path) -> tokio::process::Command {
    let mut command = over_stdio(cache, state, None);
    command.args(["--store-durability", "full"]);
    command
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
    let _bridge =
        McpConnection::connect(&location, McpServerConfig::stdio("inner", toolhost(), args))
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
    let mut command = Command::new(toolhost());
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

/// Calls per second over HTTP with `clients` concurrent clients, and the
/// server's (`pid`) CPU time per call.
async fn over_http(url: &str, pid: u32, clients: u32) -> (f64, Duration) {
    let mut connected = Vec::new();
    for _ in 0..clients {
        let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
        connected.push(().serve(transport).await.unwrap());
    }
    let per_client = CALLS / clients;
    let cpu = cpu_time(pid);
    let start = Instant::now();
    let runs = connected.iter().map(|c| sequential(c, per_client));
    futures::future::join_all(runs).await;
    let calls = per_client * clients;
    let rate = f64::from(calls) / start.elapsed().as_secs_f64();
    (rate, (cpu_time(pid) - cpu) / calls)
}

/// `--drive-stdio PROGRAM ARGS…`: the bench's stdio series against any
/// server command (to compare builds or settings under the same client).
async fn drive_stdio() {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let (program, args) = args
        .split_first()
        .expect("usage: mcp --drive-stdio PROGRAM ARGS…");
    let mut command = tokio::process::Command::new(program);
    command.args(args).stderr(Stdio::null());
    stdio_series(command).await.show(program);
}

/// `--drive-http URL PID CLIENTS`: the bench's HTTP client against a
/// server started by hand (to profile it under this load), for ten
/// rounds of [`CALLS`] calls.
async fn drive_http() {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let [url, pid, clients] = args.as_slice() else {
        panic!("usage: mcp --drive-http URL PID CLIENTS");
    };
    let (pid, clients) = (pid.parse().unwrap(), clients.parse().unwrap());
    // The client's TLS provider, which building a `Host` installs otherwise.
    let _ = rustls::crypto::ring::default_provider().install_default();
    for _ in 0..10 {
        let (rate, cpu) = over_http(url, pid, clients).await;
        println!("{rate:.0} calls/s, server CPU/call {}", micros(cpu));
    }
}

/// Rounds of each comparison with the floor. This machine's speed drifts
/// by up to 2× within minutes, so one measurement of each server, one
/// after the other, can put the drift into the ratio.
const ROUNDS: usize = 3;

/// An HTTP server under measurement: its URL and process id.
type Served<'a> = (&'a str, u32);

/// Toolhost's HTTP calls/s and server CPU per call against the floor's,
/// at 1 and 16 clients: both warmed up, then measured in turns for
/// [`ROUNDS`] rounds (which goes first alternating), so drift falls
/// on both alike. Prints each round and the median of the rounds' ratios.
async fn compare_http(toolhost: Served<'_>, floor: Served<'_>) {
    for (url, pid) in [toolhost, floor] {
        over_http(url, pid, 1).await;
    }
    for clients in [1, 16] {
        let (mut rates, mut cpus) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let ((rate, cpu), (floor_rate, floor_cpu)) = if round % 2 == 0 {
                let ours = over_http(toolhost.0, toolhost.1, clients).await;
                (ours, over_http(floor.0, floor.1, clients).await)
            } else {
                let theirs = over_http(floor.0, floor.1, clients).await;
                (over_http(toolhost.0, toolhost.1, clients).await, theirs)
            };
            println!(
                "HTTP, {clients:>2} clients: Toolhost {rate:.0} calls/s (server CPU/call {}), floor {floor_rate:.0} calls/s ({})",
                micros(cpu),
                micros(floor_cpu)
            );
            rates.push(rate / floor_rate);
            cpus.push(ratio(cpu, floor_cpu));
        }
        println!(
            "  Toolhost / floor, median of {ROUNDS} rounds: calls/s {:.2}x (goal >= 0.8x), server CPU/call {:.2}x (goal <= 1.5x)",
            median(&mut rates),
            median(&mut cpus)
        );
    }
}

/// `a` over `b`: how many times `b` fits in `a`.
fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

/// The middle value of `values` (the upper one of an even count).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
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
        .args(["-q", "--tool=none", "--trace-children=yes", &toolhost()])
        .args(["compile", TEXT_TOOLS, "--max-instances", "4", "--cache-dir"])
        .arg(cache)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(compiled.success());
    let serve: Vec<OsString> = [&toolhost(), "serve", TEXT_TOOLS, "--max-instances", "4"]
        .into_iter()
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
        Some("--drive-http") => return runtime.block_on(drive_http()),
        Some("--drive-stdio") => return runtime.block_on(drive_stdio()),
        _ => {}
    }
    let cache = tempfile::tempdir().unwrap();
    // As shipped: the embedded store in a state directory on the ordinary
    // disk (under the target directory), at its default durability. The
    // store on tmpfs and `--store-durability full` are variants, labelled.
    let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let memory = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let full = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let state = disk.path();
    if std::env::args().any(|a| a == "--callgrind") {
        return callgrind(cache.path(), state);
    }
    runtime.block_on(async {
        println!(
            "as shipped: the store in {} (the disk), durability normal",
            state.display()
        );
        let direct = direct(state).await;
        println!(
            "settled echo, direct (library)           mean {}",
            micros(direct)
        );
        // Two servers on one store would contend for it.
        let single_state = state.join("one-worker");
        std::fs::create_dir_all(&single_state).unwrap();
        let turns = stdio_in_turns(vec![
            over_stdio(cache.path(), state, None),
            floor_over_stdio(None),
            // One worker each: no hand-offs between threads on either side.
            over_stdio(cache.path(), &single_state, Some(1)),
            floor_over_stdio(Some(1)),
        ])
        .await;
        let [stdio, floor, single, single_floor] = <[_; 4]>::try_from(turns).ok().unwrap();
        let stdio_typical = typical(&stdio);
        stdio_typical.show("settled echo, MCP over stdio, as shipped");
        stdio_series(over_stdio(cache.path(), memory.path(), None))
            .await
            .show("the same, store on tmpfs");
        stdio_series(over_stdio_full(cache.path(), full.path()))
            .await
            .show("the same, --store-durability full");
        typical(&floor).show("native echo, rmcp over stdio (floor)");
        let ratios = |what: &str, toolhost: &[Series], floor: &[Series]| {
            let pairs = || toolhost.iter().zip(floor);
            let mut p50: Vec<f64> = pairs().map(|(t, f)| ratio(t.p50, f.p50)).collect();
            let mut cpu: Vec<f64> = pairs().map(|(t, f)| ratio(t.cpu, f.cpu)).collect();
            println!(
                "  {what}, median of {ROUNDS} rounds: p50 {:.2}x (goal <= 1.5x), server CPU/call {:.2}x",
                median(&mut p50),
                median(&mut cpu)
            )
        };
        ratios("Toolhost stdio / floor", &stdio, &floor);
        typical(&single).show("the same, serve --workers 1");
        typical(&single_floor).show("the floor, one worker thread");
        ratios("--workers 1 / floor", &single, &floor);
        ratios("--workers 1 / floor on one worker", &single, &single_floor);
        let bridge = bridged(cache.path(), state).await;
        println!(
            "echo of serve (stdio), bridged + settled mean {}",
            micros(bridge)
        );
        println!(
            "  ratio bridged / MCP client directly:   {:.2}x",
            ratio(bridge, stdio_typical.mean)
        );
        let (mut server, url) = http_server(cache.path(), state);
        let (mut floor, floor_url) = served(floor_command("--floor-http"));
        compare_http((&url, server.id()), (&floor_url, floor.id())).await;
        let _ = server.kill();
        let _ = floor.kill();
    });
}
