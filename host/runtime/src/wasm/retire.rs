//! Ended calls' stores dropped off the call path. Dropping a store resets
//! its instance's slot (its memory's dirty pages, tables): ~5 µs that a
//! call would otherwise spend after its result is known. The thread that
//! makes instances ahead ([`warm::maker`]) drops them in the time calls
//! leave idle, but only while the instance pool is less than half full
//! and few are waiting (past [`MAX_RETIRING`]): otherwise a call drops its
//! own, so slots a busy host needs come back at once. A call that still
//! finds the pool full while stores are being dropped waits for one
//! ([`Retiring::one_dropped`]) instead of failing: their slots are on
//! their way back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;
use wasmtime::Store;

use crate::wasm::store::StoreState;
use crate::wasm::warm;

/// Stores waiting to be dropped per host, beyond which calls drop their
/// own: each holds an instance slot and its memory until it is.
pub const MAX_RETIRING: usize = 4;

/// One host's stores on their way to being dropped.
#[derive(Default)]
pub(crate) struct Retiring {
    pending: AtomicUsize,
    dropped: Notify,
}

impl Retiring {
    /// Drops `store` off the call path when its pool `has_room` (a fuller
    /// pool needs its slot back at once) and few are waiting, here
    /// otherwise; then runs `then`, which sees its slot free.
    pub(crate) fn retire(
        self: &Arc<Self>,
        store: Store<StoreState>,
        has_room: bool,
        then: impl FnOnce() + Send + 'static,
    ) {
        let maker = warm::maker().filter(|_| has_room);
        let Some(maker) = maker else {
            return drop_then(store, then);
        };
        if self.pending.fetch_add(1, Ordering::AcqRel) >= MAX_RETIRING {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            return drop_then(store, then);
        }
        let this = self.clone();
        maker.spawn(async move {
            drop(store);
            this.pending.fetch_sub(1, Ordering::AcqRel);
            this.dropped.notify_waiters();
            then();
        });
    }

    /// Waits until a store that is being dropped now has been; false at
    /// once if none is.
    pub(crate) async fn one_dropped(&self) -> bool {
        let notified = self.dropped.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the count is read, so a drop in between wakes it.
        notified.as_mut().enable();
        if self.pending.load(Ordering::Acquire) == 0 {
            return false;
        }
        notified.await;
        true
    }
}

fn drop_then(store: Store<StoreState>, then: impl FnOnce()) {
    drop(store);
    then();
}
