//! The host side of Code Mode's interpreter component: compiling it in the
//! background, running one program in a fresh instance, and the
//! `toolhost:code` imports through which the program's tool calls reach a
//! settler. What those calls settle against (snapshots, settlement) is the
//! `toolhost` crate's; it hands each run a [`Settler`](imports::Settler).

pub mod compiling;
pub mod imports;
pub mod interpreter;
