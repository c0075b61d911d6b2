//! Write [Toolhost](https://example.invalid/toolhost) tool plugins in Rust.
//!
//! A plugin is a WebAssembly component (`wasm32-wasip2`) that provides typed
//! tools to an agent. A tool is a function with [`#[tool]`](tool): its doc
//! comment is the description the model reads, and its input and output are
//! Rust types with [`#[input]`](input) and [`#[output]`](output), whose JSON
//! Schemas (draft 2020-12) are derived, field doc comments included.
//! [`plugin!`] exports the plugin: it registers every tool when the host
//! activates the plugin, and dispatches each call to the right tool.
//!
//! # Example
//!
//! `Cargo.toml` (the plugin needs no other dependency):
//!
//! ```toml
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! toolhost-sdk = "0.1"
//! ```
//!
//! `src/lib.rs`:
//!
//! ```
//! use toolhost_sdk::prelude::*;
//!
//! #[input]
//! struct EchoInput {
//!     /// The message to repeat.
//!     message: String,
//! }
//!
//! #[output]
//! struct EchoOutput {
//!     /// The message, unchanged.
//!     message: String,
//! }
//!
//! /// Repeat a message back.
//! #[tool]
//! fn echo(input: EchoInput) -> ToolResult<EchoOutput> {
//!     if input.message.is_empty() {
//!         return Err("the message is empty; pass the text to repeat".into());
//!     }
//!     Ok(EchoOutput { message: input.message }.into())
//! }
//!
//! /// Repeat a message in capitals.
//! #[tool]
//! fn shout(input: EchoInput, cx: &Context) -> ToolResult<NoOutput> {
//!     cx.progress(json!({ "stage": "shouting" }));
//!     Ok(Response::text(input.message.to_uppercase()))
//! }
//!
//! toolhost_sdk::plugin!([echo, shout]);
//! # fn main() {}
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --release`; the component
//! is `target/wasm32-wasip2/release/<crate>.wasm`.
//!
//! - A tool returns [`ToolResult<O>`](ToolResult): a [`Response`] with the
//!   output (`output.into()` or [`Response::new`]) and optional content and
//!   metadata; or [`NoOutput`] and content only ([`Response::text`]).
//! - `Err("...".into())` is a [`ToolError`], a failure the model sees.
//! - The `&Context` parameter is optional: [`Context::progress`],
//!   [`Context::request_permission`], [`Context::config`] and the call's ids.
//!
//! # The `Tool` trait
//!
//! `#[tool]` implements [`Tool`]; a tool can also implement it by hand, and
//! a plugin can run code when it is activated with [`Plugin`]:
//!
//! ```
//! use toolhost_sdk::prelude::*;
//!
//! /// Say hello.
//! struct Hello;
//!
//! impl Tool for Hello {
//!     const NAME: &'static str = "hello";
//!     const DESCRIPTION: &'static str = "Say hello.";
//!     type Input = NoInput;
//!     type Output = NoOutput;
//!
//!     fn execute(_: NoInput, _cx: &Context) -> ToolResult<NoOutput> {
//!         Ok(Response::text("Hello!"))
//!     }
//! }
//!
//! /// Plugin-wide hooks (optional: `plugin!([Hello]);` needs none).
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
//! toolhost_sdk::plugin!(Greeter => [Hello]);
//! # fn main() {}
//! ```
//!
//! The crate re-exports [`serde`], [`schemars`] and [`serde_json`], which
//! `#[input]` and `#[output]` derive through. A hand-written derive that
//! uses the re-exports names them with
//! `#[serde(crate = "toolhost_sdk::serde")]` and
//! `#[schemars(crate = "toolhost_sdk::schemars")]` (both: schemars otherwise
//! takes the path from `#[serde(crate)]`).
//!
//! # Contract
//!
//! - A tool with an output type returns it ([`Response::new`]); the host
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
mod macros;
mod plugin;
mod response;
mod tool;

pub use context::Context;
pub use error::{PermissionDenied, ToolError};
#[cfg(feature = "http")]
pub use http::{HttpError, HttpResponse, wstd};
pub use macros::{input, output, tool};
pub use plugin::Plugin;
pub use response::{Content, Media, Response, ToolResult};
pub use tool::{NoInput, NoOutput, Tool, ToolInput, ToolOutput};

pub use schemars;
pub use serde;
pub use serde_json;

/// Everything a plugin usually needs: `use toolhost_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Content, Context, Media, NoInput, NoOutput, PermissionDenied, Plugin, Response, Tool,
        ToolError, ToolResult, input, output, tool,
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
        path: "wit/v0.1",
        world: "tool-plugin",
        // `plugin!` expands the export macro inside the plugin crate, so it
        // must be reachable from there.
        pub_export_macro: true,
        export_macro_name: "__export_world",
        default_bindings_module: "toolhost_sdk::bindings",
    });
}

// The README (the crates.io page) is tested like the rest of the docs.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// Used by the expansions of [`plugin!`] and [`tool`]; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::exports::toolhost::plugin::plugin::{
        CallContext, Guest, ToolFailure, ToolResponse,
    };
    pub use crate::macros::ToolReturn;
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
