//! Budgets a call runs under, the bounds on what it shows the model, and the
//! usage every outcome reports (R16, R23).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Fuel units between async yields of a running guest. About tens of
/// microseconds of guest work: cancellation and deadlines take effect well
/// under a millisecond, while yielding costs around one percent.
pub const FUEL_YIELD_INTERVAL: u64 = 50_000;

/// Default fuel per call: a finite allowance for a runaway loop, about 1.5 s
/// of a tight loop on this project's 2-core machine (measured; see the
/// docs/limits.md).
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

/// Default line limit of the text that reaches the model.
pub const DEFAULT_MAX_LINES: usize = 2_000;

/// Default byte limit of the text that reaches the model.
pub const DEFAULT_MAX_BYTES: usize = 51_200;

/// Default cap on a result's machine output (its JSON text): Code Mode and
/// embedders hold it in memory; beyond it the call fails.
pub const DEFAULT_MAX_MACHINE_OUTPUT: usize = 16 << 20;

/// The limits one call runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Budget {
    /// Fuel (roughly, wasm instructions) the call may burn.
    /// Default: [`DEFAULT_FUEL`].
    pub fuel: u64,
    /// Wall-clock deadline, from the moment the call is settled (time spent
    /// waiting for a slot counts). Default: [`DEFAULT_TIMEOUT`].
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
pub struct BudgetOverrides {
    /// Replaces [`Budget::fuel`].
    pub fuel: Option<u64>,
    /// Replaces [`Budget::timeout`].
    pub timeout: Option<Duration>,
    /// Replaces [`Budget::memory`] (clamped to [`MAX_MEMORY`]).
    pub memory: Option<u64>,
}

impl BudgetOverrides {
    /// These overrides, with `fallback`'s filling the gaps.
    pub fn or(self, fallback: BudgetOverrides) -> BudgetOverrides {
        BudgetOverrides {
            fuel: self.fuel.or(fallback.fuel),
            timeout: self.timeout.or(fallback.timeout),
            memory: self.memory.or(fallback.memory),
        }
    }
}

impl Budget {
    /// This budget with `overrides` applied over it.
    pub fn with(self, overrides: &BudgetOverrides) -> Budget {
        Budget {
            fuel: overrides.fuel.unwrap_or(self.fuel),
            timeout: overrides.timeout.unwrap_or(self.timeout),
            memory: overrides.memory.unwrap_or(self.memory).min(MAX_MEMORY),
        }
    }
}

/// Limits on what one result carries: the text a model sees, across all
/// its text parts (R16), and the size of its machine output (R28).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OutputBounds {
    /// At most this many lines of text. Default: [`DEFAULT_MAX_LINES`].
    pub max_lines: usize,
    /// At most this many bytes of text. Default: [`DEFAULT_MAX_BYTES`].
    pub max_bytes: usize,
    /// At most this many bytes of machine output, as JSON text; a larger
    /// output fails the call. Default: [`DEFAULT_MAX_MACHINE_OUTPUT`].
    pub max_machine_output: usize,
}

impl Default for OutputBounds {
    fn default() -> Self {
        OutputBounds {
            max_lines: DEFAULT_MAX_LINES,
            max_bytes: DEFAULT_MAX_BYTES,
            max_machine_output: DEFAULT_MAX_MACHINE_OUTPUT,
        }
    }
}

/// Default outbound HTTP requests one call may make.
pub const DEFAULT_HTTP_REQUESTS: u32 = 64;

/// Default outbound HTTP requests one call may have open at once.
pub const DEFAULT_HTTP_CONCURRENCY: usize = 8;

/// Default request body bytes one outbound request may send.
pub const DEFAULT_HTTP_REQUEST_BYTES: u64 = 16 << 20;

/// Default response body bytes one outbound request may receive.
pub const DEFAULT_HTTP_RESPONSE_BYTES: u64 = 16 << 20;

/// What outbound HTTP one call may do (R36). Timeouts come from the call's
/// deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HttpLimits {
    /// Requests per call. Default: [`DEFAULT_HTTP_REQUESTS`].
    pub max_requests: u32,
    /// Requests open at once. Default: [`DEFAULT_HTTP_CONCURRENCY`].
    pub max_concurrent: usize,
    /// Request body bytes per request. Default: [`DEFAULT_HTTP_REQUEST_BYTES`].
    pub max_request_bytes: u64,
    /// Response body bytes per request. Default:
    /// [`DEFAULT_HTTP_RESPONSE_BYTES`].
    pub max_response_bytes: u64,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_requests: DEFAULT_HTTP_REQUESTS,
            max_concurrent: DEFAULT_HTTP_CONCURRENCY,
            max_request_bytes: DEFAULT_HTTP_REQUEST_BYTES,
            max_response_bytes: DEFAULT_HTTP_RESPONSE_BYTES,
        }
    }
}

/// Which limit stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Fuel burned (0 for native tools).
    pub fuel_used: u64,
    /// Wall time from settling to the end of execution, in milliseconds in
    /// JSON.
    #[serde(with = "millis")]
    pub wall_time: Duration,
    /// Peak linear memory in bytes (0 for native tools).
    pub peak_memory: u64,
    /// The limit that stopped the call, if one did.
    pub tripped: Option<Limit>,
    /// Outbound HTTP requests made (0 for native tools).
    pub http_requests: u32,
    /// Request body bytes sent over HTTP.
    pub http_bytes_sent: u64,
    /// Response body bytes received over HTTP.
    pub http_bytes_received: u64,
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let millis = f64::deserialize(d)?;
        Duration::try_from_secs_f64(millis / 1000.0).map_err(serde::de::Error::custom)
    }
}
