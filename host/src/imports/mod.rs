//! Host implementations of the world's imports, one interface per file.

pub(crate) mod call;
pub(crate) mod registry;

use wasmtime::component::{HasData, Linker};

use crate::bindings::toolhost::plugin as wit;
use crate::store::StoreState;

struct RegistryData;
impl HasData for RegistryData {
    type Data<'a> = registry::RegistryImport<'a>;
}

struct CallData;
impl HasData for CallData {
    type Data<'a> = call::CallImport<'a>;
}

/// Adds WASI (p2) and the Toolhost imports to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    wit::types::add_to_linker::<StoreState, RegistryData>(linker, |s| {
        registry::RegistryImport::of(s)
    })?;
    wit::registry::add_to_linker::<StoreState, RegistryData>(linker, |s| {
        registry::RegistryImport::of(s)
    })?;
    wit::call::add_to_linker::<StoreState, CallData>(linker, |s| call::CallImport::of(s))?;
    Ok(())
}
