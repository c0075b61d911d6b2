//! R37: what the HTTP front door holds, counted byte for byte: a session
//! that expired (or was evicted) leaves nothing behind.
//!
//! A test binary of its own: it counts every allocation of the process
//! (`#[global_allocator]`), which the integration binary's tests, running
//! side by side, would blur.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use toolhost::{Tool, ToolResponse};
use toolhost_mcp::{HttpOptions, McpServer};
use toolhost_tests::host;

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to `System` with the caller's arguments; the
// counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promised for `layout`.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promised for `layout`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: `p` came from this allocator with `layout`.
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        // SAFETY: `p` came from this allocator with `layout`.
        let q = unsafe { System.realloc(p, layout, size) };
        if !q.is_null() {
            LIVE.fetch_add(size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// How long a session lives without a request here: short, so the test
/// waits little for the expiry it measures.
const IDLE: Duration = Duration::from_millis(200);

/// One request on a connection of its own; the value of its
/// `mcp-session-id` header, if the reply has one.
async fn post(addr: SocketAddr, body: &str, session: Option<&str>) -> Option<String> {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let session = session.map_or(String::new(), |s| {
        format!("mcp-session-id: {s}\r\nmcp-protocol-version: 2025-06-18\r\n")
    });
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\n{session}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    tcp.read_to_end(&mut reply).await.unwrap();
    let reply = String::from_utf8_lossy(&reply);
    reply
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .map(str::to_owned)
}

/// A 2025-era session: `initialize`, then `notifications/initialized`.
async fn session(addr: SocketAddr, version: &str, n: usize) {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "flood", "version": "1"}}
    });
    let id = post(addr, &initialize.to_string(), None)
        .await
        .expect("a session id");
    if n.is_multiple_of(3) {
        return;
    }
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(addr, &initialized.to_string(), Some(&id)).await;
    if n % 3 == 1 {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}}});
        post(addr, &call.to_string(), Some(&id)).await;
    }
}

/// The sessions the server counts open (its `sessions` gauge).
fn open_sessions(server: &McpServer) -> u64 {
    let metrics = server.encode_metrics();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("toolhost_sessions "))
        .expect("the sessions gauge");
    line["toolhost_sessions ".len()..].trim().parse().unwrap()
}

/// The bytes live once the flood's sessions have all expired: the server
/// counts none open, and the bytes live have stopped falling (the SDK's
/// workers end on timers), looked at every `IDLE`, within a bound.
async fn settled_live(server: &McpServer) -> usize {
    let mut last = usize::MAX;
    for _ in 0..PATIENCE_ROUNDS {
        tokio::time::sleep(IDLE).await;
        let now = LIVE.load(Ordering::Relaxed);
        if open_sessions(server) == 0 && now >= last {
            return now;
        }
        last = now;
    }
    panic!(
        "the flood's sessions did not all end: {} still counted open",
        open_sessions(server)
    );
}

/// Looks at the sessions this many times, `IDLE` apart, before failing.
const PATIENCE_ROUNDS: usize = 300;

/// Sessions per round: most are evicted (the limit is far lower), the
/// last ones expire.
const ROUND: usize = 600;

/// One round's sessions, of both resumable and plain eras: a third only
/// initialize (their handler never learns its session's id), a third
/// also send `initialized`, a third also call a tool.
async fn flood(addr: SocketAddr) {
    for n in 0..ROUND {
        let version = if n.is_multiple_of(2) {
            "2025-11-25"
        } else {
            "2025-06-18"
        };
        session(addr, version, n).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r37_expired_and_evicted_sessions_leave_nothing_behind() {
    let (host, _outputs) = host();
    let location = host.location("/r37-sessions");
    let echo = Tool::native("echo", json!({"type": "object"}), None, |_, _| async {
        Ok(ToolResponse::default())
    })
    .unwrap();
    let _registered = location.register([("echo", echo)]).unwrap();
    let server = McpServer::new(location);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let options = HttpOptions {
        session_idle: IDLE,
        max_sessions: 50,
        ..HttpOptions::default()
    };
    let http = server.http(listener, options).unwrap();
    let stop = CancellationToken::new();
    let running = tokio::spawn(http.run(stop.clone()));
    // The first round grows what is kept for reuse (maps, pools); the
    // next two must leave the bytes live where it left them.
    flood(addr).await;
    let warm = settled_live(&server).await;
    flood(addr).await;
    flood(addr).await;
    let after = settled_live(&server).await;
    let per_session = after.saturating_sub(warm) / (2 * ROUND);
    assert!(
        per_session < MAX_BYTES_LEFT_PER_SESSION,
        "{} bytes more live after {} more sessions ended ({per_session} each)",
        after.saturating_sub(warm),
        2 * ROUND
    );
    stop.cancel();
    running.await.unwrap().unwrap();
}

/// What an ended session may leave live, on average: far below what any
/// one session holds (its handler, channels and binding are kilobytes).
const MAX_BYTES_LEFT_PER_SESSION: usize = 16;
