//! The registry: placements, scopes and registrations (R1-R7), and the
//! snapshot each model request captures (R8-R12). It holds [`Tool`] values
//! only; it never runs them.
//!
//! [`Tool`]: toolhost_model::tool::Tool

pub mod placement;
pub mod scope;
pub mod snapshot;

pub use crate::model::tool::{NameError, RESERVED_NAME, normalize_name};
pub use placement::{Level, Registration, RegistrationError};
pub use scope::Scope;
pub use snapshot::{CatalogEntry, SnapshotOptions, ToolFilter};
