//! The wasm runtime: the engine and its compile cache, compiling under
//! limits (in a worker process), reading and checking components,
//! activations, per-call stores, invoking a tool in a fresh instance,
//! classifying how a guest stopped, fair slots, and the host side of the
//! plugin world's imports.

pub(crate) mod activation;
pub(crate) mod bindings;
pub(crate) mod cache;
pub(crate) mod classify;
pub(crate) mod compile;
pub(crate) mod engine;
pub(crate) mod imports;
pub(crate) mod invoke;
pub(crate) mod load;
pub(crate) mod preflight;
pub(crate) mod retire;
pub(crate) mod slots;
pub(crate) mod stdio;
pub(crate) mod store;
pub(crate) mod tiers;
pub(crate) mod warm;
pub(crate) mod wasi;
pub(crate) mod worker;

/// An engine error from wasmtime's, kept as its source (an embedder can
/// downcast it) with its whole chain in the message.
pub(crate) fn engine_error(e: wasmtime::Error) -> crate::error::Error {
    crate::error::Error::Engine {
        message: format!("{e:#}"),
        source: Some(e.into_boxed_dyn_error()),
    }
}
