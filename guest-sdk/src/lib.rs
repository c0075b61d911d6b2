//! Write [Toolhost](https://example.invalid/toolhost) tool plugins in Rust.
//!
//! A plugin is a WebAssembly component (`wasm32-wasip2`) that provides typed
//! tools to an agent. With this crate a tool is a type implementing [`Tool`]:
//! its input and output are ordinary Rust types whose JSON Schemas (draft
//! 2020-12) are derived with `schemars`, so the doc comments on their fields
//! are what the model reads. [`plugin!`] exports the plugin: it registers every
//! tool when the host activates the plugin and dispatches each call to the
//! right tool.
//!
//! # Example
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! toolhost-sdk = { path = "../guest-sdk" }
//! ```
//!
//! `src/lib.rs`:
//!
//! ```
//! use toolhost_sdk::prelude::*;
//!
//! /// Repeat a message back.
//! struct Echo;
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(crate = "toolhost_sdk::serde")]
//! #[schemars(crate = "toolhost_sdk::schemars")]
//! struct EchoInput {
//!     /// The message to repeat.
//!     message: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! #[serde(crate = "toolhost_sdk::serde")]
//! #[schemars(crate = "toolhost_sdk::schemars")]
//! struct EchoOutput {
//!     /// The message, unchanged.
//!     message: String,
//! }
//!
//! impl Tool for Echo {
//!     const NAME: &'static str = "echo";
//!     const DESCRIPTION: &'static str = "Repeat a message back.";
//!     type Input = EchoInput;
//!     type Output = EchoOutput;
//!
//!     fn execute(input: EchoInput, _cx: &Context) -> ToolResult<EchoOutput> {
//!         if input.message.is_empty() {
//!             return Err("the message is empty; pass the text to repeat".into());
//!         }
//!         let text = input.message.clone();
//!         Ok(Response::new(EchoOutput { message: input.message }).with_text(text))
//!     }
//! }
//!
//! /// Shout: a tool with no machine output, only content.
//! struct Shout;
//!
//! impl Tool for Shout {
//!     const NAME: &'static str = "shout";
//!     const DESCRIPTION: &'static str = "Repeat a message in capitals.";
//!     type Input = EchoInput;
//!     type Output = NoOutput;
//!
//!     fn execute(input: EchoInput, cx: &Context) -> ToolResult<NoOutput> {
//!         cx.progress(json!({ "stage": "shouting" }));
//!         Ok(Response::text(input.message.to_uppercase()))
//!     }
//! }
//!
//! /// Plugin-wide hooks (optional: `plugin!([Echo, Shout]);` needs none).
//! struct Greeter;
//!
//! impl Plugin for Greeter {
//!     fn activate(config: &Value) -> Result<(), String> {
//!         match config.get("volume") {
//!             None | Some(Value::Number(_)) => Ok(()),
//!             Some(other) => Err(format!("`volume` must be a number, got {other}")),
//!         }
//!     }
//! }
//!
//! toolhost_sdk::plugin!(Greeter => [Echo, Shout]);
//! # fn main() {}
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --release`; the component
//! is `target/wasm32-wasip2/release/<crate>.wasm`.
//!
//! # Deriving without depending on serde and schemars
//!
//! The crate re-exports [`serde`], [`schemars`] and [`serde_json`], and the
//! [`prelude`] brings the derive macros into scope. The derived code refers to
//! its crate by name, so a plugin that does not depend on `serde` and
//! `schemars` itself tells both derives where they live, as above:
//!
//! ```text
//! #[serde(crate = "toolhost_sdk::serde")]
//! #[schemars(crate = "toolhost_sdk::schemars")]
//! ```
//!
//! Give both: `schemars` also reads `#[serde(crate)]` when there is no
//! `#[schemars(crate)]`, and would then look in the wrong place. A plugin that
//! depends on `serde` 1 and `schemars` 1 directly needs neither attribute.
//!
//! # Contract
//!
//! - A tool with an `Output` type returns it ([`Response::new`]); the host
//!   validates it against the derived schema.
//! - A tool with [`NoOutput`] must return non-empty content; the host rejects
//!   an empty response.
//! - [`ToolError`] is a failure the model sees. A panic is a defect of the
//!   plugin, reported to the operator, not to the model.
//! - Every call runs in a fresh instance: statics start over on each call, and
//!   nothing done in [`Plugin::activate`] is visible to a call.
//! - Filesystem, environment and other WASI capabilities exist only as far as
//!   the host granted them; `std::fs` works on the directories it preopened.
#![deny(missing_docs)]

mod context;
mod error;
#[cfg(feature = "http")]
mod http;
mod json;
mod plugin;
mod response;
mod tool;

pub use context::Context;
pub use error::{PermissionDenied, ToolError};
#[cfg(feature = "http")]
pub use http::{HttpError, HttpResponse, wstd};
pub use plugin::Plugin;
pub use response::{Content, Media, Response, ToolResult};
pub use tool::{NoInput, NoOutput, Tool, ToolOutput};

pub use schemars;
pub use serde;
pub use serde_json;

/// Everything a plugin usually needs: `use toolhost_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Content, Context, Media, NoInput, NoOutput, PermissionDenied, Plugin, Response, Tool,
        ToolError, ToolResult,
    };
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{Value, json};
}

/// The raw bindings of the `toolhost:plugin` world. Not a stable API: use the
/// types at the crate root instead.
#[doc(hidden)]
#[allow(missing_docs)] // generated from the documented WIT
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "tool-plugin",
        // `plugin!` expands the export macro inside the plugin crate, so it
        // must be reachable from there.
        pub_export_macro: true,
        export_macro_name: "__export_world",
        default_bindings_module: "toolhost_sdk::bindings",
    });
}

/// Used by the expansion of [`plugin!`]; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::exports::toolhost::plugin::plugin::{
        CallContext, Guest, ToolFailure, ToolResponse,
    };
    pub use crate::plugin::{NoHooks, ToolEntry, activate, execute};
}

/// Export a plugin providing the given tools.
///
/// ```text
/// toolhost_sdk::plugin!([Echo, WordCount]);             // no plugin hooks
/// toolhost_sdk::plugin!(MyPlugin => [Echo, WordCount]); // MyPlugin: Plugin
/// ```
///
/// Invoke it once, in the plugin's `cdylib` crate. On activation the plugin
/// runs [`Plugin::activate`] and then registers all the tools in one atomic
/// call, keeping the registration alive for the life of the activation; a
/// registration error fails activation with a message naming the tool. Each
/// call is dispatched by the tool's [`Tool::NAME`] through a static table.
#[macro_export]
macro_rules! plugin {
    ([$($tool:ty),+ $(,)?]) => {
        $crate::plugin!($crate::__private::NoHooks => [$($tool),+]);
    };
    ($plugin:ty => [$($tool:ty),+ $(,)?]) => {
        const _: () = {
            static TOOLS: &[$crate::__private::ToolEntry] =
                &[$($crate::__private::ToolEntry::of::<$tool>()),+];

            struct Export;

            impl $crate::__private::Guest for Export {
                fn activate(config: ::std::string::String) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::__private::activate::<$plugin>(TOOLS, &config)
                }

                fn execute(
                    tool: ::std::string::String,
                    input: ::std::string::String,
                    context: $crate::__private::CallContext,
                ) -> ::std::result::Result<$crate::__private::ToolResponse, $crate::__private::ToolFailure> {
                    $crate::__private::execute(TOOLS, &tool, &input, context)
                }
            }

            $crate::bindings::__export_world!(Export with_types_in $crate::bindings);
        };
    };
}
