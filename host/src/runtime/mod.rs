//! The wasm runtime: the engine and its compile cache, loading and checking
//! components, activations, per-call stores, invoking a tool in a fresh
//! instance, classifying how a guest stopped, and the host side of the WIT
//! imports. Native Rust tools run here too, behind the same executor seam.

pub(crate) mod activation;
pub(crate) mod bindings;
pub(crate) mod cache;
pub(crate) mod classify;
pub(crate) mod compile;
pub(crate) mod compile_settings;
pub(crate) mod engine;
pub(crate) mod grants;
pub(crate) mod http;
pub(crate) mod imports;
pub(crate) mod invoke;
pub(crate) mod load;
pub(crate) mod native;
pub(crate) mod preflight;
pub(crate) mod program;
pub(crate) mod slots;
pub(crate) mod stdio;
pub(crate) mod store;
pub(crate) mod worker;
