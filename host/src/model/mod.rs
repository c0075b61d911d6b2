//! The model: values every other layer speaks in. Nothing here runs a
//! guest, touches a file or knows about the registry.

pub(crate) mod approval;
pub(crate) mod budget;
pub(crate) mod call;
pub(crate) mod content;
pub(crate) mod context;
pub(crate) mod event;
pub(crate) mod execution;
pub(crate) mod hook;
pub(crate) mod outcome;
pub(crate) mod plugin;
pub(crate) mod schema;
pub(crate) mod source;
pub(crate) mod text;
pub(crate) mod tool;
