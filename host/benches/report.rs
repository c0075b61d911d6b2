//! The performance report: every ratio of docs/performance.md, measured in
//! one run on this machine.
//! `cargo bench -p toolhost --features bench --bench report`
//! (`-- --stores`: only the outcomes-in-a-store section; `-- --made-ahead`:
//! only unsaturated calls with and without instances made ahead).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::bench_support::Warm;
use toolhost::config::PluginOptions;
use toolhost::{Call, CancellationToken, Host, Outcome, Snapshot, Tool, ToolResponse};
use toolhost_tests::context;

toolhost_tests::plugin_paths!();

const ECHO_INPUT: &str = r#"{"message":"hello"}"#;

/// The system allocator, counting each thread's allocations so the report
/// can show how many one settled call makes. Per thread, so the count adds
/// no shared atomic that would distort the two-worker throughput.
struct Counting;

thread_local! {
    static ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count_allocation() {
    ALLOCATIONS.with(|n| n.set(n.get() + 1));
}

// SAFETY: defers every operation to `System`, only counting.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller's contract is `System`'s.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        count_allocation();
        // SAFETY: as above.
        unsafe { std::alloc::System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations (and reallocations) per settled call of `tool`, over `n`
/// calls run on this thread (settlement runs wasm and native tools in
/// place, on the caller's task).
fn allocations_per_call(rt: &tokio::runtime::Runtime, snapshot: &Snapshot, tool: &str) -> f64 {
    let n = 1_000;
    let before = ALLOCATIONS.with(std::cell::Cell::get);
    rt.block_on(async {
        for _ in 0..n {
            snapshot
                .settle(Call::new(tool, ECHO_INPUT, context("bench")))
                .await;
        }
    });
    let after = ALLOCATIONS.with(std::cell::Cell::get);
    (after - before) as f64 / n as f64
}

/// The schema of echo's input and output.
fn echo_schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})
}

fn native_echo() -> Tool {
    Tool::native(
        "echo",
        echo_schema(),
        Some(echo_schema()),
        |input, _| async move {
            Ok(ToolResponse {
                content: Some(vec![toolhost::ContentPart::text(
                    input["message"].as_str().unwrap_or_default(),
                )]),
                output: Some(input),
                metadata: None,
            })
        },
    )
    .unwrap()
}

struct Stats {
    median: Duration,
    mean: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let total: Duration = samples.iter().sum();
    Stats {
        median: samples[samples.len() / 2],
        mean: total / samples.len() as u32,
    }
}

async fn settle_latency(snapshot: &Snapshot, tool: &str, n: usize) -> Stats {
    spaced_latency(snapshot, tool, n, Duration::ZERO).await
}

/// Settled latency with `pause` before each call (a model's turn between
/// tool calls): a pause lets instances be made ahead, which a
/// back-to-back loop never leaves time for.
async fn spaced_latency(snapshot: &Snapshot, tool: &str, n: usize, pause: Duration) -> Stats {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        let start = Instant::now();
        let s = snapshot
            .settle(Call::new(tool, ECHO_INPUT, context("bench")))
            .await;
        samples.push(start.elapsed());
        assert!(
            matches!(s.outcome, Outcome::Completed(_)),
            "{:?}",
            s.outcome
        );
    }
    stats(samples)
}

/// Unsaturated settled echo with instances made ahead and without, beside
/// the same settled echo run in one warm (reused, unisolated) instance and
/// a warm instance's call without settlement, back to back and with the
/// same pause: the goal is made-ahead <= 1.5x warm.
fn made_ahead() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let pause = Duration::from_millis(1);
    println!(
        "
unsaturated settled echo (1 ms between calls), 1 worker"
    );
    let (warm, warm_spaced) = rt.block_on(async {
        let mut warm = Warm::new(Path::new(TEXT_TOOLS), true).await.unwrap();
        warm.calls("echo", ECHO_INPUT, 2_000).await.unwrap();
        let back_to_back = warm.calls("echo", ECHO_INPUT, 20_000).await.unwrap() / 20_000;
        let mut samples = Vec::with_capacity(2_000);
        for _ in 0..2_000 {
            tokio::time::sleep(pause).await;
            samples.push(warm.calls("echo", ECHO_INPUT, 1).await.unwrap());
        }
        (back_to_back, stats(samples).median)
    });
    let mut medians = Vec::new();
    for (label, count) in [
        ("instances made ahead   ", toolhost::limits::WARM_INSTANCES),
        ("instantiated on arrival", 0),
    ] {
        let host = Host::builder()
            .without_store()
            .warm_instances(count, toolhost::limits::WARM_IDLE)
            .build()
            .unwrap();
        let location = host.location("/bench");
        let latency = rt.block_on(async {
            let _a = location
                .load(TEXT_TOOLS, &PluginOptions::default())
                .await
                .unwrap();
            spaced_on_worker(location.snapshot(), pause, label).await
        });
        medians.push(latency.median);
    }
    let settled_warm = rt.block_on(async {
        let tool = toolhost::bench_support::warm_tool(
            Path::new(TEXT_TOOLS),
            "echo",
            echo_schema(),
            Some(echo_schema()),
        )
        .await
        .unwrap();
        let host = Host::builder().without_store().build().unwrap();
        let location = host.location("/bench-warm");
        let _tools = location.register([("echo", tool)]).unwrap();
        spaced_on_worker(location.snapshot(), pause, "one warm instance, settled").await
    });
    println!(
        "  warm-instance echo (no settlement)  back to back: mean {}; 1 ms apart: median {}",
        micros(warm),
        micros(warm_spaced)
    );
    let ratio = |made: Duration, warm: Duration| made.as_secs_f64() / warm.as_secs_f64();
    println!(
        "  ratio made ahead / one warm instance, both settled (goal <= 1.5x): {:.2}x; on arrival: {:.2}x",
        ratio(medians[0], settled_warm.median),
        ratio(medians[1], settled_warm.median)
    );
    println!(
        "  ratio made ahead / warm call 1 ms apart, unsettled: {:.1}x; on arrival: {:.1}x",
        ratio(medians[0], warm_spaced),
        ratio(medians[1], warm_spaced)
    );
    println!(
        "  ratio made ahead / warm back to back: {:.1}x; on arrival: {:.1}x",
        ratio(medians[0], warm),
        ratio(medians[1], warm)
    );
}

/// 2,000 echo calls `pause` apart (after 200 to warm up) on a worker of
/// the runtime, not its `block_on` thread; prints their latency.
async fn spaced_on_worker(snapshot: Snapshot, pause: Duration, label: &str) -> Stats {
    let latency = tokio::spawn(async move {
        spaced_latency(&snapshot, "echo", 200, pause).await;
        spaced_latency(&snapshot, "echo", 2_000, pause).await
    })
    .await
    .unwrap();
    println!(
        "  {label}  median {}  mean {}",
        micros(latency.median),
        micros(latency.mean)
    );
    latency
}

/// Settled echo calls per second with `workers` runtime threads and many
/// calls in flight.
fn throughput(snapshot: &Snapshot, workers: usize, calls: usize) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let start = Instant::now();
        let per_task = calls / 64;
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..64 {
            let snapshot = snapshot.clone();
            set.spawn(async move {
                for _ in 0..per_task {
                    snapshot
                        .settle(Call::new("echo", ECHO_INPUT, context("bench")))
                        .await;
                }
            });
        }
        while set.join_next().await.is_some() {}
        (per_task * 64) as f64 / start.elapsed().as_secs_f64()
    })
}

fn micros(d: Duration) -> String {
    format!("{:.2} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    // `cargo bench` adds `--bench`.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if let [flag, mode, n, cache] = args.as_slice()
        && flag == "--count"
    {
        return count_calls(mode, n.parse().unwrap(), Path::new(cache));
    }
    if let [flag] = args.as_slice()
        && flag == "--stores"
    {
        return stores(tempfile::tempdir().unwrap().path());
    }
    if let [flag] = args.as_slice()
        && flag == "--made-ahead"
    {
        return made_ahead();
    }
    if let [flag, workers, n, cache] = args.as_slice()
        && flag == "--throughput"
    {
        return profile_throughput(
            workers.parse().unwrap(),
            n.parse().unwrap(),
            Path::new(cache),
        );
    }
    let cache = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // The pipeline alone: outcomes in a store are measured by `stores`.
    let host = Host::builder()
        .without_store()
        .concurrency(256)
        .build()
        .unwrap();
    let location = host.location("/bench");
    let (snapshot, _activations) = rt.block_on(async {
        let a = location
            .load(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap();
        let b = location
            .load(CHAOS, &PluginOptions::default())
            .await
            .unwrap();
        (location.snapshot(), vec![a, b])
    });
    let native_location = host.location("/bench-native");
    let _native = native_location.register([("echo", native_echo())]).unwrap();
    let native = native_location.snapshot();

    println!(
        "Toolhost performance report ({} logical CPUs)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // 1. Settled echo: wasm (fresh isolated instance, both schemas, bounding) vs native.
    // Measured in a task on the runtime's worker, where embedders settle.
    let (wasm, nat) = rt.block_on({
        let (snapshot, native) = (snapshot.clone(), native.clone());
        async move {
            tokio::spawn(async move {
                settle_latency(&snapshot, "echo", 2_000).await; // warm-up
                settle_latency(&native, "echo", 2_000).await;
                (
                    settle_latency(&snapshot, "echo", 20_000).await,
                    settle_latency(&native, "echo", 20_000).await,
                )
            })
            .await
            .unwrap()
        }
    });
    println!(
        "settled echo, wasm (fresh instance)   median {}  mean {}",
        micros(wasm.median),
        micros(wasm.mean)
    );
    println!(
        "settled echo, native                  median {}  mean {}",
        micros(nat.median),
        micros(nat.mean)
    );
    println!(
        "  ratio wasm / native (goal <= 10x):  {:.1}x",
        wasm.median.as_secs_f64() / nat.median.as_secs_f64()
    );
    println!(
        "allocations per settled call          wasm {:.0}, native {:.0}",
        allocations_per_call(&rt, &snapshot, "echo"),
        allocations_per_call(&rt, &native, "echo")
    );
    println!(
        "  goal: wasm median <= 20 µs:         {}",
        if wasm.median <= Duration::from_micros(20) {
            "met"
        } else {
            "NOT met"
        }
    );

    // 2. Fresh vs warm instance: the isolation tax.
    let warm = rt.block_on(async {
        let mut warm = Warm::new(Path::new(TEXT_TOOLS), true).await.unwrap();
        warm.calls("echo", ECHO_INPUT, 2_000).await.unwrap();
        warm.calls("echo", ECHO_INPUT, 20_000).await.unwrap() / 20_000
    });
    let fresh = rt.block_on(async {
        let plugin = host
            .compile(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap();
        let n = 20_000;
        toolhost::bench_support::fresh_calls(&plugin, "echo", ECHO_INPUT, 2_000)
            .await
            .unwrap();
        toolhost::bench_support::fresh_calls(&plugin, "echo", ECHO_INPUT, n)
            .await
            .unwrap()
            / n as u32
    });
    println!(
        "\nfresh-instance echo (no settlement)   mean {}",
        micros(fresh)
    );
    println!(
        "warm-instance echo (no settlement)    mean {}",
        micros(warm)
    );
    println!(
        "  ratio fresh / warm (isolation tax, goal <= 3x): {:.1}x",
        fresh.as_secs_f64() / warm.as_secs_f64()
    );
    println!(
        "  ratio settled fresh / warm:         {:.1}x",
        wasm.mean.as_secs_f64() / warm.as_secs_f64()
    );

    // 3. Fuel-metered vs unmetered compute loop.
    let compute = r#"{"iterations":20000000}"#;
    let (metered, unmetered) = rt.block_on(async {
        let mut m = Warm::new(Path::new(CHAOS), true).await.unwrap();
        let mut u = Warm::new(Path::new(CHAOS), false).await.unwrap();
        m.calls("compute", compute, 1).await.unwrap();
        u.calls("compute", compute, 1).await.unwrap();
        let mut ms = Vec::new();
        let mut us = Vec::new();
        for _ in 0..5 {
            ms.push(m.calls("compute", compute, 1).await.unwrap());
            us.push(u.calls("compute", compute, 1).await.unwrap());
        }
        (stats(ms).median, stats(us).median)
    });
    println!(
        "\ncompute loop, fuel-metered            median {:.2} ms",
        metered.as_secs_f64() * 1e3
    );
    println!(
        "compute loop, unmetered               median {:.2} ms",
        unmetered.as_secs_f64() * 1e3
    );
    println!(
        "  ratio metered / unmetered (goal <= 1.15x): {:.3}x",
        metered.as_secs_f64() / unmetered.as_secs_f64()
    );

    // 4. Cancel-to-interrupted latency of a spinning guest.
    let latency = rt.block_on(async {
        let mut samples = Vec::new();
        for _ in 0..30 {
            let token = CancellationToken::new();
            let call = Call::new("spin_forever", "{}", context("bench")).with_cancel(token.clone());
            let snap = snapshot.clone();
            let task = tokio::spawn(async move { snap.settle(call).await });
            tokio::time::sleep(Duration::from_millis(20)).await;
            let start = Instant::now();
            token.cancel();
            let s = task.await.unwrap();
            samples.push(start.elapsed());
            assert!(matches!(s.outcome, Outcome::Interrupted { .. }));
        }
        stats(samples)
    });
    println!(
        "\ncancel -> interrupted                 median {}  mean {}  (goal < 1 ms)",
        micros(latency.median),
        micros(latency.mean)
    );

    // 5. Two workers vs one.
    let one = throughput(&snapshot, 1, 40_000);
    let two = throughput(&snapshot, 2, 40_000);
    println!("\nsettled echo throughput, 1 worker     {one:.0} calls/s");
    println!("settled echo throughput, 2 workers    {two:.0} calls/s  (goal >= 240k/s)");
    println!(
        "  for comparison, one warm unisolated instance, 1 thread: {:.0} calls/s",
        1.0 / warm.as_secs_f64()
    );
    println!("  ratio 2 workers / 1 (goal >= 1.9x): {:.2}x", two / one);

    // 6. Cached load vs first compile.
    let cached_host = Host::builder()
        .without_store()
        .cache_dir(cache.path())
        .build()
        .unwrap();
    let start = Instant::now();
    let load = |host: &Host| {
        rt.block_on(host.compile(TEXT_TOOLS, &PluginOptions::default()))
            .unwrap()
    };
    let first = load(&cached_host);
    let compile = start.elapsed();
    assert!(!first.info().from_cache);
    let mut loads = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let p = load(&cached_host);
        loads.push(start.elapsed());
        assert!(p.info().from_cache);
    }
    let cached = stats(loads).median;
    println!(
        "\nplugin load, first compile            {:.2} ms",
        compile.as_secs_f64() * 1e3
    );
    println!(
        "plugin load, from the compile cache   {:.3} ms",
        cached.as_secs_f64() * 1e3
    );
    println!(
        "  ratio compile / cached (goal >= 100x): {:.0}x",
        compile.as_secs_f64() / cached.as_secs_f64()
    );

    code_mode(&rt, cache.path());
    made_ahead();
    stores(cache.path());
    instructions(cache.path());
}

/// Where a [`stores`] run records its outcomes.
enum Recording {
    Nothing,
    Sink(tempfile::TempDir),
    Sqlite(tempfile::TempDir),
    Postgres(toolhost_tests::postgres::Postgres),
}

/// Settled wasm echo calls per second with each way of recording outcomes,
/// at 1, 16 and 64 calls in flight, with the store's mean group-commit
/// batch; ratios to recording nothing.
fn stores(cache: &Path) {
    use std::sync::Arc;
    use toolhost::store::SqlStore;

    println!("\noutcomes recorded: settled wasm echo calls/s (1, 16, 64 in flight), 2 workers");
    let backends = [
        ("no store", Recording::Nothing),
        (
            "JSON Lines sink",
            Recording::Sink(tempfile::tempdir().unwrap()),
        ),
        (
            "SQLite (embedded)",
            Recording::Sqlite(tempfile::tempdir().unwrap()),
        ),
        (
            "Postgres",
            Recording::Postgres(toolhost_tests::postgres::Postgres::start()),
        ),
    ];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut baseline = [0.0; 3];
    for (name, recording) in &backends {
        let (host, store) = rt.block_on(async {
            let builder = Host::builder().cache_dir(cache).concurrency(256);
            match recording {
                Recording::Nothing => (builder.without_store(), None),
                Recording::Sink(dir) => {
                    let sink = toolhost::events::JsonLinesSink::open(dir.path().join("e.jsonl"));
                    (
                        builder.without_store().event_sink(Arc::new(sink.unwrap())),
                        None,
                    )
                }
                Recording::Sqlite(dir) => {
                    let store = Arc::new(SqlStore::embedded(dir.path()).await.unwrap());
                    (builder.store(store.clone()), Some(store))
                }
                Recording::Postgres(pg) => {
                    let store = Arc::new(SqlStore::open(&pg.url()).await.unwrap());
                    (builder.store(store.clone()), Some(store))
                }
            }
        });
        let host = host.build().unwrap();
        let location = host.location("/stores");
        let _a = rt
            .block_on(location.load(TEXT_TOOLS, &PluginOptions::default()))
            .unwrap();
        let snapshot = location.snapshot();
        let mut line = format!("  {name:<18}");
        for (i, in_flight) in [1usize, 16, 64].into_iter().enumerate() {
            let before = store.as_ref().map(|s| s.commits());
            let rate = rt.block_on(in_flight_rate(&snapshot, in_flight, 64 * 40));
            if matches!(recording, Recording::Nothing) {
                baseline[i] = rate;
            }
            let ratio = rate / baseline[i];
            line += &format!("  {rate:>7.0}/s ({ratio:.2}x");
            if let (Some(store), Some((commits, writes))) = (&store, before) {
                let (c, w) = store.commits();
                line += &format!(
                    ", batch {:.1}",
                    (w - writes) as f64 / (c - commits).max(1) as f64
                );
            }
            line += ")";
        }
        println!("{line}");
    }
    println!("  (ratio: to no store at the same calls in flight; batch: writes per commit)");
}

/// Settled echo calls per second with `in_flight` tasks settling `calls` in
/// all.
async fn in_flight_rate(snapshot: &Snapshot, in_flight: usize, calls: usize) -> f64 {
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..in_flight {
        let snapshot = snapshot.clone();
        set.spawn(async move {
            for _ in 0..calls / in_flight {
                let s = snapshot
                    .settle(Call::new("echo", ECHO_INPUT, context("bench")))
                    .await;
                assert!(
                    matches!(s.outcome, Outcome::Completed(_)),
                    "{:?}",
                    s.outcome
                );
            }
        });
    }
    while set.join_next().await.is_some() {}
    (calls / in_flight * in_flight) as f64 / start.elapsed().as_secs_f64()
}

/// The kinds of echo call whose instructions the report counts.
const COUNTED: &[(&str, &str)] = &[
    ("settled", "settled echo, wasm (fresh instance)"),
    ("fresh", "fresh-instance echo (no settlement)"),
    ("warm", "warm-instance echo (no settlement)"),
    ("native", "settled echo, native"),
];

/// Instructions per call of each kind in [`COUNTED`], counted by callgrind:
/// the difference between runs of 1,100 and 100 calls, so start-up cancels
/// out. Unlike times, these do not move with the machine's load.
fn instructions(cache: &Path) {
    println!("\ninstructions per call (callgrind; repeatable, unlike times)");
    let exe = std::env::current_exe().unwrap();
    // Under valgrind the CPU looks different, so the engine compiles anew
    // once: fill the compile cache before counting.
    callgrind_total(&exe, "settled", 1, cache);
    let mut per_call = Vec::new();
    for (mode, label) in COUNTED {
        let count = |n: u64| callgrind_total(&exe, mode, n, cache);
        let (Some(few), Some(many)) = (count(100), count(1100)) else {
            println!("  skipped: `valgrind --tool=callgrind` did not run (is valgrind installed?)");
            return;
        };
        let each = many.saturating_sub(few) as f64 / 1000.0;
        println!("{label:<38}{:>10.0}", each);
        per_call.push(each);
    }
    println!(
        "  ratio fresh / warm (isolation tax):  {:.1}x",
        per_call[1] / per_call[2]
    );
    println!(
        "  ratio settled wasm / native:         {:.1}x",
        per_call[0] / per_call[3]
    );
}

/// Instructions callgrind counted for `report --count MODE N`.
fn callgrind_total(exe: &Path, mode: &str, n: u64, cache: &Path) -> Option<u64> {
    let out = tempfile::NamedTempFile::new().unwrap();
    let status = std::process::Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.path().display()))
        .arg(exe)
        .args(["--count", mode, &n.to_string()])
        .arg(cache)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    let text = std::fs::read_to_string(out.path()).ok()?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary: ")
                .or_else(|| l.strip_prefix("totals: "))
        })
        .and_then(|n| n.trim().parse().ok())
}

/// `report --throughput WORKERS N CACHE`: `n` settled echo calls on
/// `workers` threads, alone in a process, for profilers such as `perf
/// record` (give a filled compile cache, or compiling shows in the profile).
fn profile_throughput(workers: usize, n: usize, cache: &Path) {
    let host = Host::builder()
        .without_store()
        .cache_dir(cache)
        .concurrency(256)
        .build()
        .unwrap();
    let location = host.location("/throughput");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _activation = rt
        .block_on(location.load(TEXT_TOOLS, &PluginOptions::default()))
        .unwrap();
    let rate = throughput(&location.snapshot(), workers, n);
    println!("settled echo throughput, {workers} workers: {rate:.0} calls/s");
}

/// `report --count MODE N CACHE`: one warm-up call, then `n` echo calls
/// of `mode`, on one thread; the report runs this under callgrind.
fn count_calls(mode: &str, n: u64, cache: &Path) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Few instance slots: valgrind cannot map the default pool's reservation.
    let host = Host::builder()
        .without_store()
        .cache_dir(cache)
        .max_instances(4)
        .build()
        .unwrap();
    let location = host.location("/count");
    rt.block_on(async {
        match mode {
            "settled" | "native" => {
                let _activation = location
                    .load(TEXT_TOOLS, &PluginOptions::default())
                    .await
                    .unwrap();
                let native = host.location("/count-native");
                let _native = native.register([("echo", native_echo())]).unwrap();
                let snapshot = if mode == "native" {
                    native.snapshot()
                } else {
                    location.snapshot()
                };
                for _ in 0..=n {
                    snapshot
                        .settle(Call::new("echo", ECHO_INPUT, context("bench")))
                        .await;
                }
            }
            "fresh" => {
                let plugin = host
                    .compile(TEXT_TOOLS, &PluginOptions::default())
                    .await
                    .unwrap();
                toolhost::bench_support::fresh_calls(&plugin, "echo", ECHO_INPUT, n + 1)
                    .await
                    .unwrap();
            }
            "warm" => {
                let mut warm = Warm::new(Path::new(TEXT_TOOLS), true).await.unwrap();
                warm.calls("echo", ECHO_INPUT, n + 1).await.unwrap();
            }
            other => panic!("unknown mode {other}"),
        }
    });
}

/// Code Mode: the interpreter's start-up with a trivial program, and a
/// program making 100 nested `echo` calls against 100 direct settled calls.
fn code_mode(rt: &tokio::runtime::Runtime, cache: &Path) {
    let host = Host::builder()
        .without_store()
        .cache_dir(cache)
        .code_mode(std::fs::read(INTERPRETER).unwrap())
        .build()
        .unwrap();
    let location = host.location("/bench-code");
    let (snapshot, _text) = rt.block_on(async {
        let a = location
            .load(TEXT_TOOLS, &PluginOptions::default())
            .await
            .unwrap();
        (location.snapshot(), a)
    });
    let program = |code: &str| json!({ "code": code }).to_string();
    let trivial = program("return 1;");
    let nested = program(
        "for (let i = 0; i < 100; i++) { await tools.echo({ message: 'hello' }); } return 100;",
    );
    let run = |input: &str, n: usize| {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let start = Instant::now();
            let s = rt.block_on(snapshot.settle(Call::new("execute", input, context("bench"))));
            samples.push(start.elapsed());
            assert!(
                matches!(s.outcome, Outcome::Completed(_)),
                "{:?}",
                s.outcome
            );
        }
        stats(samples).median
    };
    run(&trivial, 5); // warm-up
    let start_up = run(&trivial, 50);
    let hundred_nested = run(&nested, 20);
    let direct = |n: usize| {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let start = Instant::now();
            rt.block_on(async {
                for _ in 0..100 {
                    snapshot
                        .settle(Call::new("echo", ECHO_INPUT, context("bench")))
                        .await;
                }
            });
            samples.push(start.elapsed());
        }
        stats(samples).median
    };
    let hundred_direct = direct(20);
    println!(
        "\nexecute, trivial program (interpreter start-up) {:.2} ms",
        start_up.as_secs_f64() * 1e3
    );
    println!(
        "execute, 100 nested echo calls          {:.2} ms",
        hundred_nested.as_secs_f64() * 1e3
    );
    println!(
        "100 direct settled echo calls           {:.2} ms",
        hundred_direct.as_secs_f64() * 1e3
    );
    println!(
        "  ratio nested / direct:                {:.2}x",
        hundred_nested.as_secs_f64() / hundred_direct.as_secs_f64()
    );

    // Each model request takes a snapshot; with Code Mode on it also
    // renders `execute`'s declarations.
    let plain_host = Host::builder()
        .without_store()
        .cache_dir(cache)
        .build()
        .unwrap();
    let plain = plain_host.location("/bench-plain");
    let _plain_text = rt
        .block_on(plain.load(TEXT_TOOLS, &PluginOptions::default()))
        .unwrap();
    let (off, on) = (snapshot_time(&plain), snapshot_time(&location));
    println!(
        "snapshot (text-tools), Code Mode off   mean {}",
        micros(off)
    );
    println!("snapshot (text-tools), Code Mode on    mean {}", micros(on));
}

/// Mean time `location.snapshot()` takes, over 2,000 snapshots.
fn snapshot_time(location: &toolhost::Location) -> Duration {
    let n = 2_000;
    let start = Instant::now();
    for _ in 0..n {
        std::hint::black_box(location.snapshot());
    }
    start.elapsed() / n
}
