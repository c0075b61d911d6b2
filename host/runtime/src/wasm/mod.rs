//! The wasm runtime: the engine and its compile cache, compiling under
//! limits (in a worker process), reading and checking components,
//! activations, per-call stores, invoking a tool in a fresh instance,
//! classifying how a guest stopped, fair slots, and the host side of the
//! plugin world's imports.

pub mod activation;
pub mod bindings;
pub mod cache;
pub mod classify;
pub mod code;
pub mod compile;
pub mod engine;
pub mod imports;
pub mod invoke;
pub mod load;
pub mod preflight;
pub mod retire;
pub mod slots;
pub mod stdio;
pub mod store;
pub mod tiers;
pub mod warm;
pub mod wasi;
pub mod worker;

/// An engine error from wasmtime's, kept as its source (an embedder can
/// downcast it) with its whole chain in the message.
pub(crate) fn engine_error(e: wasmtime::Error) -> crate::error::Error {
    crate::error::Error::Engine {
        message: format!("{e:#}"),
        source: Some(e.into_boxed_dyn_error()),
    }
}
