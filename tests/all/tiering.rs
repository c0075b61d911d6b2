//! Tiered compilation: a plugin serves calls at once on baseline (Winch)
//! code, under the same budgets, while its optimized code compiles in the
//! background; new calls then run the optimized code, both are cached, and
//! a plugin dropped mid-upgrade stops its compile.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use toolhost::config::CompileWorker;
use toolhost::outcome::{Culprit, DefectKind};
use toolhost::{BudgetOverrides, Call, CodeTier, Host, Interruption, Limit, Outcome, Settlement};
use toolhost_tests::procfs::{nice_of, stat_after_name};
use toolhost_tests::{builder, context, eventually, load, output, settle, within};

use crate::{CHAOS, TEXT_TOOLS};

/// A tiered host whose compile cache is `cache`.
fn tiered(state: &tempfile::TempDir, cache: &Path) -> Host {
    builder(state)
        .tiered_compilation(true)
        .cache_dir(cache)
        .build()
        .unwrap()
}

/// A compile worker whose first compile (the baseline one: a load waits
/// for it before the upgrade starts) writes its nice value to
/// `dir/first.nice` and is the real worker's, and whose later ones write
/// their pid to `dir/held.pid`, then `hold` (wait on a FIFO no one opens,
/// until killed) or fail.
fn gated_worker(dir: &Path, hold: bool) -> CompileWorker {
    let script = dir.join("worker.sh");
    std::fs::write(
        &script,
        r#"if mkdir "$2/first" 2>/dev/null; then
    nice > "$2/first.nice"
    exec "$1" __compile-worker
fi
echo $$ > "$2/held.pid"
if [ "$3" = hold ]; then read gate < "$2/gate"; fi
exit 9
"#,
    )
    .unwrap();
    let fifo = dir.join("gate");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    CompileWorker::new("/bin/sh")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_toolhost"))
        .arg(dir)
        .arg(if hold { "hold" } else { "fail" })
}

/// A host that compiles through `worker`, with no compile cache.
fn gated(state: &tempfile::TempDir, worker: CompileWorker) -> Host {
    builder(state)
        .tiered_compilation(true)
        .compile_worker(worker)
        .build()
        .unwrap()
}

fn defect(s: &Settlement) -> DefectKind {
    match &s.outcome {
        Outcome::Defect {
            culprit: Culprit::Guest(d),
            ..
        } => d.kind.clone(),
        other => panic!("expected a defect, got {other:?}"),
    }
}

async fn checksum(snapshot: &toolhost::Snapshot) -> serde_json::Value {
    let s = settle(snapshot, "compute", json!({"iterations": 100_000})).await;
    output(&s)["checksum"].clone()
}

fn entries(cache: &Path) -> usize {
    std::fs::read_dir(cache).map_or(0, |dir| dir.count())
}

#[tokio::test]
async fn a_tiered_plugin_moves_to_optimized_code_and_both_are_cached() {
    let (state, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = tiered(&state, cache.path());
    let location = host.location("/tiers");
    let activation = load(&location, CHAOS).await;
    let plugin = activation.plugin().clone();
    assert!(!plugin.info().from_cache);
    let snapshot = location.snapshot();
    let first = checksum(&snapshot).await;
    let settled = within("the optimized code", plugin.settled_code_tier()).await;
    assert_eq!(settled, CodeTier::Optimized);
    assert_eq!(plugin.code_tier(), CodeTier::Optimized);
    // Both compilers' code computes the same.
    assert_eq!(checksum(&snapshot).await, first);
    assert!(first.is_u64(), "{first}");
    // The baseline entry is written in the background, the optimized one
    // before the upgrade completes.
    eventually("a baseline and an optimized cache entry", || {
        entries(cache.path()) == 2
    })
    .await;

    // A host started later loads the optimized code from the cache.
    let again = tiered(&state, cache.path());
    let location = again.location("/again");
    let activation = load(&location, CHAOS).await;
    let plugin = activation.plugin();
    assert!(plugin.info().from_cache);
    assert_eq!(plugin.code_tier(), CodeTier::Optimized);
    assert_eq!(plugin.settled_code_tier().await, CodeTier::Optimized);
    assert_eq!(checksum(&location.snapshot()).await, first);
}

#[tokio::test]
async fn without_tiering_a_plugin_runs_optimized_code_from_the_start() {
    let state = tempfile::tempdir().unwrap();
    let host = builder(&state).build().unwrap();
    let location = host.location("/untiered");
    let activation = load(&location, TEXT_TOOLS).await;
    assert_eq!(activation.plugin().code_tier(), CodeTier::Optimized);
    assert_eq!(
        activation.plugin().settled_code_tier().await,
        CodeTier::Optimized
    );
}

#[tokio::test]
async fn r23_baseline_code_runs_under_the_same_budgets() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = gated(&state, gated_worker(dir.path(), true));
    let location = host.location("/baseline");
    let activation = load(&location, CHAOS).await;
    let snapshot = location.snapshot();
    assert!(checksum(&snapshot).await.is_u64());

    let fuel = BudgetOverrides {
        fuel: Some(5_000_000),
        ..Default::default()
    };
    let call = Call::new("spin_forever", "{}", context("spin")).with_overrides(fuel);
    let s = snapshot.settle(call).await;
    let fuel = Interruption::Fuel;
    assert_eq!(s.outcome, Outcome::Interrupted { reason: fuel });
    assert!(s.usage.fuel_used >= 5_000_000, "{}", s.usage.fuel_used);

    let deadline = BudgetOverrides {
        timeout: Some(Duration::from_millis(200)),
        ..Default::default()
    };
    let call = Call::new("spin_forever", "{}", context("spin")).with_overrides(deadline);
    let s = snapshot.settle(call).await;
    assert_eq!(s.usage.tripped, Some(Limit::Deadline));

    let memory = BudgetOverrides {
        memory: Some(16 << 20),
        ..Default::default()
    };
    let call = Call::new("allocate", r#"{"mib": 64}"#, context("mem")).with_overrides(memory);
    let s = snapshot.settle(call).await;
    assert_eq!(defect(&s), DefectKind::MemoryLimit(16 << 20));
    assert!(s.usage.peak_memory <= 16 << 20);
    let s = settle(&snapshot, "recurse", json!({"depth": 100_000_000})).await;
    assert_eq!(defect(&s), DefectKind::StackOverflow);
    let s = settle(&snapshot, "panic", json!({})).await;
    let panicked = DefectKind::Panic("chaos: deliberate panic".into());
    assert_eq!(defect(&s), panicked);

    // Every call above ran baseline code: the upgrade is held.
    assert_eq!(activation.plugin().code_tier(), CodeTier::Baseline);
}

/// Whether process `pid` has ended (gone, or a zombie not yet reaped).
fn ended(pid: u32) -> bool {
    stat_after_name(&pid.to_string()).is_none_or(|fields| fields[0] == "Z")
}

fn held_pid(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("held.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[tokio::test]
async fn dropping_a_plugin_mid_upgrade_kills_its_compile() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = gated(&state, gated_worker(dir.path(), true));
    let location = host.location("/dropped");
    let activation = load(&location, CHAOS).await;
    assert_eq!(activation.plugin().code_tier(), CodeTier::Baseline);
    eventually("the upgrade's compile", || held_pid(dir.path()).is_some()).await;
    let pid = held_pid(dir.path()).unwrap();
    assert!(!ended(pid));
    drop((activation, location, host));
    eventually("the held compile worker's end", || ended(pid)).await;
}

#[tokio::test]
async fn an_upgrade_compiles_at_the_lowest_cpu_priority_and_a_waited_compile_does_not() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = gated(&state, gated_worker(dir.path(), true));
    let location = host.location("/niced");
    let activation = load(&location, CHAOS).await;
    eventually("the upgrade's compile", || held_pid(dir.path()).is_some()).await;
    let upgrade = held_pid(dir.path()).unwrap().to_string();
    assert_eq!(nice_of(&upgrade), 19);
    let first = std::fs::read_to_string(dir.path().join("first.nice")).unwrap();
    assert_eq!(first.trim().parse::<i32>().unwrap(), nice_of("self"));
    drop(activation);
}

#[tokio::test]
async fn a_failed_upgrade_leaves_the_plugin_on_baseline_code() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = gated(&state, gated_worker(dir.path(), false));
    let location = host.location("/failed");
    let activation = load(&location, CHAOS).await;
    let settled = within(
        "the failed upgrade",
        activation.plugin().settled_code_tier(),
    )
    .await;
    assert_eq!(settled, CodeTier::Baseline);
    assert!(held_pid(dir.path()).is_some(), "the upgrade was tried");
    assert!(checksum(&location.snapshot()).await.is_u64());
}
