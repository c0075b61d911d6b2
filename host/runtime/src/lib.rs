//! Toolhost's runtime: the wasm engine and its compile cache, compiling
//! under limits, loading plugins from their sources (files, bytes, OCI
//! references through `toolhost-oci`), activations, a fresh instance per
//! call under fuel, deadline and memory budgets, the plugin world's
//! imports, Code Mode's interpreter, and plugins' outbound HTTP (grants,
//! SSRF checks, budgets).
//!
//! It depends on `toolhost-model`, `toolhost-store`, `toolhost-core` and
//! (feature `oci`) `toolhost-oci`, and on nothing above: settlement, Code
//! Mode's tool and the facade are the `toolhost` crate's, which embedders
//! use; this crate's public items are the seams that crate builds on.

#![deny(missing_docs)]
// Its types hold wasmtime's engines, stores, linkers and pre-instances,
// which have nothing useful to show.
#![allow(missing_debug_implementations)]
// Module docs explain how their private parts work together.
#![allow(rustdoc::private_intra_doc_links)]

pub mod net;
pub mod wasm;

#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench_support;

// The crates below under the names their modules had when these were
// modules of `toolhost`.
use toolhost_core::{config, permission, registry};
use toolhost_model::{self as model, error, files};
#[cfg(feature = "oci")]
use toolhost_oci as oci;
