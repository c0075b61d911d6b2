//! A Toolhost plugin whose tools misbehave on purpose, for testing hosts:
//! infinite loops, panics, memory and stack exhaustion, output and metadata
//! that break the contract, and probes of isolation, capabilities and
//! permissions. Never give it to a model.

use std::hint::black_box;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use toolhost_sdk::prelude::*;

/// Loop forever without yielding: only fuel, a deadline or cancellation
/// stops it.
pub struct SpinForever;

impl Tool for SpinForever {
    const NAME: &'static str = "spin_forever";
    const DESCRIPTION: &'static str = "Loop forever.";
    type Input = NoInput;
    type Output = NoOutput;

    fn execute(_: NoInput, _cx: &Context) -> ToolResult<NoOutput> {
        let mut spins = 0u64;
        loop {
            // `black_box` keeps the optimizer from proving the loop pointless
            // (an infinite loop without side effects is otherwise fair game).
            spins = black_box(spins.wrapping_add(1));
        }
    }
}

/// The arguments of `allocate`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct AllocateInput {
    /// How many MiB to allocate and touch.
    pub mib: u64,
}

/// Allocate and touch memory; past the host's memory limit this traps.
pub struct Allocate;

impl Tool for Allocate {
    const NAME: &'static str = "allocate";
    const DESCRIPTION: &'static str = "Allocate and touch `mib` MiB of memory.";
    type Input = AllocateInput;
    type Output = NoOutput;

    fn execute(input: AllocateInput, _cx: &Context) -> ToolResult<NoOutput> {
        let bytes = usize::try_from(input.mib.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX);
        // A failed allocation aborts (a trap), which is the point: the host
        // must report the memory limit, not a tool error.
        let memory = black_box(vec![1u8; bytes]);
        Ok(Response::text(format!(
            "allocated and touched {} MiB",
            memory.len() / (1024 * 1024)
        )))
    }
}

/// Panic.
pub struct Panic;

impl Tool for Panic {
    const NAME: &'static str = "panic";
    const DESCRIPTION: &'static str = "Panic.";
    type Input = NoInput;
    type Output = NoOutput;

    fn execute(_: NoInput, _cx: &Context) -> ToolResult<NoOutput> {
        panic!("chaos: deliberate panic")
    }
}

/// The arguments of `recurse`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct RecurseInput {
    /// How deep to recurse; a large depth overflows the stack.
    pub depth: u64,
}

/// Recurse `depth` levels deep without tail calls.
pub struct Recurse;

impl Tool for Recurse {
    const NAME: &'static str = "recurse";
    const DESCRIPTION: &'static str = "Recurse `depth` levels deep.";
    type Input = RecurseInput;
    type Output = NoOutput;

    fn execute(input: RecurseInput, _cx: &Context) -> ToolResult<NoOutput> {
        let sum = descend(input.depth);
        Ok(Response::text(format!(
            "recursed {} levels (checksum {sum})",
            input.depth
        )))
    }
}

/// Each level keeps a frame alive across the recursive call and uses the
/// result afterwards, so it is not a tail call the optimizer could turn into
/// a loop.
#[inline(never)]
fn descend(depth: u64) -> u64 {
    if depth == 0 {
        return 0;
    }
    let mut frame = [0u8; 64];
    frame[(depth % 64) as usize] = 1;
    let frame = black_box(frame);
    let below = descend(black_box(depth - 1));
    below.wrapping_add(u64::from(frame[(depth % 64) as usize]))
}

/// The output `bad_output` claims to return.
#[derive(Serialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct CountOutput {
    /// A count.
    pub count: u64,
}

/// Return output that violates the declared output schema.
pub struct BadOutput;

impl Tool for BadOutput {
    const NAME: &'static str = "bad_output";
    const DESCRIPTION: &'static str = "Return output that violates its schema.";
    type Input = NoInput;
    type Output = CountOutput;

    fn execute(_: NoInput, _cx: &Context) -> ToolResult<CountOutput> {
        Ok(Response::raw_output(json!({ "count": "not a number" })))
    }
}

/// Return metadata that is a JSON array, not an object.
pub struct BadMetadata;

impl Tool for BadMetadata {
    const NAME: &'static str = "bad_metadata";
    const DESCRIPTION: &'static str = "Return metadata that is not a JSON object.";
    type Input = NoInput;
    type Output = NoOutput;

    fn execute(_: NoInput, _cx: &Context) -> ToolResult<NoOutput> {
        Ok(Response::text("bad metadata attached").with_metadata(json!(["not", "an", "object"])))
    }
}

/// The arguments of `fail`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct FailInput {
    /// The failure message.
    pub message: String,
    /// Metadata for the failure, for a UI (any JSON; the host keeps only an
    /// object).
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// Report progress, then fail with the given message.
pub struct Fail;

impl Tool for Fail {
    const NAME: &'static str = "fail";
    const DESCRIPTION: &'static str = "Report progress, then fail with `message` (and `metadata`).";
    type Input = FailInput;
    type Output = NoOutput;

    fn execute(input: FailInput, cx: &Context) -> ToolResult<NoOutput> {
        cx.progress(json!({ "stage": "before-failure" }));
        let error = ToolError::new(input.message);
        Err(match input.metadata {
            Some(metadata) => error.with_metadata(metadata),
            None => error,
        })
    }
}

/// The arguments of `huge_metadata`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct HugeMetadataInput {
    /// The size of the metadata's one string field, in KiB.
    pub kib: u64,
}

/// Return a metadata object with one string field of `kib` KiB.
pub struct HugeMetadata;

impl Tool for HugeMetadata {
    const NAME: &'static str = "huge_metadata";
    const DESCRIPTION: &'static str = "Return metadata with a `kib` KiB string field.";
    type Input = HugeMetadataInput;
    type Output = NoOutput;

    fn execute(input: HugeMetadataInput, _cx: &Context) -> ToolResult<NoOutput> {
        let len = usize::try_from(input.kib.saturating_mul(1024)).unwrap_or(usize::MAX);
        Ok(Response::text("huge metadata attached")
            .with_metadata(json!({ "padding": "x".repeat(len) })))
    }
}

/// The arguments of `print`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct PrintInput {
    /// Written to stdout, as is.
    pub stdout: String,
    /// Written to stderr, as is.
    pub stderr: String,
    /// How many times to write both (default 1).
    pub repeat: Option<u64>,
}

/// Write to stdout and stderr.
pub struct Print;

impl Tool for Print {
    const NAME: &'static str = "print";
    const DESCRIPTION: &'static str =
        "Write `stdout` and `stderr` to the standard streams, `repeat` times.";
    type Input = PrintInput;
    type Output = NoOutput;

    fn execute(input: PrintInput, _cx: &Context) -> ToolResult<NoOutput> {
        let (mut stdout, mut stderr) = (std::io::stdout().lock(), std::io::stderr().lock());
        for _ in 0..input.repeat.unwrap_or(1) {
            stdout
                .write_all(input.stdout.as_bytes())
                .and_then(|()| stderr.write_all(input.stderr.as_bytes()))
                .map_err(|error| format!("writing to the standard streams failed: {error}"))?;
        }
        stdout
            .flush()
            .map_err(|error| format!("flushing stdout failed: {error}"))?;
        Ok(Response::text("printed"))
    }
}

/// The arguments of `read_env`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct ReadEnvInput {
    /// The environment variable to read.
    pub name: String,
}

/// The result of `read_env`.
#[derive(Serialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct ReadEnvOutput {
    /// The variable's value, or null when it is not set (or not granted).
    pub value: Option<String>,
}

/// Read an environment variable: probes the host's environment grants.
pub struct ReadEnv;

impl Tool for ReadEnv {
    const NAME: &'static str = "read_env";
    const DESCRIPTION: &'static str = "Read the environment variable `name`.";
    type Input = ReadEnvInput;
    type Output = ReadEnvOutput;

    fn execute(input: ReadEnvInput, _cx: &Context) -> ToolResult<ReadEnvOutput> {
        let value = match std::env::var(&input.name) {
            Ok(value) => Some(value),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(format!("{} is set but is not valid UTF-8", input.name).into());
            }
        };
        Ok(ReadEnvOutput { value }.into())
    }
}

/// The output of `counter`.
#[derive(Serialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct CounterOutput {
    /// The counter after this call's increment.
    pub count: u64,
}

/// Increment a process-global counter: in an isolated host every call sees 1.
pub struct Counter;

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl Tool for Counter {
    const NAME: &'static str = "counter";
    const DESCRIPTION: &'static str = "Increment a global counter and return it.";
    type Input = NoInput;
    type Output = CounterOutput;

    fn execute(_: NoInput, _cx: &Context) -> ToolResult<CounterOutput> {
        let count = COUNTER.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(CounterOutput { count }.into())
    }
}

/// Try to register a tool during a call, which the host must refuse.
pub struct RegisterLate;

impl Tool for RegisterLate {
    const NAME: &'static str = "register_late";
    const DESCRIPTION: &'static str = "Try to register a tool outside activation.";
    type Input = NoInput;
    type Output = NoOutput;

    fn execute(_: NoInput, _cx: &Context) -> ToolResult<NoOutput> {
        // The SDK registers only during activation, so this reaches into the
        // raw bindings on purpose.
        use toolhost_sdk::bindings::toolhost::plugin::registry::{self, RegistrationError};
        use toolhost_sdk::bindings::toolhost::plugin::types::ToolDefinition;

        let late = ToolDefinition {
            name: "late".into(),
            description: "Registered during a call.".into(),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: None,
        };
        let reason = match registry::register(&[late]) {
            Ok(_) => return Err("register succeeded during a call; the host must refuse it".into()),
            Err(RegistrationError::NotActivating) => "not-activating",
            Err(RegistrationError::ScopeClosed) => "scope-closed",
            Err(RegistrationError::InvalidName(_)) => "invalid-name",
            Err(RegistrationError::InvalidSchema(_)) => "invalid-schema",
            Err(RegistrationError::DuplicateName(_)) => "duplicate-name",
        };
        Ok(Response::text(format!("register failed: {reason}")))
    }
}

/// The arguments of `media`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct MediaInput {
    /// The size of the media part in bytes.
    pub bytes: u64,
}

/// Return one media part of the given size and a text part.
pub struct MediaTool;

impl Tool for MediaTool {
    const NAME: &'static str = "media";
    const DESCRIPTION: &'static str = "Return `bytes` bytes of application/octet-stream media.";
    type Input = MediaInput;
    type Output = NoOutput;

    fn execute(input: MediaInput, _cx: &Context) -> ToolResult<NoOutput> {
        let data: Vec<u8> = (0..input.bytes).map(|i| i as u8).collect();
        Ok(
            Response::media(Media::new("application/octet-stream", data))
                .with_text("media attached"),
        )
    }
}

/// Return no content and no output: a contract violation.
pub struct NoContent;

impl Tool for NoContent {
    const NAME: &'static str = "no_content";
    const DESCRIPTION: &'static str = "Return an empty response.";
    type Input = NoInput;
    type Output = NoOutput;

    fn execute(_: NoInput, _cx: &Context) -> ToolResult<NoOutput> {
        Ok(Response::parts([]))
    }
}

/// The arguments of `ask`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct AskInput {
    /// The action to ask permission for.
    pub action: String,
    /// The resource the action applies to (also the pattern to save).
    pub resource: String,
}

/// Ask for permission and report the answer.
pub struct Ask;

impl Tool for Ask {
    const NAME: &'static str = "ask";
    const DESCRIPTION: &'static str = "Request permission for `action` on `resource`.";
    type Input = AskInput;
    type Output = NoOutput;

    fn execute(input: AskInput, cx: &Context) -> ToolResult<NoOutput> {
        let resource = input.resource.as_str();
        cx.request_permission(&input.action, &[resource], &[resource], None)?;
        Ok(Response::text("granted"))
    }
}

/// The arguments of `compute`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct ComputeInput {
    /// How many rounds of arithmetic to do.
    pub iterations: u64,
}

/// The result of `compute`.
#[derive(Serialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct ComputeOutput {
    /// A checksum of the work, so it cannot be optimized away.
    pub checksum: u64,
}

/// A pure compute loop: the benchmark of fuel metering's cost.
pub struct Compute;

impl Tool for Compute {
    const NAME: &'static str = "compute";
    const DESCRIPTION: &'static str = "Do `iterations` rounds of integer arithmetic.";
    type Input = ComputeInput;
    type Output = ComputeOutput;

    fn execute(input: ComputeInput, _cx: &Context) -> ToolResult<ComputeOutput> {
        // An xorshift step per round: cheap, data-dependent, not vectorizable.
        let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..input.iterations {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        Ok(Response::new(ComputeOutput { checksum: x }))
    }
}

/// The arguments of `busy`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct BusyInput {
    /// Rounds of arithmetic to do; absent: loop until stopped.
    pub iterations: Option<u64>,
}

/// Say it has started (a progress update), then compute: a call a test can
/// see running before it acts on it.
pub struct Busy;

impl Tool for Busy {
    const NAME: &'static str = "busy";
    const DESCRIPTION: &'static str =
        "Report progress `started`, then do `iterations` rounds of arithmetic (forever if absent).";
    type Input = BusyInput;
    type Output = ComputeOutput;

    fn execute(input: BusyInput, cx: &Context) -> ToolResult<ComputeOutput> {
        cx.progress(json!({ "stage": "started" }));
        let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
        let mut round = 0u64;
        while input.iterations.is_none_or(|n| round < n) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            round = black_box(round + 1);
        }
        Ok(Response::new(ComputeOutput { checksum: x }))
    }
}

/// The result of `read_config`.
#[derive(Serialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct ReadConfigOutput {
    /// The plugin configuration this call sees.
    pub config: Value,
}

/// Return the plugin's configuration, as a call sees it.
pub struct ReadConfig;

impl Tool for ReadConfig {
    const NAME: &'static str = "read_config";
    const DESCRIPTION: &'static str = "Return the plugin configuration this call sees.";
    type Input = NoInput;
    type Output = ReadConfigOutput;

    fn execute(_: NoInput, cx: &Context) -> ToolResult<ReadConfigOutput> {
        Ok(Response::new(ReadConfigOutput {
            config: cx.config(),
        }))
    }
}

toolhost_sdk::plugin!([
    SpinForever,
    Allocate,
    Panic,
    Recurse,
    BadOutput,
    BadMetadata,
    Fail,
    HugeMetadata,
    Print,
    ReadEnv,
    Counter,
    RegisterLate,
    MediaTool,
    NoContent,
    Ask,
    Compute,
    Busy,
    ReadConfig,
]);
