//! The facade embedders use: a [`Host`](host::Host) built once, a
//! [`Location`](location::Location) per workspace, a
//! [`Snapshot`](snapshot::Snapshot) per model request.

pub(crate) mod host;
pub(crate) mod location;
pub(crate) mod snapshot;
