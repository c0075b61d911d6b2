//! Tiered compilation: a plugin compiled with the baseline compiler
//! (Winch, several times faster to compile) serves calls at once, while
//! its optimized code (Cranelift) compiles in the background under the
//! same limits; once linked, new calls run it. Both are kept in the
//! compile cache. A call runs the code it started with to its end. Also
//! where compiled code of either tier is linked and cached.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::config::compile::CompileLimits;
use crate::error::{Error, LoadError};
use crate::model::plugin::CodeTier;
use crate::wasm::bindings::ToolPluginPre;
use crate::wasm::compile::{self as bounded, Built, Urgency};
use crate::wasm::engine::{Backend, Runtime};
use crate::wasm::store::StoreState;

/// A plugin's code of one tier, linked: a call's store and instance both
/// come from one of these.
pub(crate) struct Linked {
    pub(crate) tier: CodeTier,
    pub(crate) engine: Engine,
    pub(crate) pre: ToolPluginPre<StoreState>,
}

/// The code a plugin's new calls run, and whether it will change again.
pub(crate) struct Current {
    pub(crate) linked: Arc<Linked>,
    /// No upgrade is coming: the code is optimized, or its compile failed.
    pub(crate) settled: bool,
}

/// A plugin whose code can be upgraded (its loaded code).
pub(crate) trait Upgrades: Send + Sync + 'static {
    /// Its name, for logs.
    fn name(&self) -> &str;
    /// New calls run `linked` from now on.
    fn upgraded(&self, linked: Linked);
    /// No upgrade is coming: it keeps the code it has.
    fn settled(&self);
}

/// A plugin's first compile: with the baseline compiler when the host
/// tiers, falling back to the optimizing one where Winch cannot compile
/// the component (a WebAssembly feature it lacks, such as tail calls or
/// exceptions). A compile limit is not retried: the optimizing compiler
/// needs more of both.
pub(crate) async fn first_compile(
    runtime: &Arc<Runtime>,
    path: &Path,
    wasm: &Arc<Vec<u8>>,
    limits: CompileLimits,
) -> Result<(CodeTier, Built), Error> {
    if runtime.baseline.is_some() {
        let baseline = bounded::compile(
            runtime,
            CodeTier::Baseline,
            Urgency::Waited,
            path,
            wasm.clone(),
            limits,
        );
        match baseline.await {
            Ok(built) => return Ok((CodeTier::Baseline, built)),
            Err(e @ Error::Load(LoadError::CompileLimit { .. })) => return Err(e),
            Err(e) => tracing::info!(
                "the baseline compiler cannot compile {} ({e}); compiling optimized code",
                path.display()
            ),
        }
    }
    let (tier, urgency) = (CodeTier::Optimized, Urgency::Waited);
    let built = bounded::compile(runtime, tier, urgency, path, wasm.clone(), limits).await?;
    Ok((CodeTier::Optimized, built))
}

/// Compiles the optimized code of a plugin running baseline code in the
/// background and switches its new calls to it; `stop` (cancelled when the
/// plugin is dropped) ends the compile, killing its worker.
pub(crate) fn upgrade_later<P: Upgrades>(
    runtime: &Arc<Runtime>,
    code: &Arc<P>,
    stop: CancellationToken,
    path: &Path,
    wasm: Arc<Vec<u8>>,
    limits: CompileLimits,
) {
    let upgrade = Upgrade {
        runtime: runtime.clone(),
        code: Arc::downgrade(code),
        path: path.to_owned(),
        wasm,
        limits,
    };
    tokio::spawn(async move {
        tokio::select! {
            biased;
            () = stop.cancelled() => {}
            () = upgrade.run() => {}
        }
    });
}

/// One plugin's pending upgrade to optimized code.
struct Upgrade<P> {
    runtime: Arc<Runtime>,
    code: Weak<P>,
    path: PathBuf,
    wasm: Arc<Vec<u8>>,
    limits: CompileLimits,
}

impl<P: Upgrades> Upgrade<P> {
    async fn run(self) {
        let started = Instant::now();
        let optimized = self.optimize().await;
        let Some(code) = self.code.upgrade() else {
            return;
        };
        let name = code.name();
        match optimized {
            Ok(linked) => {
                code.upgraded(linked);
                let ms = started.elapsed().as_millis();
                tracing::info!(
                    "plugin {name}: optimized code ready after {ms} ms; new calls run it"
                );
            }
            Err(e) => {
                code.settled();
                tracing::warn!("plugin {name} keeps running baseline code: {e}");
            }
        }
    }

    /// Compiles and links the optimized code, one upgrade at a time.
    async fn optimize(&self) -> Result<Linked, Error> {
        let _turn =
            self.runtime.upgrades.acquire().await.map_err(|e| {
                Error::engine_caused(format!("the upgrade queue is closed: {e}"), e)
            })?;
        let (runtime, path, wasm) = (&self.runtime, &self.path, self.wasm.clone());
        let (tier, urgency) = (CodeTier::Optimized, Urgency::Background);
        let built = bounded::compile(runtime, tier, urgency, path, wasm, self.limits).await?;
        blocking_link(
            runtime,
            CodeTier::Optimized,
            path,
            self.wasm.clone(),
            built,
            true,
        )
        .await
    }
}

/// Links `built` code of `tier` off the async workers, then keeps it in
/// the compile cache if it is `fresh`: optimized code before returning (a
/// one-shot `toolhost compile` exists to fill the cache), baseline code in
/// the background, so its write (40 MB for CPython) does not delay the
/// plugin's first reply.
pub(crate) async fn blocking_link(
    runtime: &Arc<Runtime>,
    tier: CodeTier,
    path: &Path,
    wasm: Arc<Vec<u8>>,
    built: Built,
    fresh: bool,
) -> Result<Linked, Error> {
    let engine = runtime.backend(tier).engine.clone();
    let pre = {
        let (runtime, path, component) =
            (runtime.clone(), path.to_owned(), built.component.clone());
        blocking(move || link(runtime.backend(tier), &path, &component)).await??
    };
    if fresh {
        let runtime = runtime.clone();
        let keep = move || store(&runtime, runtime.backend(tier), &wasm, &built);
        match tier {
            CodeTier::Baseline => drop(tokio::task::spawn_blocking(keep)),
            CodeTier::Optimized => blocking(keep).await?,
        }
    }
    Ok(Linked { tier, engine, pre })
}

pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::engine_caused(format!("the compile task failed: {e}"), e))
}

/// Keeps a fresh compile in the cache, if there is one.
fn store(runtime: &Runtime, backend: &Backend, wasm: &[u8], built: &Built) {
    let Some(cache) = &runtime.cache else {
        return;
    };
    match &built.artifact {
        Some(artifact) => cache.store_artifact(&backend.engine, wasm, artifact),
        None => cache.store(&backend.engine, wasm, &built.component),
    }
}

fn link(
    backend: &Backend,
    path: &Path,
    component: &Component,
) -> Result<ToolPluginPre<StoreState>, LoadError> {
    let pre = backend
        .linker
        .instantiate_pre(component)
        .map_err(|e| LoadError::Link {
            path: path.to_owned(),
            reason: format!("{e:#}"),
        })?;
    ToolPluginPre::new(pre).map_err(|e| LoadError::WrongWorld {
        path: path.to_owned(),
        exports: format!("{e:#}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_engine_error_keeps_its_cause() {
        use std::error::Error as _;
        let failed = blocking(|| panic!("on purpose")).await.unwrap_err();
        assert!(
            failed
                .to_string()
                .starts_with("engine error: the compile task failed: "),
            "{failed}"
        );
        let cause = failed.source().expect("a cause");
        assert!(
            cause.downcast_ref::<tokio::task::JoinError>().is_some(),
            "{cause:?}"
        );
    }

    /// A component with one core function; `body` is its code.
    fn component(body: &str) -> Arc<Vec<u8>> {
        let wat = format!(
            "(component (core module $m
               (func $f (param i32) (result i32) {body})
               (func $g (param i32) (result i32) local.get 0)
               (export \"f\" (func $f))))"
        );
        Arc::new(wat::parse_str(wat).unwrap())
    }

    async fn first_tier(runtime: &Arc<Runtime>, wasm: &Arc<Vec<u8>>) -> CodeTier {
        let limits = CompileLimits::default();
        let path = Path::new("test.wasm");
        first_compile(runtime, path, wasm, limits).await.unwrap().0
    }

    #[tokio::test]
    async fn winch_compiles_first_and_cranelift_what_winch_cannot() {
        let tiered = Arc::new(Runtime::new(4, None, None, true).unwrap());
        let plain = component("local.get 0 call $g");
        assert_eq!(first_tier(&tiered, &plain).await, CodeTier::Baseline);
        // Winch has no tail calls; Cranelift does.
        let tail_call = component("local.get 0 return_call $g");
        assert_eq!(first_tier(&tiered, &tail_call).await, CodeTier::Optimized);
        let untiered = Arc::new(Runtime::new(4, None, None, false).unwrap());
        assert_eq!(first_tier(&untiered, &plain).await, CodeTier::Optimized);
    }

    #[test]
    fn the_compilers_code_has_distinct_cache_keys() {
        use std::hash::{Hash as _, Hasher as _};
        let runtime = Runtime::new(4, None, None, true).unwrap();
        let key = |engine: &Engine| {
            let mut hasher = std::hash::DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut hasher);
            hasher.finish()
        };
        let baseline = runtime.baseline.as_ref().unwrap();
        assert_ne!(key(&runtime.optimized.engine), key(&baseline.engine));
    }
}
