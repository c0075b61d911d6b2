//! Every limit a client or a bridged server can push on in the MCP server
//! and bridge, each with its value and a one-line reason on its own page;
//! the library's are in [`toolhost::limits`]. docs/limits.md lists both,
//! and a test keeps it honest.

// MCP servers bridged in.
pub use crate::bridge::{MCP_CONNECT_TIMEOUT, MCP_RECONNECT_MAX, MCP_RECONNECT_MIN};

// The front door (`toolhost serve`).
pub use crate::admission::{
    MAX_CALLS_IN_FLIGHT, MAX_CALLS_PER_SESSION, MAX_CALLS_WAITING, MAX_SLOT_WAIT,
    OUTCOME_FLUSH_LIMIT,
};
pub use crate::bindings::{MAX_SESSIONS, SESSION_IDLE_EXPIRY};
pub use crate::http::{
    AUTH_FETCH_TIMEOUT, KEY_REFETCH_INTERVAL, MAX_AUTH_DOCUMENT_BYTES, MAX_ISSUER_KEYS,
    MAX_TOKEN_BYTES, TOKEN_LEEWAY,
};
pub use crate::http::{
    BODY_IDLE_TIMEOUT, BODY_READ_TIMEOUT, CALLER_CONNECTION_SHARE_PERCENT, HEADER_READ_TIMEOUT,
    MAX_BUFFERED_REQUEST_BYTES, MAX_CONNECTIONS, MAX_INITIALIZE_BYTES, MAX_REQUEST_BODY_BYTES,
    MAX_UNBUDGETED_BYTES, REPLY_FLUSH_LIMIT,
};
pub use crate::http::{READY_CHECK_CACHE, READY_CHECK_TIMEOUT};
pub use crate::metrics::MAX_TOOL_LABELS;
pub use crate::sealed::{MAX_SEALED_ANSWERS, MAX_SEALED_STATE_BYTES, SEALED_STATE_LIFETIME};
pub use crate::server::MAX_LOADING_WAIT;
pub use crate::stdio::MAX_STDIO_MESSAGE_BYTES;
