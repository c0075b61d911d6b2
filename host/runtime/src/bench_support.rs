//! Baselines for the benchmarks, which the public API deliberately cannot
//! do: calling a warm (reused, unisolated) instance, and running without fuel
//! metering. Only with the non-default `bench` feature; not part of the
//! supported API.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};

pub use toolhost_core::output::preview::{count_lines, preview, within};

use crate::model::budget::{FUEL_YIELD_INTERVAL, Usage};
use crate::model::event::CallEvents;
use crate::model::execution::{Ended, Execution, ExecutionFuture, Executor, Invocation};
use crate::model::outcome::{DefectKind, Logs};
use crate::model::plugin::PluginInfo;
use crate::model::schema::Schema;
use crate::model::tool::Tool;
use crate::wasm::bindings::ToolPlugin;
use crate::wasm::bindings::toolhost::plugin::types::{self as wit, CallContext};
use crate::wasm::imports::call::CallState;
use crate::wasm::invoke::convert;
use crate::wasm::store::{MemoryLimiter, Role, StoreState};

fn state(wasi: wasmtime_wasi::WasiCtx) -> StoreState {
    StoreState {
        wasi,
        table: ResourceTable::new(),
        limiter: MemoryLimiter::new(u64::MAX),
        stdout: Default::default(),
        stderr: Default::default(),
        role: Role::Bare,
        notes: Vec::new(),
        http: Default::default(),
        http_hooks: Default::default(),
        mounts: Vec::new(),
    }
}

fn context() -> CallContext {
    CallContext {
        session_id: "bench".into(),
        agent: "bench".into(),
        message_id: "bench".into(),
        call_id: "bench".into(),
    }
}

/// A plugin instantiated once, in an engine with or without fuel metering.
pub struct Warm {
    store: Store<StoreState>,
    bindings: ToolPlugin,
    metered: bool,
}

impl std::fmt::Debug for Warm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warm")
            .field("metered", &self.metered)
            .finish_non_exhaustive()
    }
}

impl Warm {
    /// Compiles and instantiates the component at `path`, once.
    pub async fn new(path: &Path, metered: bool) -> wasmtime::Result<Warm> {
        let mut config = Config::new();
        config.consume_fuel(metered);
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        crate::wasm::imports::add_to_linker(&mut linker)?;
        let component = Component::from_file(&engine, path)?;
        let mut store = Store::new(&engine, state(wasmtime_wasi::WasiCtx::builder().build()));
        if metered {
            store.set_fuel(u64::MAX)?;
            store.fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL))?;
        }
        let bindings = ToolPlugin::instantiate_async(&mut store, &component, &linker).await?;
        Ok(Warm {
            store,
            bindings,
            metered,
        })
    }

    /// Calls `tool` with `input` in the same instance `n` times; returns the
    /// total time.
    pub async fn calls(&mut self, tool: &str, input: &str, n: u64) -> wasmtime::Result<Duration> {
        let start = Instant::now();
        for _ in 0..n {
            self.call(tool, input).await?;
        }
        Ok(start.elapsed())
    }

    /// Calls `tool` with `input` once in this instance.
    async fn call(&mut self, tool: &str, input: &str) -> wasmtime::Result<wit::ToolResponse> {
        if self.metered {
            self.store.set_fuel(u64::MAX)?;
        }
        self.bindings
            .toolhost_plugin_plugin()
            .call_execute(&mut self.store, tool, input, &context())
            .await?
            .map_err(|_| wasmtime::format_err!("{tool} failed in the benchmark"))
    }
}

/// `tool` of the plugin at `path` as a tool settlement runs in one warm
/// instance, reused by every call (R21 forbids that outside benchmarks):
/// a settled call with isolation at no cost, to compare instances made
/// ahead with. Its schemas are `input` and `output`.
pub async fn warm_tool(
    path: &Path,
    tool: &str,
    input: Value,
    output: Option<Value>,
) -> wasmtime::Result<Tool> {
    let schema = |v| Schema::compile(v).map_err(|e| wasmtime::format_err!("{e}"));
    let executor = WarmTool {
        warm: tokio::sync::Mutex::new(Warm::new(path, true).await?),
        name: tool.into(),
    };
    Ok(Tool::from_parts(
        String::new(),
        schema(input)?,
        output.map(schema).transpose()?,
        Arc::new(executor),
    ))
}

/// One warm instance's tool, called in turn.
struct WarmTool {
    warm: tokio::sync::Mutex<Warm>,
    name: String,
}

impl Executor for WarmTool {
    fn execute<'a>(&'a self, inv: Invocation<'a>) -> ExecutionFuture<'a> {
        Box::pin(async move {
            let mut warnings = Vec::new();
            let called = self
                .warm
                .lock()
                .await
                .call(&self.name, inv.input_text)
                .await;
            let ended = match called {
                Ok(response) => match convert(response, inv.max_machine_output, &mut warnings) {
                    Ok(response) => Ended::Response(response),
                    Err(kind) => Ended::Defect(kind),
                },
                Err(e) => Ended::Defect(DefectKind::Trap(e.to_string())),
            };
            Execution {
                ended,
                usage: Usage {
                    wall_time: inv.started.elapsed(),
                    ..Usage::default()
                },
                logs: Logs::default(),
                warnings,
            }
        })
    }

    fn plugin(&self) -> Option<&PluginInfo> {
        None
    }
}

/// Calls `tool` `n` times, each in a fresh instance of `plugin` exactly as
/// settlement runs wasm calls, but without settlement; returns the total time.
pub async fn fresh_calls(
    plugin: &crate::wasm::load::Plugin,
    tool: &str,
    input: &str,
    n: u64,
) -> wasmtime::Result<Duration> {
    let code = &plugin.code;
    let cx = context();
    let start = Instant::now();
    for _ in 0..n {
        let progress = CallEvents::new(Default::default(), tool.into(), None, None, None);
        let state = CallState {
            context: Default::default(),
            plugin: code.info.name.clone(),
            tool: tool.into(),
            progress,
            policy: code.policy.clone(),
            approver: None,
            http: None,
            config: code.config.clone(),
        };
        let linked = code.linked();
        let mut store = code
            .store(&linked, &code.budget, Role::Call(state))
            .map_err(|e| wasmtime::format_err!("{e}"))?;
        let instance = linked.pre.instantiate_async(&mut store).await?;
        let r = instance
            .toolhost_plugin_plugin()
            .call_execute(&mut store, tool, input, &cx)
            .await?;
        if r.is_err() {
            wasmtime::bail!("{tool} failed in the benchmark");
        }
    }
    Ok(start.elapsed())
}
