//! Invoking a wasm tool: a fresh instance per call (R21), fuel that yields
//! so cancellation and the deadline stop even a spinning guest (R22),
//! budgets and usage (R23).

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use wasmtime::Store;

use crate::error::Error;
use crate::model::budget::{Limit, Usage};
use crate::model::content::{ContentPart, ToolFailure, ToolResponse};
use crate::model::execution::{Ended, Execution, ExecutionFuture, Executor, Invocation};
use crate::model::interrupt::interruptible;
use crate::model::outcome::{DefectKind, FaultKind, HostFault, Interruption, Logs};
use crate::model::plugin::PluginInfo;
use crate::net::{CallHttp, HttpHooks};
use crate::wasm::bindings::ToolPlugin;
use crate::wasm::bindings::toolhost::plugin::types as wit;
use crate::wasm::classify::{Stop, classify};
use crate::wasm::imports::call::CallState;
use crate::wasm::load::PluginCode;
use crate::wasm::slots::SlotPermit;
use crate::wasm::store::{Role, StoreState};
use crate::wasm::tiers::Linked;
use crate::wasm::warm::{MakesAhead, Warm, WarmInstances};

/// A tool a plugin registered: the plugin's code and the authored name.
pub(crate) struct WasmTool {
    pub(crate) plugin: Arc<PluginCode>,
    pub(crate) name: String,
}

impl Executor for WasmTool {
    fn execute<'a>(&'a self, invocation: Invocation<'a>) -> ExecutionFuture<'a> {
        Box::pin(self.run(invocation))
    }

    fn plugin(&self) -> Option<&PluginInfo> {
        Some(&self.plugin.info)
    }
}

/// A call's instance: made ahead, or to be made from the code its store
/// was made for.
enum Instance {
    Made(ToolPlugin),
    ToMake(Arc<Linked>),
}

/// What the guest's `execute` returned, or how it stopped.
type Raced = Result<wasmtime::Result<Result<wit::ToolResponse, wit::ToolFailure>>, Interruption>;

impl WasmTool {
    async fn run(&self, inv: Invocation<'_>) -> Execution {
        let _permit = match self.slot(&inv).await {
            Ok(permit) => permit,
            Err(i) => return Execution::early(Ended::Interrupted(i), inv.started),
        };
        let http = Arc::new(self.http(&inv));
        let state = CallState {
            context: inv.context.clone(),
            plugin: self.plugin.info.name.clone(),
            tool: inv.tool_name.to_owned(),
            progress: inv.progress.clone(),
            policy: self.plugin.policy.clone(),
            approver: inv.approver.clone(),
            config: self.plugin.config.clone(),
            http: Some(http.clone()),
        };
        let (mut store, instance) = match self.prepare(&inv, state, &http) {
            Ok(prepared) => prepared,
            Err(e) => {
                let fault = HostFault::new(
                    FaultKind::Setup,
                    format!("cannot set up the call of `{}`: {e}", inv.tool_name),
                );
                return Execution::early(Ended::HostFault(fault), inv.started);
            }
        };
        let raced = self.race(&mut store, instance, &inv).await;
        let mut warnings = std::mem::take(&mut store.data_mut().notes);
        let ended = self.ended(raced, &store, inv.max_machine_output, &mut warnings);
        let mut usage = usage(&store, &inv, &ended);
        http.add_usage(&mut usage);
        let logs = take_logs(store.data());
        // The store, trapped or not, is dropped, never reused (R21); once
        // its slot is free, the next call's instance is made in it.
        let plugin = self.plugin.clone();
        let refill = move || WarmInstances::refill(&plugin);
        let has_room = self.plugin.room_ahead();
        self.plugin.retiring.retire(store, has_room, refill);
        Execution {
            ended,
            usage,
            logs,
            warnings,
        }
    }

    /// The call's store, with an instance made ahead when one fits (it
    /// has run no tool: R21), the call's state and full budget then put in.
    fn prepare(
        &self,
        inv: &Invocation<'_>,
        state: CallState,
        http: &Arc<CallHttp>,
    ) -> Result<(Store<StoreState>, Instance), Error> {
        let Some(Warm {
            mut store,
            instance,
        }) = WarmInstances::take(&self.plugin, &inv.budget)
        else {
            let linked = self.plugin.linked();
            let store = self.plugin.store(&linked, &inv.budget, Role::Call(state))?;
            return Ok((store, Instance::ToMake(linked)));
        };
        let data = store.data_mut();
        data.role = Role::Call(state);
        data.http_hooks = HttpHooks(Some(http.clone()));
        store
            .set_fuel(inv.budget.fuel)
            .map_err(crate::wasm::engine_error)?;
        Ok((store, Instance::Made(instance)))
    }

    /// What outbound HTTP this call may make: the plugin's grants and
    /// limits, within the call's deadline and cancellation.
    fn http(&self, inv: &Invocation<'_>) -> CallHttp {
        CallHttp::new(
            self.plugin.grants.http.clone(),
            self.plugin.http_limits,
            self.plugin.tls.clone(),
            inv.deadline,
            inv.cancel.child_token(),
            self.plugin.policy.clone(),
            inv.approver.clone(),
            self.plugin.info.name.clone(),
            inv.progress.clone(),
        )
    }

    /// Waits for one of the plugin's slots (a bounded queue, served fairly
    /// between sessions), giving up on cancellation or at the deadline:
    /// queueing counts against it.
    async fn slot(&self, inv: &Invocation<'_>) -> Result<SlotPermit, Interruption> {
        let slot = self.plugin.slots.acquire(&inv.context.session_id);
        interruptible(inv.cancel, inv.deadline, slot).await
    }

    /// Instantiates (unless an instance was made ahead) and calls the
    /// guest, racing cancellation and the deadline.
    async fn race(
        &self,
        store: &mut Store<StoreState>,
        instance: Instance,
        inv: &Invocation<'_>,
    ) -> Raced {
        let context = wit::CallContext {
            session_id: inv.context.session_id.clone(),
            agent: inv.context.agent.clone(),
            message_id: inv.context.message_id.clone(),
            call_id: inv.context.call_id.clone(),
        };
        let run = async {
            let instance = match instance {
                Instance::Made(instance) => instance,
                Instance::ToMake(linked) => self.instantiate(&linked, store).await?,
            };
            instance
                .toolhost_plugin_plugin()
                .call_execute(&mut *store, &self.name, inv.input_text, &context)
                .await
        };
        interruptible(inv.cancel, inv.deadline, run).await
    }

    /// Instantiates the call's instance, first waiting out a pool that is
    /// full while ended calls' stores are being dropped: their slots are
    /// on their way back.
    async fn instantiate(
        &self,
        linked: &Linked,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<ToolPlugin> {
        while self.plugin.pool_full(linked) && self.plugin.retiring.one_dropped().await {}
        linked.pre.instantiate_async(store).await
    }

    fn ended(
        &self,
        raced: Raced,
        store: &Store<StoreState>,
        max_output: usize,
        warnings: &mut Vec<String>,
    ) -> Ended {
        match raced {
            Err(i) => Ended::Interrupted(i),
            Ok(Ok(Ok(response))) => match convert(response, max_output, warnings) {
                Ok(r) => Ended::Response(r),
                Err(kind) => Ended::Defect(kind),
            },
            Ok(Ok(Err(failure))) => Ended::ToolFailure(ToolFailure {
                message: failure.message,
                metadata: parse_metadata(failure.metadata, warnings),
            }),
            Ok(Err(e)) => match classify(&e, store, self.plugin.max_instances) {
                Stop::Fuel => Ended::Interrupted(Interruption::Fuel),
                Stop::Defect(kind) => Ended::Defect(kind),
                Stop::HostFault(fault) => Ended::HostFault(fault),
            },
        }
    }
}

fn usage(store: &Store<StoreState>, inv: &Invocation<'_>, ended: &Ended) -> Usage {
    metered_usage(store, inv.budget.fuel, inv.started, Some(ended))
}

/// What a store's guest consumed, and the limit that stopped it, if any.
pub(crate) fn metered_usage(
    store: &Store<StoreState>,
    fuel: u64,
    started: Instant,
    stopped: Option<&Ended>,
) -> Usage {
    let tripped = match stopped {
        Some(Ended::Interrupted(Interruption::Fuel)) => Some(Limit::Fuel),
        Some(Ended::Interrupted(Interruption::Deadline)) => Some(Limit::Deadline),
        Some(Ended::Defect(DefectKind::MemoryLimit(_))) => Some(Limit::Memory),
        _ => None,
    };
    Usage {
        fuel_used: fuel.saturating_sub(store.get_fuel().unwrap_or(0)),
        wall_time: started.elapsed(),
        peak_memory: store.data().limiter.peak,
        tripped,
        ..Usage::default()
    }
}

pub(crate) fn take_logs(state: &StoreState) -> Logs {
    let (stdout, d1) = state.stdout.take();
    let (stderr, d2) = state.stderr.take();
    Logs {
        stdout,
        stderr,
        dropped_bytes: d1 + d2,
    }
}

/// Metadata that is not JSON is dropped with a warning (R17); settlement
/// checks the rest.
fn parse_metadata(text: Option<String>, warnings: &mut Vec<String>) -> Option<Value> {
    let text = text?;
    match serde_json::from_str(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            warnings.push(format!("metadata dropped: not valid JSON ({e})"));
            None
        }
    }
}

/// Turns the guest's response into host values. Output that is not JSON is
/// a contract violation: the guest promised JSON text. Output over its cap
/// is refused before it is parsed (R28).
pub fn convert(
    r: wit::ToolResponse,
    max_output: usize,
    warnings: &mut Vec<String>,
) -> Result<ToolResponse, DefectKind> {
    if let Some(text) = r.output.as_ref().filter(|t| t.len() > max_output) {
        return Err(DefectKind::machine_output_too_large(text.len(), max_output));
    }
    let output = r
        .output
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|e| DefectKind::Contract(format!("output is not valid JSON text: {e}")))?;
    let content = r.content.map(|parts| {
        parts
            .into_iter()
            .map(|p| match p {
                wit::ContentPart::Text(text) => ContentPart::Text { text },
                wit::ContentPart::Media(m) => ContentPart::Media {
                    mime_type: m.mime_type,
                    data: m.data,
                    name: m.name,
                },
            })
            .collect()
    });
    Ok(ToolResponse {
        output,
        content,
        metadata: parse_metadata(r.metadata, warnings),
    })
}
