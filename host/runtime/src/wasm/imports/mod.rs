//! Host implementations of the world's imports, one interface per file, each
//! on the narrow part of the store state it needs.

pub mod call;
pub mod filesystem;
pub mod registry;

use wasmtime::component::{HasData, Linker};

use crate::wasm::bindings::toolhost::plugin as wit;
use crate::wasm::store::{Role, StoreState};

struct RegistryData;
impl HasData for RegistryData {
    type Data<'a> = registry::RegistryImport<'a>;
}

struct CallData;
impl HasData for CallData {
    type Data<'a> = call::CallImport<'a>;
}

fn registry_view(state: &mut StoreState) -> registry::RegistryImport<'_> {
    registry::RegistryImport {
        table: &mut state.table,
        activation: match &mut state.role {
            Role::Activation(activation) => Some(activation),
            _ => None,
        },
    }
}

/// Adds WASI (p2), `wasi:http` and the Toolhost imports to `linker`.
pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    filesystem::add_to_linker(linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    wit::types::add_to_linker::<StoreState, RegistryData>(linker, registry_view)?;
    wit::registry::add_to_linker::<StoreState, RegistryData>(linker, registry_view)?;
    wit::call::add_to_linker::<StoreState, CallData>(linker, |s| call::CallImport {
        call: s.call_mut(),
    })?;
    Ok(())
}
