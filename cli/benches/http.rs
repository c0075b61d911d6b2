//! The outbound-HTTP report: one loopback GET through a plugin
//! (`http-tools` `fetch_json`, a settled call: fresh instance, grant and
//! address checks, budgets, audit) vs the same GET from native Rust
//! (hyper), each on a new connection, measured in one run.
//! `cargo bench -p toolhost-cli --bench http`.

use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use toolhost::config::{Grants, PluginOptions};
use toolhost::{Call, Host};
use toolhost_tests::context;

toolhost_tests::plugin_paths!();

/// Requests measured per series, after as many for warming up.
const REQUESTS: u32 = 500;

const BODY: &str = r#"{"ok": true}"#;

/// A loopback server answering every request with a small JSON body.
async fn server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                read_request(&mut stream).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BODY}",
                    BODY.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    addr
}

/// Reads a whole request, so closing the connection never resets it: the
/// head, and a chunked body's end if it has one.
async fn read_request(stream: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        let head_end = seen.windows(4).position(|w| w == b"\r\n\r\n");
        if let Some(end) = head_end {
            let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
            if !head.contains("transfer-encoding: chunked") || seen.ends_with(b"0\r\n\r\n") {
                return;
            }
        }
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

async fn native(addr: std::net::SocketAddr) -> Duration {
    let once = || async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::get("/")
            .header("host", addr.to_string())
            .body(Empty::<bytes::Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let _: serde_json::Value = serde_json::from_slice(&body).unwrap();
    };
    for _ in 0..REQUESTS {
        once().await;
    }
    let start = Instant::now();
    for _ in 0..REQUESTS {
        once().await;
    }
    start.elapsed() / REQUESTS
}

async fn through_plugin(addr: std::net::SocketAddr) -> Duration {
    let outputs = tempfile::tempdir().unwrap();
    let host = Host::builder().state_dir(outputs.path()).build().unwrap();
    let location = host.location("/bench");
    let options = PluginOptions {
        grants: Grants {
            http: vec![format!("http://{addr}/*").parse().unwrap()],
            ..Default::default()
        },
        ..Default::default()
    };
    let _a = location.load(HTTP_TOOLS, &options).await.unwrap();
    let snapshot = location.snapshot();
    let input = json!({"url": format!("http://{addr}/")}).to_string();
    let run = |n| {
        let (snapshot, input) = (snapshot.clone(), input.clone());
        async move {
            let start = Instant::now();
            for _ in 0..n {
                let s = snapshot
                    .settle(Call::new("fetch_json", input.clone(), context("b")))
                    .await;
                assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
            }
            start.elapsed()
        }
    };
    run(REQUESTS).await;
    run(REQUESTS).await / REQUESTS
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let addr = server().await;
        let native = native(addr).await;
        let plugin = through_plugin(addr).await;
        let micros = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
        println!(
            "loopback GET, native Rust (hyper)         mean {}",
            micros(native)
        );
        println!(
            "loopback GET, through a plugin (settled)  mean {}",
            micros(plugin)
        );
        println!(
            "  ratio plugin / native:                  {:.1}x",
            plugin.as_secs_f64() / native.as_secs_f64()
        );
    });
}
