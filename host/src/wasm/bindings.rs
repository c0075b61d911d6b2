//! The one `bindgen!` of the host: the `toolhost:plugin@0.1.0` world, and
//! the host-side types it names (resources and trappable errors).

use crate::model::approval::PermissionDenied;
use crate::registry::placement::{Registration, RegistrationError};

wasmtime::component::bindgen!({
    path: "wit",
    world: "tool-plugin",
    imports: {
        // Asking the approver may wait on a person.
        "toolhost:plugin/call.request-permission": async | trappable,
        default: trappable,
    },
    // Calls into the guest are async so fuel can yield to cancellation.
    exports: { default: async },
    // Host functions return `Result<T, HostError>`: the guest-visible error,
    // or a trap, without `Ok(Err(..))` plumbing.
    trappable_error_type: {
        "toolhost:plugin/registry.registration-error" => RegisterError,
        "toolhost:plugin/call.permission-denied" => PermissionError,
    },
    with: {
        "toolhost:plugin/registry.registration": RegistrationHandle,
    },
});

/// The WIT package this host implements.
pub const WIT_PACKAGE: &str = "toolhost:plugin";

/// The WIT package version this host implements; plugins must match its
/// major.minor (0.1.x).
pub const WIT_VERSION: &str = "0.1.0";

/// The guest's handle on one registration; dropping it closes the
/// registration.
pub struct RegistrationHandle(pub(crate) Registration);

/// Why `register` refused, or a trap.
pub(crate) enum RegisterError {
    /// The registry refused the definitions.
    Refused(RegistrationError),
    /// `register` was called outside `activate`.
    NotActivating,
    /// A definition's schema does not compile: the tool and what is wrong.
    InvalidSchema {
        tool: String,
        message: String,
    },
    Trap(wasmtime::Error),
}

impl From<wasmtime::Error> for RegisterError {
    fn from(e: wasmtime::Error) -> Self {
        RegisterError::Trap(e)
    }
}

impl From<RegistrationError> for RegisterError {
    fn from(e: RegistrationError) -> Self {
        RegisterError::Refused(e)
    }
}

/// A refused permission request, or a trap.
pub(crate) enum PermissionError {
    Denied(PermissionDenied),
    Trap(wasmtime::Error),
}

impl From<wasmtime::Error> for PermissionError {
    fn from(e: wasmtime::Error) -> Self {
        PermissionError::Trap(e)
    }
}

/// A guest used an import where the contract forbids it (e.g. `progress`
/// during `activate`): a defect, told apart by this type.
#[derive(Debug)]
pub(crate) struct ImportMisuse(pub(crate) String);

impl std::fmt::Display for ImportMisuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ImportMisuse {}
