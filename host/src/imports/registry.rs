//! `toolhost:plugin/registry`: live only in an activation's store (R7).

use std::sync::Arc;

use wasmtime::component::{Resource, ResourceTable};

use crate::bindings::toolhost::plugin::registry as wit;
use crate::bindings::toolhost::plugin::types::ToolDefinition;
use crate::plugin::{PluginCode, WasmTool};
use crate::registry::{Registration, RegistrationError, Scope};
use crate::schema::Schema;
use crate::store::StoreState;
use crate::tool::{Executor, Tool};

/// What an activation's store knows: its plugin and its scope.
pub(crate) struct ActivationState {
    pub(crate) plugin: Arc<PluginCode>,
    pub(crate) scope: Arc<Scope>,
    /// True only while `activate` runs: registering is part of activation.
    pub(crate) activating: bool,
}

/// The guest's handle on one registration; dropping it closes the registration.
pub struct RegistrationHandle(Registration);

/// The narrow view the registry import works on.
pub(crate) struct RegistryImport<'a> {
    table: &'a mut ResourceTable,
    activation: Option<&'a mut ActivationState>,
}

impl<'a> RegistryImport<'a> {
    pub(crate) fn of(state: &'a mut StoreState) -> Self {
        RegistryImport {
            table: &mut state.table,
            activation: state.activation.as_mut(),
        }
    }
}

impl crate::bindings::toolhost::plugin::types::Host for RegistryImport<'_> {}

fn invalid(tool: &str, message: impl Into<String>) -> wit::InvalidTool {
    wit::InvalidTool {
        tool: tool.to_owned(),
        message: message.into(),
    }
}

/// Compiles one definition into a wasm-backed tool (schemas checked here, R2).
fn compile(
    plugin: &Arc<PluginCode>,
    def: ToolDefinition,
) -> Result<(String, Tool), wit::RegistrationError> {
    let input = Schema::parse(&def.input_schema).map_err(|e| {
        wit::RegistrationError::InvalidSchema(invalid(&def.name, format!("input schema: {e}")))
    })?;
    let output = def
        .output_schema
        .as_deref()
        .map(Schema::parse)
        .transpose()
        .map_err(|e| {
            wit::RegistrationError::InvalidSchema(invalid(&def.name, format!("output schema: {e}")))
        })?;
    let executor = Executor::Wasm(Arc::new(WasmTool {
        plugin: plugin.clone(),
        name: def.name.clone(),
    }));
    // The plugin's budget and bounds travel with each of its tools.
    let mut tool =
        Tool::from_parts(def.description, input, output, executor).with_budget(plugin.budget);
    if let Some(bounds) = plugin.bounds {
        tool = tool.with_bounds(bounds);
    }
    Ok((def.name, tool))
}

impl wit::Host for RegistryImport<'_> {
    fn register(
        &mut self,
        tools: Vec<ToolDefinition>,
    ) -> wasmtime::Result<Result<Resource<RegistrationHandle>, wit::RegistrationError>> {
        let Some(activation) = self.activation.as_deref().filter(|a| a.activating) else {
            return Ok(Err(wit::RegistrationError::NotActivating));
        };
        // Compile every schema before touching the registry (R2).
        let compiled = match tools
            .into_iter()
            .map(|d| compile(&activation.plugin, d))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        let registration = match activation.scope.register(compiled) {
            Ok(r) => r,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        Ok(Ok(self.table.push(RegistrationHandle(registration))?))
    }
}

fn to_wit(e: RegistrationError) -> wit::RegistrationError {
    let message = e.to_string();
    match e {
        RegistrationError::InvalidName { tool, .. } => {
            wit::RegistrationError::InvalidName(invalid(&tool, message))
        }
        RegistrationError::InvalidSchema { tool, .. } => {
            wit::RegistrationError::InvalidSchema(invalid(&tool, message))
        }
        RegistrationError::DuplicateName { tool, .. } => {
            wit::RegistrationError::DuplicateName(invalid(&tool, message))
        }
        RegistrationError::ScopeClosed => wit::RegistrationError::ScopeClosed,
    }
}

impl wit::HostRegistration for RegistryImport<'_> {
    fn names(&mut self, handle: Resource<RegistrationHandle>) -> wasmtime::Result<Vec<String>> {
        Ok(self.table.get(&handle)?.0.names().to_vec())
    }

    fn drop(&mut self, handle: Resource<RegistrationHandle>) -> wasmtime::Result<()> {
        // Dropping the handle closes exactly this registration (R4).
        self.table.delete(handle)?.0.close();
        Ok(())
    }
}
