//! Execution rules R20-R23 with the misbehaving `chaos` plugin: every
//! failure stays in its kind, and a healthy call succeeds right after each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{CHAOS, TEXT_TOOLS};
use serde_json::json;
use toolhost::config::PluginOptions;
use toolhost::outcome::{Culprit, DefectKind, FaultKind};
use toolhost::{
    Budget, BudgetOverrides, Call, CancellationToken, Interruption, Limit, Outcome, Settlement,
    Snapshot,
};
use toolhost_tests::procfs::{nice_of, thread_named};
use toolhost_tests::wait::PATIENCE;
use toolhost_tests::{
    Recorder, builder, context, eventually, host, load, settle, wait_until, within,
};

async fn chaos_snapshot(
    host: &toolhost::Host,
    name: &str,
) -> (Snapshot, Vec<toolhost::Activation>) {
    let location = host.location(format!("/{name}"));
    let a = load(&location, CHAOS).await;
    let b = load(&location, TEXT_TOOLS).await;
    (location.snapshot(), vec![a, b])
}

async fn healthy(snapshot: &Snapshot) {
    let s = settle(snapshot, "echo", json!({"message": "still fine"})).await;
    assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
}

fn defect(s: &Settlement) -> &toolhost::outcome::Defect {
    match &s.outcome {
        Outcome::Defect {
            culprit: Culprit::Guest(d),
            ..
        } => d,
        other => panic!("expected a defect, got {other:?}"),
    }
}

/// BudgetOverrides with only a wall-clock deadline.
fn deadline(ms: u64) -> BudgetOverrides {
    BudgetOverrides {
        timeout: Some(Duration::from_millis(ms)),
        ..Default::default()
    }
}

async fn call_with(
    snapshot: &Snapshot,
    tool: &str,
    input: serde_json::Value,
    overrides: BudgetOverrides,
) -> Settlement {
    snapshot
        .settle(Call::new(tool, input.to_string(), context(tool)).with_overrides(overrides))
        .await
}

/// A call of chaos's `busy`, which reports progress and then loops until
/// stopped, and the recorder of its events: `recorder.started(id)` returns
/// once the guest is running.
fn busy(call_id: &str, overrides: BudgetOverrides) -> (Call, Arc<Recorder>) {
    let events = Arc::new(Recorder::default());
    let call = Call::new("busy", "{}", context(call_id))
        .with_overrides(overrides)
        .with_events(events.clone());
    (call, events)
}

#[tokio::test]
async fn r20_failures_defects_and_interruptions_stay_distinct() {
    let (host, _out) = host();
    let (snapshot, _a) = chaos_snapshot(&host, "r20").await;

    let s = settle(&snapshot, "fail", json!({"message": "expected failure"})).await;
    assert_eq!(s.outcome.status(), "error");
    healthy(&snapshot).await;

    let s = settle(&snapshot, "panic", json!({})).await;
    let d = defect(&s);
    assert_eq!(d.plugin, "chaos");
    assert!(d.version.starts_with("blake3:"));
    assert_eq!(d.tool, "panic");
    assert_eq!(d.kind, DefectKind::Panic("chaos: deliberate panic".into()));
    // Classifying the panic must not consume the guest's stderr: the logs
    // (what `--verbose` shows) still carry the panic text.
    assert!(
        s.logs.stderr.contains("chaos: deliberate panic"),
        "stderr: {:?}",
        s.logs.stderr
    );
    let message = s.outcome_message();
    assert!(
        message.contains("chaos") && message.contains("`panic`"),
        "{message}"
    );
    healthy(&snapshot).await;

    let s = settle(&snapshot, "recurse", json!({"depth": 100_000_000})).await;
    assert_eq!(defect(&s).kind, DefectKind::StackOverflow);
    healthy(&snapshot).await;

    let s = call_with(&snapshot, "spin_forever", json!({}), deadline(100)).await;
    assert_eq!(
        s.outcome,
        Outcome::Interrupted {
            reason: Interruption::Deadline
        }
    );
    healthy(&snapshot).await;

    let s = settle(&snapshot, "register_late", json!({})).await;
    match &s.outcome {
        Outcome::Completed(c) => assert!(
            format!("{:?}", c.content).contains("not-activating")
                || format!("{:?}", c.content).contains("NotActivating"),
            "{:?}",
            c.content
        ),
        other => panic!("{other:?}"),
    }
}

trait OutcomeMessage {
    fn outcome_message(&self) -> String;
}

impl OutcomeMessage for Settlement {
    fn outcome_message(&self) -> String {
        match &self.outcome {
            Outcome::Defect { message, .. } | Outcome::Error { message, .. } => message.clone(),
            other => format!("{other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r21_every_call_runs_in_a_fresh_instance() {
    let (host, _out) = host();
    let (snapshot, _a) = chaos_snapshot(&host, "r21").await;
    // A process-global counter in the guest: 1 every time, sequentially...
    for _ in 0..3 {
        let s = settle(&snapshot, "counter", json!({})).await;
        match &s.outcome {
            Outcome::Completed(c) => assert_eq!(c.output, Some(json!({"count": 1}))),
            other => panic!("{other:?}"),
        }
    }
    // ...and concurrently, across worker threads.
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let snapshot = snapshot.clone();
        calls.spawn(async move { settle(&snapshot, "counter", json!({})).await });
    }
    while let Some(s) = calls.join_next().await {
        match &s.unwrap().outcome {
            Outcome::Completed(c) => assert_eq!(c.output, Some(json!({"count": 1}))),
            other => panic!("{other:?}"),
        }
    }
    // A trapped call's instance is discarded; the next call is clean.
    let s = settle(&snapshot, "panic", json!({})).await;
    assert_eq!(s.outcome.status(), "defect");
    let s = settle(&snapshot, "counter", json!({})).await;
    assert_eq!(s.outcome.status(), "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r21_instances_made_ahead_serve_one_call_each_and_go_when_idle() {
    let state = tempfile::tempdir().expect("temp dir");
    let host = builder(&state)
        .warm_instances(2, Duration::from_millis(300))
        .build()
        .expect("host builds");
    let location = host.location("/warm");
    let chaos = load(&location, CHAOS).await;
    let plugin = chaos.plugin().clone();
    // Made ahead once the plugin is activated, so its first call finds one
    // as later calls do; each call takes one that has never run a tool.
    eventually("two instances made ahead of the first call", || {
        plugin.warm_instances() == 2
    })
    .await;
    let snapshot = location.snapshot();
    for n in 0..6 {
        let s = settle(&snapshot, "counter", json!({})).await;
        match &s.outcome {
            Outcome::Completed(c) => assert_eq!(c.output, Some(json!({"count": 1})), "call {n}"),
            other => panic!("call {n}: {other:?}"),
        }
        eventually("two instances made ahead", || plugin.warm_instances() == 2).await;
    }
    // A call under another memory limit cannot use them: it makes its own.
    let small = BudgetOverrides {
        memory: Some(32 << 20),
        ..BudgetOverrides::default()
    };
    let s = snapshot
        .settle(Call::new("counter", "{}", context("counter")).with_overrides(small))
        .await;
    assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
    // Idle: every instance made ahead is dropped.
    eventually("an idle plugin to hold none", || {
        plugin.warm_instances() == 0
    })
    .await;
    // Off: none is ever made.
    let state = tempfile::tempdir().expect("temp dir");
    let cold = builder(&state)
        .warm_instances(0, Duration::from_millis(300))
        .build()
        .expect("host builds");
    let location = cold.location("/cold");
    let chaos = load(&location, CHAOS).await;
    let s = settle(&location.snapshot(), "counter", json!({})).await;
    assert_eq!(s.outcome.status(), "completed");
    assert_eq!(chaos.plugin().warm_instances(), 0);
}

/// Instances are made ahead on a thread of their own, at the lowest CPU
/// priority: never on the runtime that runs calls, where making them
/// delayed the call that woke the refill.
#[tokio::test]
async fn r21_instances_are_made_ahead_off_the_calls_runtime_at_the_lowest_priority() {
    let state = tempfile::tempdir().expect("temp dir");
    let host = builder(&state)
        .warm_instances(2, Duration::from_secs(30))
        .build()
        .expect("host builds");
    let location = host.location("/maker");
    let chaos = load(&location, CHAOS).await;
    let s = settle(&location.snapshot(), "counter", json!({})).await;
    assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
    // This test's runtime has one thread, blocked here: only another
    // thread can make them.
    let plugin = chaos.plugin();
    let made = wait_until(PATIENCE, || plugin.warm_instances() == 2);
    assert!(
        made,
        "two instances made while the call's runtime is blocked"
    );
    let maker = thread_named("toolhost-warm").expect("the thread that makes them");
    assert_eq!(nice_of(&maker), 19);
}

#[tokio::test]
async fn r22_cancellation_stops_an_infinite_loop_promptly() {
    let (host, _out) = host();
    let (snapshot, _a) = chaos_snapshot(&host, "r22").await;
    let token = CancellationToken::new();
    let (call, events) = busy("spin", BudgetOverrides::default());
    let running = tokio::spawn({
        let snapshot = snapshot.clone();
        let call = call.with_cancel(token.clone());
        async move { snapshot.settle(call).await }
    });
    // Cancelled once the guest says it is in its loop.
    events.started("spin").await;
    let cancelled_at = Instant::now();
    token.cancel();
    let s = running.await.unwrap();
    let latency = cancelled_at.elapsed();
    assert_eq!(
        s.outcome,
        Outcome::Interrupted {
            reason: Interruption::Cancelled
        }
    );
    assert!(s.usage.fuel_used > 0, "the guest really ran");
    // Generous bound for a loaded CI machine; the benchmark measures it.
    assert!(latency < Duration::from_secs(1), "{latency:?}");
    healthy(&snapshot).await;

    healthy(&snapshot).await;
}

#[tokio::test]
async fn r22_dropping_a_settle_stops_its_guest_and_frees_its_slot() {
    // One slot: a guest that kept spinning after its settle was dropped
    // would hold it, and the next call of the plugin could never run.
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs).concurrency(1).build().unwrap();
    let location = host.location("/r22-drop");
    let _a = load(&location, CHAOS).await;
    let snapshot = location.snapshot();
    let (call, events) = busy("dropped", BudgetOverrides::default());
    let settling = snapshot.settle(call);
    tokio::select! {
        s = settling => panic!("a guest looping forever ended: {:?}", s.outcome),
        () = events.started("dropped") => {}
    }
    // The settle future is dropped now, its guest in the middle of its loop.
    let next = within(
        "the next call of the one-slot plugin",
        settle(&snapshot, "counter", json!({})),
    )
    .await;
    assert_eq!(next.outcome.status(), "completed", "{:?}", next.outcome);
}

#[tokio::test]
async fn r23_budgets_trip_and_every_outcome_reports_usage() {
    let (host, _out) = host();
    let (snapshot, _a) = chaos_snapshot(&host, "r23").await;

    let s = call_with(
        &snapshot,
        "spin_forever",
        json!({}),
        BudgetOverrides {
            fuel: Some(5_000_000),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        s.outcome,
        Outcome::Interrupted {
            reason: Interruption::Fuel
        }
    );
    assert_eq!(s.usage.tripped, Some(Limit::Fuel));
    assert!(s.usage.fuel_used >= 5_000_000, "{}", s.usage.fuel_used);
    healthy(&snapshot).await;

    let s = call_with(&snapshot, "spin_forever", json!({}), deadline(200)).await;
    assert_eq!(s.usage.tripped, Some(Limit::Deadline));
    assert!(s.usage.wall_time >= Duration::from_millis(200));
    assert!(
        s.usage.wall_time < Duration::from_secs(2),
        "{:?}",
        s.usage.wall_time
    );
    healthy(&snapshot).await;

    let s = call_with(
        &snapshot,
        "allocate",
        json!({"mib": 64}),
        BudgetOverrides {
            memory: Some(16 << 20),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(defect(&s).kind, DefectKind::MemoryLimit(16 << 20));
    assert_eq!(s.usage.tripped, Some(Limit::Memory));
    assert!(s.usage.peak_memory <= 16 << 20);
    assert!(
        s.outcome_message().contains("memory limit of 16 MiB"),
        "{}",
        s.outcome_message()
    );
    healthy(&snapshot).await;

    let s = call_with(
        &snapshot,
        "allocate",
        json!({"mib": 8}),
        BudgetOverrides {
            memory: Some(64 << 20),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
    assert!(s.usage.peak_memory >= 8 << 20, "{}", s.usage.peak_memory);
    assert!(s.usage.fuel_used > 0);
    assert!(s.usage.wall_time > Duration::ZERO);
    assert_eq!(s.usage.tripped, None);
}

#[tokio::test]
async fn r23_concurrency_limit_queues_calls_and_r31_the_wait_counts_against_the_deadline() {
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs).concurrency(1).build().unwrap();
    let location = host.location("/r23-queue");
    let _a = load(&location, CHAOS).await;
    let snapshot = location.snapshot();
    // With one slot, a running call holds it; a second call waits in line,
    // and its deadline runs while it waits: it ends at its deadline without
    // ever running, not one deadline after it got the slot. The first call
    // has no deadline of its own: it holds the slot until it is cancelled,
    // after the second has ended, so the order does not depend on
    // scheduling on a loaded machine.
    let stop_first = CancellationToken::new();
    let (first, running) = busy("first", BudgetOverrides::default());
    let queued = async {
        // Queued behind the first call once it runs (it says so).
        running.started("first").await;
        let b = call_with(&snapshot, "spin_forever", json!({}), deadline(300)).await;
        stop_first.cancel();
        b
    };
    let (a, b) = within("the queued call to end at its deadline", async {
        tokio::join!(
            snapshot.settle(first.with_cancel(stop_first.clone())),
            queued
        )
    })
    .await;
    assert_eq!(
        a.outcome,
        Outcome::Interrupted {
            reason: Interruption::Cancelled
        },
        "the first call held the slot until it was cancelled"
    );
    assert_eq!(
        b.outcome,
        Outcome::Interrupted {
            reason: Interruption::Deadline
        }
    );
    assert!(a.usage.fuel_used > 0, "the first call ran");
    // Had its deadline started only with a slot, it would not have ended
    // while the first call held it (nor before running and burning fuel).
    assert_eq!(b.usage.fuel_used, 0, "the second call never got a slot");
    assert_eq!(b.usage.tripped, Some(Limit::Deadline));
}

#[tokio::test]
async fn plugin_budget_applies_to_its_calls() {
    let outputs = tempfile::tempdir().unwrap();
    let host = builder(&outputs)
        .budget(Budget {
            timeout: Duration::from_millis(150),
            ..Budget::default()
        })
        .build()
        .unwrap();
    let location = host.location("/budget");
    let options = PluginOptions {
        overrides: BudgetOverrides {
            fuel: Some(2_000_000),
            ..Default::default()
        },
        ..Default::default()
    };
    let _a = location.load(CHAOS, &options).await.unwrap();
    let s = settle(&location.snapshot(), "spin_forever", json!({})).await;
    assert_eq!(
        s.usage.tripped,
        Some(Limit::Fuel),
        "the plugin's fuel limit is lower than the host deadline"
    );
}

/// Instances made ahead never cost a call its slot: they are made only
/// while the host's instance pool is less than half full, and a call that
/// finds it fuller drops every plugin's before it makes its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r21_instances_made_ahead_give_their_slots_to_calls() {
    let outputs = tempfile::tempdir().unwrap();
    // Six slots: two activations, then one instance made ahead for /a (the
    // pool is half full); four spinning calls of /b need all the rest.
    let host = builder(&outputs)
        .max_instances(6)
        .warm_instances(2, Duration::from_secs(30))
        .build()
        .unwrap();
    let (a, b) = (host.location("/a"), host.location("/b"));
    let made_ahead = load(&a, CHAOS).await;
    let _b = load(&b, CHAOS).await;
    let s = settle(&a.snapshot(), "counter", json!({})).await;
    assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
    let plugin = made_ahead.plugin().clone();
    eventually("one instance made ahead, in the pool's free half", || {
        plugin.warm_instances() == 1
    })
    .await;
    let outcomes = within(
        "four spinning calls in the last four slots",
        spinning_calls(&b.snapshot(), "spin", 4),
    )
    .await;
    all_ran_until_cancelled(outcomes, "");
    assert_eq!(plugin.warm_instances(), 0, "/a's gave its slot back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_call_waits_for_the_slot_an_ended_call_is_still_freeing() {
    let outputs = tempfile::tempdir().unwrap();
    // Six slots: the activation holds one, the store of a call that just
    // ended another until it is dropped (off the call path: the pool was
    // less than half full), and five spinning calls want the rest and it.
    let host = builder(&outputs)
        .max_instances(6)
        .warm_instances(0, Duration::from_secs(30))
        .build()
        .unwrap();
    let location = host.location("/pool");
    let _a = load(&location, CHAOS).await;
    let snapshot = location.snapshot();
    // Calls spinning in another host keep the cores busy, so the thread
    // that drops ended stores (at the lowest priority) falls behind.
    let (other, _out) = toolhost_tests::host();
    let (spinners, _b) = chaos_snapshot(&other, "spinners").await;
    let stop_spinners = CancellationToken::new();
    let (spins, recorders): (Vec<_>, Vec<_>) = (0..2)
        .map(|n| busy(&format!("spin{n}"), BudgetOverrides::default()))
        .unzip();
    let spinning: Vec<_> = spins
        .into_iter()
        .map(|call| {
            let (spinners, call) = (spinners.clone(), call.with_cancel(stop_spinners.clone()));
            tokio::spawn(async move { spinners.settle(call).await })
        })
        .collect();
    for (n, recorder) in recorders.iter().enumerate() {
        recorder.started(&format!("spin{n}")).await;
    }
    for round in 0..20 {
        let s = settle(&snapshot, "counter", json!({})).await;
        assert_eq!(s.outcome.status(), "completed", "{:?}", s.outcome);
        let prefix = format!("r{round}c");
        let calls = spinning_calls(&snapshot, &prefix, 5);
        let outcomes = within("five spinning calls", calls).await;
        all_ran_until_cancelled(outcomes, &format!("round {round}: "));
    }
    stop_spinners.cancel();
    for spinner in spinning {
        within("a spinning call to stop", spinner).await.unwrap();
    }
}

/// `count` spinning calls named `{prefix}{n}`, cancelled once all run or as
/// soon as one ends (so a refused call fails the test instead of hanging
/// it): their outcomes.
async fn spinning_calls(snapshot: &Snapshot, prefix: &str, count: usize) -> Vec<Outcome> {
    let stop = CancellationToken::new();
    let (calls, recorders): (Vec<_>, Vec<_>) = (0..count)
        .map(|n| busy(&format!("{prefix}{n}"), BudgetOverrides::default()))
        .unzip();
    let settled = futures::future::join_all(calls.into_iter().map(|call| async {
        let s = snapshot.settle(call.with_cancel(stop.clone())).await;
        stop.cancel();
        s.outcome
    }));
    let all_running = async {
        for (n, recorder) in recorders.iter().enumerate() {
            recorder.started(&format!("{prefix}{n}")).await;
        }
    };
    let stop_when_all_run = async {
        tokio::select! {
            () = all_running => stop.cancel(),
            () = stop.cancelled() => {}
        }
    };
    tokio::join!(settled, stop_when_all_run).0
}

/// Every call got a slot and ran until cancelled.
fn all_ran_until_cancelled(outcomes: Vec<Outcome>, context: &str) {
    for outcome in outcomes {
        assert_eq!(
            outcome,
            Outcome::Interrupted {
                reason: Interruption::Cancelled
            },
            "{context}every call got a slot and ran until cancelled"
        );
    }
}

#[tokio::test]
async fn a_full_instance_pool_is_a_host_fault_naming_the_setting() {
    let outputs = tempfile::tempdir().unwrap();
    // Two slots: the activation holds one, a spinning call the other.
    let host = builder(&outputs).max_instances(2).build().unwrap();
    let location = host.location("/pool");
    let _a = load(&location, CHAOS).await;
    let snapshot = location.snapshot();
    // The spinning call holds its slot until it is cancelled, after the
    // second call has been refused.
    let stop = CancellationToken::new();
    let (spin, spinning) = busy("spin", BudgetOverrides::default());
    let blocked = async {
        // Once the spinning call runs (it says so), it holds its slot.
        spinning.started("spin").await;
        let s = call_with(&snapshot, "spin_forever", json!({}), deadline(2_000)).await;
        stop.cancel();
        s
    };
    let (spun, s) = within("the second call to be refused", async {
        tokio::join!(snapshot.settle(spin.with_cancel(stop.clone())), blocked)
    })
    .await;
    assert_eq!(
        spun.outcome,
        Outcome::Interrupted {
            reason: Interruption::Cancelled
        },
        "the spinning call ran until it was cancelled"
    );
    match &s.outcome {
        Outcome::Defect {
            message,
            culprit: Culprit::Host(fault),
        } => {
            assert_eq!(fault.kind, FaultKind::Pool);
            assert_eq!(
                message,
                "all 2 instance slots are busy; raise `HostBuilder::max_instances` (`--max-instances`) or lower concurrency"
            );
        }
        other => panic!("expected a pool fault, not a guest defect: {other:?}"),
    }
}
