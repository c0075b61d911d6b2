//! The one `bindgen!` of the host: the `toolhost:plugin@0.1.0` world.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tool-plugin",
    imports: {
        // Asking the approver may wait on a person.
        "toolhost:plugin/call.request-permission": async | trappable,
        default: trappable,
    },
    // Calls into the guest are async so fuel can yield to cancellation.
    exports: { default: async },
    with: {
        "toolhost:plugin/registry.registration": crate::imports::registry::RegistrationHandle,
    },
});

/// The WIT package this host implements.
pub const WIT_PACKAGE: &str = "toolhost:plugin";

/// The WIT package version this host implements; plugins must match its
/// major.minor (0.1.x).
pub const WIT_VERSION: &str = "0.1.0";
