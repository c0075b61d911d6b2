//! The host's bindings of the `toolhost:plugin` world: one `bindgen!` per
//! kept version, each from its own directory under `wit/` (a released world
//! never changes; see `wit/README.md`), and the host-side types they name
//! (resources and trappable errors).
//!
//! The host implements the newest kept world: its imports, activation and
//! calls are written against that world's bindings, re-exported here.
//! Keeping a new version means a directory `wit/vX.Y`, a module here and an
//! entry in [`KEPT`]; the version it replaces keeps its module, and an
//! adapter converts between its types and the newest world's, so its
//! plugins still load; preflight, which already finds the one kept version
//! a plugin is built for, then also tells the loader which bindings to use.

use crate::model::approval::PermissionDenied;
use crate::registry::placement::{Registration, RegistrationError};

/// `toolhost:plugin@0.1.x`, from `wit/v0.1`.
#[allow(missing_docs)] // generated from the WIT, documented there
pub(crate) mod v0_1 {
    wasmtime::component::bindgen!({
        path: "wit/v0.1",
        world: "tool-plugin",
        imports: {
            // Asking the approver may wait on a person.
            "toolhost:plugin/call.request-permission": async | trappable,
            default: trappable,
        },
        // Calls into the guest are async so fuel can yield to cancellation.
        exports: { default: async },
        // Host functions return `Result<T, HostError>`: the guest-visible
        // error, or a trap, without `Ok(Err(..))` plumbing.
        trappable_error_type: {
            "toolhost:plugin/registry.registration-error" => crate::wasm::bindings::RegisterError,
            "toolhost:plugin/call.permission-denied" => crate::wasm::bindings::PermissionError,
        },
        with: {
            "toolhost:plugin/registry.registration": crate::wasm::bindings::RegistrationHandle,
        },
    });
}

// The newest kept world, which the rest of the host names through this
// module (`bindings::toolhost::plugin::…`, `bindings::ToolPluginPre`).
pub use v0_1::*;

/// The WIT package this host implements.
pub const WIT_PACKAGE: &str = "toolhost:plugin";

/// The newest version of [`WIT_PACKAGE`] this host implements.
pub const WIT_VERSION: &str = "0.1.0";

/// Every version (major.minor) of [`WIT_PACKAGE`] this host loads, newest
/// first: each has a module above and a directory `wit/v{version}`. A
/// plugin matches a kept version when every interface of the package it
/// imports or exports is of that major.minor.
pub(crate) const KEPT: &[&str] = &["0.1"];

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
pub enum PermissionError {
    /// The rules or the approver refused.
    Denied(PermissionDenied),
    /// The host could not ask: the guest traps.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `package` line of a kept version's world, as the host's copy of
    /// the WIT has it.
    fn package_line(version: &str) -> String {
        let dir = format!("{}/wit/v{version}", env!("CARGO_MANIFEST_DIR"));
        let wit = std::fs::read_to_string(format!("{dir}/world.wit"))
            .unwrap_or_else(|e| panic!("{dir}/world.wit (a kept version): {e}"));
        wit.lines()
            .find(|line| line.starts_with("package "))
            .unwrap_or_else(|| panic!("{dir}/world.wit has no package line"))
            .to_owned()
    }

    #[test]
    fn every_kept_version_has_its_directory_and_the_newest_is_implemented() {
        for version in KEPT {
            let line = package_line(version);
            assert!(
                line.starts_with(&format!("package {WIT_PACKAGE}@{version}.")),
                "wit/v{version} holds `{line}`"
            );
        }
        assert_eq!(
            package_line(KEPT[0]),
            format!("package {WIT_PACKAGE}@{WIT_VERSION};")
        );
        let dirs = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/wit")).unwrap();
        for dir in dirs {
            let name = dir.unwrap().file_name().into_string().unwrap();
            if let Some(version) = name.strip_prefix('v') {
                assert!(KEPT.contains(&version), "wit/{name} is not in KEPT");
            }
        }
    }
}
