//! The MCP report: what serving over MCP adds to a settled call, measured
//! in one run: `echo` settled directly vs called through `toolhost serve`
//! over stdio (a child process, the official Rust SDK as client), and
//! settled echo calls per second over streamable HTTP with 1 and 16
//! concurrent clients; and the MCP bridge: `echo` of the same `toolhost
//! serve` settled through a bridging host vs called with the SDK's client.
//! `cargo bench -p toolhost-cli --bench mcp`.

use std::io::BufRead as _;
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

fn echo() -> CallToolRequestParams {
    let arguments = json!({"message": "hello"});
    let serde_json::Value::Object(arguments) = arguments else {
        unreachable!()
    };
    CallToolRequestParams::new("echo").with_arguments(arguments)
}

async fn direct() -> Duration {
    let outputs = tempfile::tempdir().unwrap();
    let host = Host::builder().state_dir(outputs.path()).build().unwrap();
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

async fn sequential(client: &RunningService<RoleClient, ()>, n: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        let r = client.call_tool(echo()).await.unwrap();
        assert_eq!(r.is_error, Some(false));
    }
    start.elapsed()
}

async fn over_stdio(cache: &std::path::Path) -> Duration {
    let mut command = tokio::process::Command::new(TOOLHOST);
    command
        .args(["serve", TEXT_TOOLS, "--cache-dir"])
        .arg(cache)
        .stderr(Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    sequential(&client, CALLS).await;
    let per_call = sequential(&client, CALLS).await / CALLS;
    client.cancel().await.unwrap();
    per_call
}

/// `echo` of `toolhost serve` over stdio, settled through a host that
/// bridges it (permission allowed by a rule, as a configured server's is).
async fn bridged(cache: &std::path::Path) -> Duration {
    let outputs = tempfile::tempdir().unwrap();
    let host = Host::builder()
        .state_dir(outputs.path())
        .rules(Rules(vec![Rule::new("mcp", "*", Effect::Allow)]))
        .build()
        .unwrap();
    let location = host.location("/bench");
    let args = ["serve", TEXT_TOOLS, "--cache-dir", &cache.to_string_lossy()].map(str::to_owned);
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
fn http_server(cache: &std::path::Path) -> (std::process::Child, String) {
    let mut child = Command::new(TOOLHOST)
        .args(["serve", TEXT_TOOLS, "--http", "127.0.0.1:0", "--cache-dir"])
        .arg(cache)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
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

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let micros = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
    runtime.block_on(async {
        let direct = direct().await;
        let stdio = over_stdio(cache.path()).await;
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
        let bridge = bridged(cache.path()).await;
        println!(
            "echo of serve (stdio), bridged + settled mean {}",
            micros(bridge)
        );
        println!(
            "  ratio bridged / MCP client directly:   {:.2}x",
            bridge.as_secs_f64() / stdio.as_secs_f64()
        );
        let (mut server, url) = http_server(cache.path());
        over_http(&url, 1).await;
        let one = over_http(&url, 1).await;
        let sixteen = over_http(&url, 16).await;
        println!("settled echo over HTTP, 1 client       {one:.0} calls/s");
        println!("settled echo over HTTP, 16 clients     {sixteen:.0} calls/s");
        let _ = server.kill();
    });
}
