//! Fresh instances off the call path: a few instances of a plugin made
//! ahead of its calls, each used by exactly one call (R21 holds: none has
//! run a tool before), so a call that finds one pays only for running.
//! They are made in the background once the plugin is activated (so its
//! first call finds one) and after each call of the plugin (once its
//! instance, and so its slot, is gone), kept to a count
//! ([`WARM_INSTANCES`] by default), and all dropped once it has had no
//! call for a while ([`WARM_IDLE`]): an idle plugin holds none.
//!
//! They are made on a thread of their own (see [`maker`]), never on the
//! runtime that runs calls: there, the refill that a call wakes ran as soon
//! as the call first yielded, and the call waited for an instantiation that
//! was not its own.
//!
//! They never cost a call its instance slot: they are made only while the
//! host's instance pool is less than half full ([`room_ahead`]), and a call
//! that finds it fuller drops every plugin's (see [`EveryWarm`]) before it
//! instantiates its own.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::Instant;
use wasmtime::Store;

use crate::model::budget::Budget;
use crate::wasm::bindings::ToolPlugin;
use crate::wasm::store::StoreState;

/// Instances made ahead per plugin: enough for a caller that is not
/// saturating the plugin; each holds an instance slot and its memory.
pub const WARM_INSTANCES: usize = 2;

/// How long a plugin keeps its instances made ahead without a call.
pub const WARM_IDLE: Duration = Duration::from_secs(30);

/// An instance made ahead, with the store it lives in.
pub(crate) struct Warm {
    pub(crate) store: Store<StoreState>,
    pub(crate) instance: ToolPlugin,
}

/// A plugin that can make its instances ahead (its loaded code).
pub(crate) trait MakesAhead: Send + Sync + 'static {
    /// Its instances made ahead.
    fn warm(&self) -> &WarmInstances;
    /// The memory limit its instances are made under.
    fn memory(&self) -> u64;
    /// Its name, for logs.
    fn name(&self) -> &str;
    /// One instance, made as a call's would be (fuel, deadline).
    fn make(&self) -> impl Future<Output = Result<Warm, String>> + Send;
    /// Whether the instance pool its code is allocated from leaves room
    /// for an instance made ahead (see [`room_ahead`]); true if that code's
    /// instances are not pooled.
    fn room_ahead(&self) -> bool;
}

/// Whether an instance may be made ahead with `live` of the host's
/// `max_instances` slots taken: only while fewer than half are, so a call
/// (and any burst of calls up to half the pool) never finds the pool full
/// because of instances made ahead.
pub(crate) fn room_ahead(live: u64, max_instances: u32) -> bool {
    live.saturating_mul(2) < u64::from(max_instances)
}

/// Every plugin's instances made ahead in one host, so a call that finds
/// the instance pool half full can give their slots back to calls.
#[derive(Default)]
pub(crate) struct EveryWarm {
    pools: Mutex<Vec<Weak<WarmInstances>>>,
}

impl EveryWarm {
    fn register(&self, warm: &Arc<WarmInstances>) {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        pools.retain(|pool| pool.strong_count() > 0);
        pools.push(Arc::downgrade(warm));
    }

    /// Drops every instance made ahead, without waking any refill: there is
    /// no room for new ones.
    fn evict(&self) {
        let pools: Vec<_> = {
            let pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
            pools.iter().filter_map(Weak::upgrade).collect()
        };
        for pool in pools {
            // Dropped outside the lock: a store's drop frees its slot.
            let dropped = std::mem::take(&mut lock(&pool.state).ready);
            drop(dropped);
        }
    }
}

/// How many instances a plugin makes ahead, and how long it keeps them
/// without a call.
#[derive(Debug, Clone, Copy)]
pub struct WarmSettings {
    /// Instances kept made ahead, per plugin.
    pub count: usize,
    /// How long an unused one is kept.
    pub idle: Duration,
}

impl Default for WarmSettings {
    fn default() -> WarmSettings {
        WarmSettings {
            count: WARM_INSTANCES,
            idle: WARM_IDLE,
        }
    }
}

/// One plugin's instances made ahead, and whether its refill task runs.
pub(crate) struct WarmInstances {
    settings: WarmSettings,
    state: Mutex<State>,
    /// Wakes the refill task when a call ended; its own `Arc`,
    /// so the waiting task does not keep the plugin alive.
    wanted: Arc<Notify>,
    /// The host's: every plugin's instances made ahead.
    every: Arc<EveryWarm>,
}

#[derive(Default)]
struct State {
    ready: Vec<Warm>,
    refilling: bool,
    last_call: Option<Instant>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // Every critical section is a push, a pop or a clear.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl WarmInstances {
    /// A plugin's instances made ahead, one of the host's `every`.
    pub(crate) fn new(settings: WarmSettings, every: &Arc<EveryWarm>) -> Arc<WarmInstances> {
        let warm = Arc::new(WarmInstances {
            settings,
            state: Mutex::default(),
            wanted: Arc::default(),
            every: every.clone(),
        });
        every.register(&warm);
        warm
    }

    /// An instance made ahead for a call under `budget`, if one fits (they
    /// are made under the plugin's own memory limit). Without one, if the
    /// instance pool is half full, every plugin's are dropped so the call
    /// can make its own. The call calls [`WarmInstances::refill`] once
    /// its instance is gone.
    pub(crate) fn take<P: MakesAhead>(plugin: &Arc<P>, budget: &Budget) -> Option<Warm> {
        let warm = plugin.warm();
        if warm.settings.count == 0 {
            return None;
        }
        let found = {
            let mut state = lock(&warm.state);
            state.last_call = Some(Instant::now());
            (budget.memory == plugin.memory())
                .then(|| state.ready.pop())
                .flatten()
        };
        if found.is_none() && !plugin.room_ahead() {
            warm.every.evict();
        }
        found
    }

    /// Refills the plugin's instances made ahead in the background (wakes
    /// its refill task, or starts it): called when a call's instance is
    /// gone, so the pool's count of live instances no longer holds it.
    pub(crate) fn refill<P: MakesAhead>(plugin: &Arc<P>) {
        let warm = plugin.warm();
        if warm.settings.count == 0 {
            return;
        }
        let mut state = lock(&warm.state);
        if state.refilling {
            drop(state);
            warm.wanted.notify_one();
        } else if let Some(maker) = maker() {
            state.refilling = true;
            maker.spawn(keep_full(Arc::downgrade(plugin)));
        }
    }

    /// Drops every instance made ahead (the plugin's code changed); the
    /// refill task makes new ones.
    pub(crate) fn clear(&self) {
        lock(&self.state).ready.clear();
        self.wanted.notify_one();
    }

    /// How many instances are made ahead now.
    pub(crate) fn len(&self) -> usize {
        lock(&self.state).ready.len()
    }
}

/// The runtime instances are made ahead on (and ended calls' stores
/// dropped on, [`crate::wasm::retire`]): one thread for the process,
/// started at the first call that wants one, running its own
/// single-threaded runtime at the lowest CPU priority (on Linux, where one
/// thread's priority can be lowered), so making instances takes only the
/// time that calls leave idle. None if the thread cannot be started: calls
/// then instantiate their own.
pub(crate) fn maker() -> Option<&'static Handle> {
    static MAKER: OnceLock<Option<Handle>> = OnceLock::new();
    MAKER.get_or_init(start_maker).as_ref()
}

fn start_maker() -> Option<Handle> {
    let started = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .and_then(|runtime| {
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name(MAKER_THREAD.into())
                .spawn(move || {
                    lower_priority();
                    runtime.block_on(std::future::pending::<()>());
                })?;
            Ok(handle)
        });
    started
        .inspect_err(|e| tracing::warn!("cannot start the thread that makes instances ahead: {e}"))
        .ok()
}

/// The name of the thread that makes instances ahead.
const MAKER_THREAD: &str = "toolhost-warm";

/// The nice value of the thread that makes instances ahead: the lowest.
#[cfg(target_os = "linux")]
const MAKER_NICE: libc::c_int = 19;

/// Lowers the calling thread's CPU priority (Linux: `setpriority` with a
/// thread id applies to that thread alone).
#[cfg(target_os = "linux")]
fn lower_priority() {
    // SAFETY: gettid has no preconditions; setpriority only reads its
    // arguments.
    let failed = unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, MAKER_NICE) != 0
    };
    if failed {
        let e = std::io::Error::last_os_error();
        tracing::debug!("instances made ahead keep the host's CPU priority: {e}");
    }
}

/// Elsewhere a process's priority is all there is to lower: left alone.
#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

/// Keeps the plugin's pool full while it is called; empties it and ends
/// once it has been idle for the settings' time (or is gone).
async fn keep_full<P: MakesAhead>(plugin: Weak<P>) {
    loop {
        let Some(code) = plugin.upgrade() else { return };
        if !fill(&*code).await {
            lock(&code.warm().state).refilling = false;
            return;
        }
        let wanted = code.warm().wanted.clone();
        let idle = code.warm().settings.idle;
        drop(code);
        if tokio::time::timeout(idle, wanted.notified()).await.is_ok() {
            continue;
        }
        let Some(code) = plugin.upgrade() else { return };
        let mut state = lock(&code.warm().state);
        if state.last_call.is_none_or(|at| at.elapsed() >= idle) {
            state.ready.clear();
            state.refilling = false;
            return;
        }
    }
}

/// Makes instances until the plugin has its count or the host's instance
/// pool has no room for more; false if one cannot be made (calls then
/// instantiate their own, as without instances made ahead).
async fn fill<P: MakesAhead>(code: &P) -> bool {
    while code.warm().len() < code.warm().settings.count && code.room_ahead() {
        match code.make().await {
            Ok(warm) => lock(&code.warm().state).ready.push(warm),
            Err(e) => {
                tracing::debug!("cannot make an instance of {} ahead: {e}", code.name());
                return false;
            }
        }
    }
    true
}
