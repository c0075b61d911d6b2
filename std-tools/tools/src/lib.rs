//! The standard toolset: opencode's built-in file and web tools, written
//! with `toolhost-sdk`, confined to one granted directory (the root).
//!
//! Every tool takes paths relative to the root (an absolute path under it
//! is accepted too), refuses paths that leave it through `..` or a
//! symbolic link, and asks permission before it acts: action `read`,
//! `glob`, `grep`, `list` or `webfetch`, and `edit` for `write`, `edit`
//! and `apply_patch`, with the root-relative paths (the pattern for `glob`
//! and `grep`, the URL for `webfetch`) as resources. A tool returns its
//! whole result and lets the host bound it; where it stops early itself
//! (a page, a limit) it says exactly what it left out.
//!
//! The plugins `toolhost-std-read` and `toolhost-std-edit` export these
//! tools; the `toolhost` CLI embeds both (`--std DIR`).
#![deny(missing_docs)]

mod alias;
pub mod edit;
pub mod patch;
pub mod read;
pub mod root;
pub mod search;
pub mod text;
pub mod webfetch;
pub mod write;

pub use edit::Edit;
pub use patch::ApplyPatch;
pub use read::Read;
pub use search::{GlobTool as Glob, Grep, List};
pub use webfetch::WebFetch;
pub use write::Write;
