//! R28: host memory per call is O(input + limits), measured, for inputs
//! with millions of schema violations.
//!
//! A test binary of its own: it counts every allocation of the process
//! (`#[global_allocator]`), which the integration binary's tests, running
//! side by side, would blur. The tests here take turns.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolhost::limits::{MAX_COUNTED_VIOLATIONS, MAX_LISTED_VIOLATIONS};
use toolhost::schema::Schema;
use toolhost::{Call, Outcome, Tool, ToolResponse};
use toolhost_tests::{context, host};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call goes to `System` with the caller's arguments; the
// counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promised for `layout`.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promised for `layout`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: `p` came from this allocator with `layout`.
        unsafe { System.dealloc(p, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        // SAFETY: `p` came from this allocator with `layout`.
        let q = unsafe { System.realloc(p, layout, size) };
        if !q.is_null() {
            grew(size);
            shrank(layout.size());
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One measurement at a time: the counters are the process's.
static TURN: Mutex<()> = Mutex::new(());

/// What `f` returns, and the most bytes it held live at once beyond what
/// was live before it.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let value = f();
    (value, PEAK.load(Ordering::Relaxed).saturating_sub(before))
}

/// Far more violations than are listed or counted.
const VIOLATIONS: usize = 2_000_000;

/// A generous size for one violation the validator builds (it takes about
/// 350 bytes), so the bound is the limits' and not the input's.
const BYTES_PER_BUILT_VIOLATION: usize = 1 << 10;

/// What the validator may hold: the violations it builds before it stops,
/// listed, counted and one more to know there are more.
const VALIDATION_BOUND: usize =
    (MAX_LISTED_VIOLATIONS + MAX_COUNTED_VIOLATIONS + 1) * BYTES_PER_BUILT_VIOLATION;

/// The parsed arguments next to their text: a `serde_json::Value` takes up
/// to 16 bytes per byte of `"x",` (32 bytes a value, 2x while its array
/// grows), and the call keeps the text.
const BYTES_PER_INPUT_BYTE: usize = 24;

fn numbers_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"numbers": {"type": "array", "items": {"type": "integer"}}}
    })
}

/// `{"numbers": ["x", …]}`: one violation per element.
fn invalid_arguments() -> String {
    format!(r#"{{"numbers":[{}"x"]}}"#, r#""x","#.repeat(VIOLATIONS - 1))
}

#[test]
fn r28_validating_millions_of_violations_holds_only_what_the_limits_allow() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let schema = Schema::compile(numbers_schema()).unwrap();
    let arguments: Value = serde_json::from_str(&invalid_arguments()).unwrap();
    let (violations, peak) = peak_during(|| schema.violations(&arguments));
    assert_eq!(violations.listed().len(), MAX_LISTED_VIOLATIONS);
    assert_eq!(violations.listed()[19].path, "/numbers/19");
    assert_eq!(violations.unlisted(), MAX_COUNTED_VIOLATIONS);
    assert!(violations.stopped());
    assert!(
        peak <= VALIDATION_BOUND,
        "validation held {peak} bytes for {VIOLATIONS} violations; the limits allow {VALIDATION_BOUND}"
    );
}

#[test]
fn r28_settling_arguments_with_millions_of_violations_takes_memory_in_proportion() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let (host, _outputs) = host();
    let location = host.location("/r28-memory");
    let tool = Tool::native("counts numbers", numbers_schema(), None, |_, _| async {
        Ok(ToolResponse::default())
    })
    .unwrap();
    let _registered = location.register([("count", tool)]).unwrap();
    let snapshot = location.snapshot();
    let arguments = invalid_arguments();
    let input = arguments.len();
    let call = Call::new("count", arguments, context("r28-memory"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (settlement, peak) = peak_during(|| runtime.block_on(snapshot.settle(call)));
    match &settlement.outcome {
        Outcome::Error { message, .. } => {
            assert!(message.contains("- and at least 10000 more"), "{message}");
            assert!(message.len() < 16 << 10, "{} bytes", message.len());
        }
        other => panic!("expected an input error, got {other:?}"),
    }
    let bound = BYTES_PER_INPUT_BYTE * input + VALIDATION_BOUND;
    assert!(
        peak <= bound,
        "settling held {peak} bytes for {input} bytes of arguments; O(input + limits) allows {bound}"
    );
}
