//! The one integration-test binary: every area of the library and the
//! `toolhost` CLI, driving real wasm components built from
//! `example-plugins/` (one module per area, linking wasmtime once).

// A plugin path no test uses fails the build: every example plugin is
// exercised.
#![deny(dead_code)]

toolhost_tests::plugin_paths!();

mod bridge;
mod capabilities;
mod cli;
mod code_mode;
mod compile_limits;
mod docs;
mod embedding;
mod event_log;
mod execution;
mod hardening;
mod http;
mod loading;
mod new;
mod oci;
mod ops;
mod packaging;
mod polyglot;
mod properties;
mod registry;
mod sessions;
mod settlement;
mod std_tools;
mod stdio;
mod store;
mod tiering;
mod wit_versions;
