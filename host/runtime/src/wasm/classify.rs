//! How a guest stopped: classified by trap code, the memory limiter and the
//! pool's error type, never by message text (R20).

use wasmtime::{PoolConcurrencyLimitError, Store, Trap};

use crate::model::outcome::{DefectKind, FaultKind, HostFault};
use crate::wasm::bindings::ImportMisuse;
use crate::wasm::store::{MAX_HOST_COPY_BYTES, StoreState};

/// How a failed guest call ends.
#[derive(Debug)]
pub(crate) enum Stop {
    /// Out of fuel: an interruption.
    Fuel,
    /// The guest misbehaved.
    Defect(DefectKind),
    /// The host could not run it.
    HostFault(HostFault),
}

/// Classifies an error from instantiating or calling a guest. Host limits
/// (the instance pool) are the host's, never blamed on the guest.
pub(crate) fn classify(e: &wasmtime::Error, store: &Store<StoreState>, max_instances: u32) -> Stop {
    if e.downcast_ref::<PoolConcurrencyLimitError>().is_some() {
        return Stop::HostFault(HostFault::new(
            FaultKind::Pool,
            format!(
                "all {max_instances} instance slots are busy; raise `HostBuilder::max_instances` (`--max-instances`) or lower concurrency"
            ),
        ));
    }
    let state = store.data();
    let trap = e.downcast_ref::<Trap>().copied();
    if trap == Some(Trap::OutOfFuel) {
        return Stop::Fuel;
    }
    if state.limiter.tripped {
        return Stop::Defect(DefectKind::MemoryLimit(state.limiter.limit));
    }
    if trap == Some(Trap::StackOverflow) {
        return Stop::Defect(DefectKind::StackOverflow);
    }
    // Read stderr without taking it: the call's logs keep it (a panic's
    // message is exactly what `--verbose` must show).
    if let Some(message) = panic_message(&state.stderr.text()) {
        return Stop::Defect(DefectKind::Panic(message));
    }
    if let Some(misuse) = e.downcast_ref::<ImportMisuse>() {
        return Stop::Defect(DefectKind::Contract(misuse.0.clone()));
    }
    Stop::Defect(DefectKind::Trap(match trap {
        // A Rust guest's shadow stack lives in linear memory: overflowing it
        // shows up as an access out of bounds.
        Some(Trap::MemoryOutOfBounds) => {
            "out of bounds memory access — often a stack overflow in the guest".into()
        }
        Some(t) => t.to_string(),
        // Not a trap: copying values between guest and host failed, most
        // often because they exceed the host-copy limit.
        None => format!(
            "{e:#} (a call may move at most {MAX_HOST_COPY_BYTES} bytes between guest and host: the host-copy limit)"
        ),
    }))
}

/// Extracts the message of a Rust panic from captured stderr: the lines
/// between `panicked at ...:` and the `note:` line.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.find("panicked at ")?;
    let after = &stderr[start..];
    let body = after.split_once('\n').map_or("", |(_, b)| b);
    let message: Vec<&str> = body
        .lines()
        .take_while(|l| !l.starts_with("note: "))
        .collect();
    let message = message.join("\n").trim().to_owned();
    Some(if message.is_empty() {
        "panic without a message".into()
    } else {
        message
    })
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_is_extracted_from_rust_stderr() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:3:5:\nchaos: deliberate panic\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("chaos: deliberate panic")
        );
        assert_eq!(panic_message("just logs"), None);
    }
}
