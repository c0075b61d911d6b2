//! Budgets a call runs under, and the usage every outcome reports (R23).

use std::time::Duration;

use serde::Serialize;

/// Fuel units between async yields of a running guest. About tens of
/// microseconds of guest work: cancellation and deadlines take effect well
/// under a millisecond, while yielding costs around one percent.
pub const FUEL_YIELD_INTERVAL: u64 = 50_000;

/// Default fuel per call: several seconds of guest compute, enough for honest
/// work, finite for a runaway loop.
pub const DEFAULT_FUEL: u64 = 20_000_000_000;

/// Default wall-clock deadline per call: a tool call the model waits on.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Default linear-memory limit per call: generous for tools, small enough
/// that many calls in flight cannot exhaust the machine.
pub const DEFAULT_MEMORY: u64 = 256 << 20;

/// The largest memory limit a budget may set: the pooling allocator reserves
/// this much address space per memory slot.
pub const MAX_MEMORY: u64 = 4 << 30;

/// Default calls in flight per plugin; further calls wait in line.
pub const DEFAULT_CONCURRENCY: usize = 32;

/// The limits one call runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Budget {
    /// Fuel (roughly, wasm instructions) the call may burn.
    /// Default: [`DEFAULT_FUEL`].
    pub fuel: u64,
    /// Wall-clock deadline, from the start of execution.
    /// Default: [`DEFAULT_TIMEOUT`].
    #[serde(with = "millis")]
    pub timeout: Duration,
    /// Linear-memory limit in bytes, at most [`MAX_MEMORY`].
    /// Default: [`DEFAULT_MEMORY`].
    pub memory: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            fuel: DEFAULT_FUEL,
            timeout: DEFAULT_TIMEOUT,
            memory: DEFAULT_MEMORY,
        }
    }
}

/// Optional overrides of a [`Budget`], per plugin or per call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Replaces [`Budget::fuel`].
    pub fuel: Option<u64>,
    /// Replaces [`Budget::timeout`].
    pub timeout: Option<Duration>,
    /// Replaces [`Budget::memory`] (clamped to [`MAX_MEMORY`]).
    pub memory: Option<u64>,
}

impl Budget {
    /// This budget with `limits` applied over it.
    pub fn with(self, limits: &Limits) -> Budget {
        Budget {
            fuel: limits.fuel.unwrap_or(self.fuel),
            timeout: limits.timeout.unwrap_or(self.timeout),
            memory: limits.memory.unwrap_or(self.memory).min(MAX_MEMORY),
        }
    }
}

/// Which limit stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The fuel budget ran out.
    Fuel,
    /// The wall-clock deadline passed.
    Deadline,
    /// The guest asked for more linear memory than allowed.
    Memory,
}

/// What a call consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Fuel burned (0 for native tools).
    pub fuel_used: u64,
    /// Wall time of execution.
    #[serde(with = "millis")]
    pub wall_time: Duration,
    /// Peak linear memory in bytes (0 for native tools).
    pub peak_memory: u64,
    /// The limit that stopped the call, if one did.
    pub tripped: Option<Limit>,
}

mod millis {
    use std::time::Duration;

    use serde::Serializer;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }
}

/// Enforces the memory limit and records the peak, per store.
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    pub(crate) limit: u64,
    pub(crate) peak: u64,
    pub(crate) tripped: bool,
}

impl MemoryLimiter {
    pub(crate) fn new(limit: u64) -> Self {
        MemoryLimiter {
            limit,
            peak: 0,
            tripped: false,
        }
    }
}

/// Table elements a guest may have: ample for real programs' function tables.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let desired = desired as u64;
        if desired > self.limit {
            self.tripped = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
