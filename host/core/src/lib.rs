//! Toolhost's configuration layer: configuration as data (plugin options,
//! grants, HTTP grants and blocked networks, compile limits, MCP servers),
//! manifests (TOML into configuration), permission rules and the policy
//! that applies them, the registry of tools and their snapshots, output
//! bounding and retention, the JSON Lines event log, and the TLS client
//! configuration outbound connections share.
//!
//! It depends on `toolhost-model` and `toolhost-store` (saved permission
//! answers, retained outputs), and nothing here runs a guest. Embedders
//! reach these modules through `toolhost` (`toolhost::config`,
//! `toolhost::manifest`, `toolhost::permission`, `toolhost::registry`);
//! `output` and `sink` are for the crates above.

#![deny(missing_docs)]

pub mod config;
pub mod manifest;
pub mod output;
pub mod permission;
pub mod registry;
pub mod sink;
pub mod tls;

// The crates below under the names their modules had when these were
// modules of `toolhost`.
use toolhost_model as model;
use toolhost_model::{error, files};
use toolhost_store as store;
