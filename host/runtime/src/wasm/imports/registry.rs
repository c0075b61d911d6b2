//! `toolhost:plugin/registry`: live only in an activation's store, while
//! `activate` runs (R7).

use std::sync::Arc;

use wasmtime::component::{Resource, ResourceTable};

use crate::model::budget::{Budget, OutputBounds};
use crate::model::execution::Executor;
use crate::model::schema::Schema;
use crate::model::text::truncate;
use crate::model::tool::Tool;
use crate::registry::placement::RegistrationError;
use crate::registry::scope::Scope;
use crate::wasm::bindings::toolhost::plugin::registry as wit;
use crate::wasm::bindings::toolhost::plugin::types::ToolDefinition;
use crate::wasm::bindings::{RegisterError, RegistrationHandle};

/// Tools one activation may register, across its `register` calls: more
/// than any model can choose between.
pub const MAX_TOOLS_PER_ACTIVATION: usize = 1024;

/// The largest input or output schema, as JSON text.
pub const MAX_SCHEMA_BYTES: usize = 1 << 20;

/// The longest tool description: it is read by a model on every request.
pub const MAX_DESCRIPTION_BYTES: usize = 16 << 10;

/// The longest authored tool name (names are cut to 64 characters anyway;
/// this bounds what an error message quotes).
const MAX_AUTHORED_NAME_BYTES: usize = 256;

/// All definitions one activation may register, in bytes of names,
/// descriptions and schemas: bounds the host memory a plugin's registry
/// entries take, whatever the guest's own memory limit.
pub const MAX_REGISTERED_BYTES: usize = 16 << 20;

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
    /// What this activation asked to register so far, counted against the
    /// limits: tools and bytes.
    pub(crate) registered: (usize, usize),
    /// Tools in `register` calls that succeeded.
    pub(crate) tools_registered: usize,
}

/// Refuses definitions over the registration limits, before any is parsed
/// (R28); on success counts them against the activation.
fn check_limits(
    activation: &mut ActivationState,
    tools: &[ToolDefinition],
) -> Result<(), RegisterError> {
    let refuse = |def: &ToolDefinition, message: String| RegisterError::InvalidSchema {
        tool: truncate(def.name.clone(), MAX_AUTHORED_NAME_BYTES),
        message,
    };
    let (mut count, mut bytes) = activation.registered;
    for def in tools {
        let output = def.output_schema.as_ref().map_or(0, String::len);
        let largest = def.input_schema.len().max(output);
        count += 1;
        bytes += def.name.len() + def.description.len() + def.input_schema.len() + output;
        let problem = if def.name.len() > MAX_AUTHORED_NAME_BYTES {
            format!(
                "its name is {} bytes; names are at most 64 characters",
                def.name.len()
            )
        } else if def.description.len() > MAX_DESCRIPTION_BYTES {
            format!(
                "its description is {} bytes; the limit is {MAX_DESCRIPTION_BYTES}",
                def.description.len()
            )
        } else if largest > MAX_SCHEMA_BYTES {
            format!(
                "a schema of {largest} bytes exceeds the limit of {MAX_SCHEMA_BYTES} per schema"
            )
        } else if count > MAX_TOOLS_PER_ACTIVATION {
            format!("an activation may register at most {MAX_TOOLS_PER_ACTIVATION} tools")
        } else if bytes > MAX_REGISTERED_BYTES {
            format!(
                "an activation may register at most {MAX_REGISTERED_BYTES} bytes of definitions"
            )
        } else {
            continue;
        };
        return Err(refuse(def, problem));
    }
    activation.registered = (count, bytes);
    Ok(())
}

/// The narrow view the registry import works on.
pub(crate) struct RegistryImport<'a> {
    pub(crate) table: &'a mut ResourceTable,
    pub(crate) activation: Option<&'a mut ActivationState>,
}

impl crate::wasm::bindings::toolhost::plugin::types::Host for RegistryImport<'_> {}

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
        let Some(activation) = self.activation.as_deref_mut().filter(|a| a.activating) else {
            return Err(RegisterError::NotActivating);
        };
        check_limits(activation, &tools)?;
        // Compile every schema before touching the registry (R2).
        let compiled = tools
            .into_iter()
            .map(|d| compile(activation, d))
            .collect::<Result<Vec<_>, _>>()?;
        let count = compiled.len();
        let registration = activation.scope.register(compiled)?;
        activation.tools_registered += count;
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
