//! `toolhost:plugin/registry`: live only in an activation's store, while
//! `activate` runs (R7).

use std::sync::Arc;

use wasmtime::component::{Resource, ResourceTable};

use crate::model::budget::{Budget, OutputBounds};
use crate::model::execution::Executor;
use crate::model::schema::Schema;
use crate::model::tool::Tool;
use crate::registry::placement::RegistrationError;
use crate::registry::scope::Scope;
use crate::runtime::bindings::toolhost::plugin::registry as wit;
use crate::runtime::bindings::toolhost::plugin::types::ToolDefinition;
use crate::runtime::bindings::{RegisterError, RegistrationHandle};

/// Makes the executor of a registered tool from its authored name: a call
/// into the activating plugin.
pub(crate) type ExecutorFactory = Box<dyn Fn(&str) -> Arc<dyn Executor> + Send + Sync>;

/// What an activation's store knows: its scope, and how its tools run.
pub(crate) struct ActivationState {
    pub(crate) scope: Arc<Scope>,
    /// True only while `activate` runs: registering is part of activation.
    pub(crate) activating: bool,
    pub(crate) executor: ExecutorFactory,
    /// The plugin's budget and bounds travel with each of its tools.
    pub(crate) budget: Budget,
    pub(crate) bounds: Option<OutputBounds>,
}

/// The narrow view the registry import works on.
pub(crate) struct RegistryImport<'a> {
    pub(crate) table: &'a mut ResourceTable,
    pub(crate) activation: Option<&'a mut ActivationState>,
}

impl crate::runtime::bindings::toolhost::plugin::types::Host for RegistryImport<'_> {}

/// Compiles one definition into a wasm-backed tool (schemas checked here, R2).
fn compile(
    activation: &ActivationState,
    def: ToolDefinition,
) -> Result<(String, Tool), RegisterError> {
    let invalid = |which: &str, e| RegisterError::InvalidSchema {
        tool: def.name.clone(),
        message: format!("{which} schema: {e}"),
    };
    let input = Schema::parse(&def.input_schema).map_err(|e| invalid("input", e))?;
    let output = def
        .output_schema
        .as_deref()
        .map(Schema::parse)
        .transpose()
        .map_err(|e| invalid("output", e))?;
    let executor = (activation.executor)(&def.name);
    let mut tool =
        Tool::from_parts(def.description, input, output, executor).with_budget(activation.budget);
    if let Some(bounds) = activation.bounds {
        tool = tool.with_bounds(bounds);
    }
    Ok((def.name, tool))
}

fn invalid_tool(tool: String, message: String) -> wit::InvalidTool {
    wit::InvalidTool { tool, message }
}

impl wit::Host for RegistryImport<'_> {
    fn register(
        &mut self,
        tools: Vec<ToolDefinition>,
    ) -> Result<Resource<RegistrationHandle>, RegisterError> {
        let Some(activation) = self.activation.as_deref().filter(|a| a.activating) else {
            return Err(RegisterError::NotActivating);
        };
        // Compile every schema before touching the registry (R2).
        let compiled = tools
            .into_iter()
            .map(|d| compile(activation, d))
            .collect::<Result<Vec<_>, _>>()?;
        let registration = activation.scope.register(compiled)?;
        let handle = self.table.push(RegistrationHandle(registration));
        Ok(handle.map_err(wasmtime::Error::from)?)
    }

    fn convert_registration_error(
        &mut self,
        e: RegisterError,
    ) -> wasmtime::Result<wit::RegistrationError> {
        Ok(match e {
            RegisterError::Trap(trap) => return Err(trap),
            RegisterError::NotActivating => wit::RegistrationError::NotActivating,
            RegisterError::InvalidSchema { tool, message } => {
                wit::RegistrationError::InvalidSchema(invalid_tool(tool, message))
            }
            RegisterError::Refused(refused) => {
                let message = refused.to_string();
                match refused {
                    RegistrationError::InvalidName { tool, .. } => {
                        wit::RegistrationError::InvalidName(invalid_tool(tool, message))
                    }
                    RegistrationError::InvalidSchema { tool, .. } => {
                        wit::RegistrationError::InvalidSchema(invalid_tool(tool, message))
                    }
                    RegistrationError::DuplicateName { tool, .. } => {
                        wit::RegistrationError::DuplicateName(invalid_tool(tool, message))
                    }
                    RegistrationError::ScopeClosed => wit::RegistrationError::ScopeClosed,
                }
            }
        })
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
