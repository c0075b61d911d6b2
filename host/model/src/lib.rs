//! The bottom layer of Toolhost: the values every other layer speaks in
//! (calls, contexts, budgets, outcomes, tools, schemas, events), the
//! errors, bounded file reading, and native Rust tools. Nothing here runs a
//! guest, opens a store or knows about the registry; it depends on no other
//! Toolhost crate but the tool-name rules.
//!
//! Embedders use these types through the `toolhost` crate, which
//! re-exports them; the crates between (`toolhost-store`, `toolhost-core`,
//! `toolhost-oci`, `toolhost-runtime`) use them directly.

#![deny(missing_docs)]

pub mod approval;
pub mod budget;
pub mod call;
pub mod content;
pub mod context;
pub mod error;
pub mod event;
pub mod execution;
pub mod files;
pub mod hook;
pub mod interrupt;
mod native;
pub mod outcome;
pub mod plugin;
pub mod schema;
pub mod source;
pub mod text;
pub mod tool;
