//! Slots shared fairly between sessions: a counting semaphore whose waiters
//! queue per key (a session id) and are served round-robin by key, so one
//! session with many queued calls delays another session by at most one
//! call per slot, not by its whole queue (R37).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// Slots for at most `capacity` holders at once. Cheap to clone.
#[derive(Clone)]
pub struct FairSlots {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FairSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("FairSlots")
            .field("free", &state.free)
            .field("waiting_keys", &state.turns.len())
            .finish()
    }
}

#[derive(Default)]
struct State {
    free: usize,
    /// Keys with waiters, in the order they get their next turn.
    turns: VecDeque<Arc<str>>,
    /// Each key's waiters, oldest first.
    waiters: HashMap<Arc<str>, VecDeque<oneshot::Sender<SlotPermit>>>,
    /// Slots in use per key (absent: none).
    held: HashMap<Arc<str>, usize>,
}

/// One slot, given back when dropped.
pub struct SlotPermit {
    slots: Option<FairSlots>,
    key: Arc<str>,
}

impl std::fmt::Debug for SlotPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotPermit")
            .field("key", &self.key)
            .finish()
    }
}

impl State {
    fn unhold(&mut self, key: &Arc<str>) {
        if let Some(held) = self.held.get_mut(key) {
            *held -= 1;
            if *held == 0 {
                self.held.remove(key);
            }
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // Every critical section is a few map and queue operations.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl FairSlots {
    /// `capacity` slots (at least one).
    pub fn new(capacity: usize) -> FairSlots {
        FairSlots {
            state: Arc::new(Mutex::new(State {
                free: capacity.max(1),
                ..State::default()
            })),
        }
    }

    /// A slot for `key` now, if one is free and nobody waits.
    pub fn try_acquire(&self, key: &str) -> Option<SlotPermit> {
        let mut state = lock(&self.state);
        if state.free == 0 || !state.turns.is_empty() {
            return None;
        }
        let key: Arc<str> = key.into();
        state.free -= 1;
        *state.held.entry(key.clone()).or_default() += 1;
        Some(self.permit(key))
    }

    /// Waits for a slot for `key`. Dropping the future gives up its place.
    pub fn acquire(&self, key: &str) -> impl Future<Output = SlotPermit> + Send + 'static {
        let ready = self.try_acquire(key);
        let waiting = ready.is_none().then(|| self.enqueue(key.into()));
        async move {
            match (ready, waiting) {
                (Some(permit), _) => permit,
                (None, Some(receiver)) => match receiver.await {
                    Ok(permit) => permit,
                    // The slots are never dropped while a waiter is queued:
                    // the queue lives inside them.
                    Err(_) => unreachable!("fair slots dropped with a waiter queued"),
                },
                (None, None) => unreachable!("either ready or waiting"),
            }
        }
    }

    /// Slots held now, by every key.
    pub fn held(&self) -> usize {
        lock(&self.state).held.values().sum()
    }

    /// Slots `key` holds now.
    #[cfg(test)]
    pub(crate) fn held_by(&self, key: &str) -> usize {
        lock(&self.state).held.get(key).copied().unwrap_or(0)
    }

    fn enqueue(&self, key: Arc<str>) -> oneshot::Receiver<SlotPermit> {
        let (sender, receiver) = oneshot::channel();
        let mut state = lock(&self.state);
        let queue = state.waiters.entry(key.clone()).or_default();
        queue.push_back(sender);
        if queue.len() == 1 {
            state.turns.push_back(key);
        }
        receiver
    }

    fn permit(&self, key: Arc<str>) -> SlotPermit {
        SlotPermit {
            slots: Some(self.clone()),
            key,
        }
    }

    /// Gives a slot freed by `key` to the next key's oldest waiter, or
    /// marks it free.
    fn release(&self, key: &Arc<str>) {
        let mut state = lock(&self.state);
        state.unhold(key);
        loop {
            let Some(next) = state.turns.pop_front() else {
                state.free += 1;
                return;
            };
            let queue = state.waiters.get_mut(&next).expect("a turn has waiters");
            let waiter = queue.pop_front().expect("a turn has waiters");
            if queue.is_empty() {
                state.waiters.remove(&next);
            } else {
                state.turns.push_back(next.clone());
            }
            *state.held.entry(next.clone()).or_default() += 1;
            match waiter.send(self.permit(next.clone())) {
                Ok(()) => return,
                Err(mut unclaimed) => {
                    // That waiter gave up: disarm the permit (releasing it
                    // here would take this lock again) and try the next turn.
                    unclaimed.slots = None;
                    state.unhold(&next);
                }
            }
        }
    }
}

impl Drop for SlotPermit {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.release(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_next_session_not_the_longest_queue() {
        let slots = FairSlots::new(1);
        let first = slots.try_acquire("a").expect("free");
        let mut a_waiting: Vec<_> = (0..3).map(|_| Box::pin(slots.acquire("a"))).collect();
        let b = slots.acquire("b");
        assert_eq!(slots.held_by("a"), 1);
        drop(first);
        // a's first waiter had the first turn.
        let a1 = a_waiting.remove(0).await;
        drop(a1);
        // b's turn comes before a's two other waiters.
        let b1 = b.await;
        assert_eq!(slots.held_by("b"), 1);
        assert_eq!(slots.held_by("a"), 0);
        drop(b1);
        let a2 = a_waiting.remove(0).await;
        assert_eq!(slots.held_by("a"), 1);
        drop(a2);
    }

    #[tokio::test]
    async fn a_waiter_that_gave_up_is_skipped() {
        let slots = FairSlots::new(1);
        let held = slots.try_acquire("a").expect("free");
        let gave_up = slots.acquire("b");
        let waits = slots.acquire("c");
        drop(gave_up);
        drop(held);
        let c = waits.await;
        assert_eq!(slots.held_by("c"), 1);
        assert_eq!(slots.held_by("b"), 0);
        drop(c);
        assert!(slots.try_acquire("d").is_some(), "the slot is free again");
    }

    #[test]
    fn nobody_jumps_the_queue() {
        let slots = FairSlots::new(2);
        let one = slots.try_acquire("a").expect("free");
        let _two = slots.try_acquire("a").expect("free");
        assert!(slots.try_acquire("b").is_none());
        let _queued = slots.acquire("b");
        drop(one);
        assert!(
            slots.try_acquire("c").is_none(),
            "the freed slot went to b's waiter"
        );
        assert_eq!(slots.held_by("b"), 1);
    }
}
