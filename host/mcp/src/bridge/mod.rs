//! MCP servers as tool sources (R33): a server's tools are registered in a
//! location like a plugin's, as one registration in a scope the connection
//! owns, and settled through the same pipeline (input checked before
//! anything is sent, output checked, bounded, retained, recorded).
//!
//! A bridged server runs outside Toolhost's sandbox, so every call first
//! asks permission `mcp` on `<server>/<tool>` (default: ask). The server's
//! progress becomes the call's progress; cancelling the call or reaching
//! its deadline settles it at once and tells the server
//! (`notifications/cancelled`). `notifications/tools/list_changed` swaps
//! the registration without a gap; when the server exits or the connection
//! drops, its tools close, calls in flight fail naming the server, and the
//! bridge reconnects with backoff.

mod client;
mod connection;
mod convert;
mod shared;
mod tool;

use std::time::Duration;

pub use connection::McpConnection;

/// How long connecting (the handshake and the first `tools/list`) may take
/// before the server is given up on: a server that never answers must not
/// hold its caller forever.
pub const MCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The first wait before reconnecting to a server that went away; each
/// failed attempt doubles it, up to [`MCP_RECONNECT_MAX`]. Each wait adds
/// up to as much again at random (jitter), so replicas that lost the same
/// server do not retry in step.
pub const MCP_RECONNECT_MIN: Duration = Duration::from_millis(100);

/// The longest wait between reconnection attempts: a server that keeps
/// crashing costs at most one spawn or request per this interval.
pub const MCP_RECONNECT_MAX: Duration = Duration::from_secs(30);
