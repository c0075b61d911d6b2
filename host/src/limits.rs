//! Every limit a guest, a client, a manifest or a file can push on, and
//! every default budget, each with its value and a one-line reason on its
//! own page. Budgets and output bounds can be changed per host (the
//! builder), per plugin (its manifest's `[limits]`) and, for budgets, per
//! call; the others are fixed safety limits unless their documentation
//! names a setting. docs/limits.md lists them all, and a test keeps it
//! honest.

// Budgets of one call.
pub use crate::model::budget::{
    DEFAULT_CONCURRENCY, DEFAULT_FUEL, DEFAULT_HTTP_CONCURRENCY, DEFAULT_HTTP_REQUEST_BYTES,
    DEFAULT_HTTP_REQUESTS, DEFAULT_HTTP_RESPONSE_BYTES, DEFAULT_MEMORY, DEFAULT_TIMEOUT,
    MAX_MEMORY,
};
pub use crate::wasm::store::{MAX_HANDLES_PER_CALL, MAX_HOST_COPY_BYTES};

// A Code Mode program.
pub use crate::wasm::code::imports::{
    MAX_CONSOLE_BYTES, MAX_PROGRAM_CALLS, MAX_PROGRAM_CALLS_IN_FLIGHT,
};

// What a result may carry.
pub use crate::model::budget::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, DEFAULT_MAX_MACHINE_OUTPUT};
pub use crate::model::schema::{MAX_COUNTED_VIOLATIONS, MAX_LISTED_VIOLATIONS};
pub use crate::model::text::MAX_MESSAGE_BYTES;
pub use crate::settle::content::{MAX_MEDIA_BYTES, MAX_RESULT_MEDIA_BYTES};
pub use crate::settle::metadata::MAX_METADATA_BYTES;
pub use crate::settle::pipeline::MAX_PARTIAL_BYTES;
pub use crate::wasm::imports::call::MAX_PROGRESS_BYTES;
pub use crate::wasm::stdio::MAX_CAPTURED_BYTES;

// What a plugin may register and ask.
pub use crate::model::tool::MAX_NAME_LEN;
pub use crate::wasm::imports::call::{MAX_PERMISSION_ITEMS, MAX_PERMISSION_TEXT};
pub use crate::wasm::imports::registry::{
    MAX_DESCRIPTION_BYTES, MAX_REGISTERED_BYTES, MAX_SCHEMA_BYTES, MAX_TOOLS_PER_ACTIVATION,
};

// The host.
pub use crate::config::compile::{DEFAULT_COMPILE_MEMORY, DEFAULT_COMPILE_TIMEOUT};
pub use crate::manifest::MAX_MANIFEST_BYTES;
pub use crate::output::retain::{
    DEFAULT_MEMORY_RETENTION_QUOTA, DEFAULT_RETENTION, DEFAULT_RETENTION_QUOTA,
};
pub use crate::sink::{EVENT_LOG_ROTATE_BYTES, EVENT_LOG_SEGMENTS};
pub use crate::store::{
    MAX_BATCH, MAX_LISTED_OUTPUTS, MAX_QUEUED_WRITES, MAX_STORED_EVENTS, OUTPUT_CHUNK_BYTES,
};
pub use crate::wasm::cache::DEFAULT_CACHE_LIMIT;
pub use crate::wasm::engine::DEFAULT_MAX_INSTANCES;
pub use crate::wasm::load::MAX_PLUGIN_BYTES;
pub use crate::wasm::retire::MAX_RETIRING;
pub use crate::wasm::warm::{WARM_IDLE, WARM_INSTANCES};

// Plugins from OCI registries (R41); a layer is bounded by `MAX_PLUGIN_BYTES`.
#[cfg(feature = "oci")]
pub use crate::oci::{
    MAX_OCI_CONFIG_BYTES, MAX_OCI_MANIFEST_BYTES, MAX_SIGNATURE_PAYLOAD_BYTES, MAX_SIGNATURES,
    MAX_SIGSTORE_BUNDLE_BYTES, OCI_CONNECT_TIMEOUT, OCI_PULL_TIMEOUT, OCI_READ_TIMEOUT,
};
