//! Who holds the server's connections (R37: one client cannot starve the
//! others). A connection belongs to its source address until a request on
//! it names a caller (a token's credential); then to that caller. A caller
//! holds at most [`CALLER_CONNECTION_SHARE_PERCENT`] of the cap, so the rest
//! stays for others; at the cap a new connection takes the place of an idle
//! one (no request in progress), of the biggest holder first, the one idle
//! longest: idle sockets and half-sent heads cannot keep others out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::bindings::Credential;

/// The part of the connection cap one caller (a credential) may hold, in
/// percent: the rest stays for other callers and for new clients.
pub const CALLER_CONNECTION_SHARE_PERCENT: usize = 50;

/// Who a connection counts against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Holder {
    /// Its source address, before (or without) a caller.
    Address(IpAddr),
    /// The caller its requests named.
    Caller(Credential),
}

/// Every open connection and who holds it.
pub(crate) struct Connections {
    cap: usize,
    share: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next: u64,
    open: HashMap<u64, Open>,
    held: HashMap<Holder, usize>,
}

struct Open {
    holder: Holder,
    /// Requests in progress on it.
    busy: usize,
    /// When it opened, or last became idle.
    since: Instant,
    shed: CancellationToken,
}

/// One open connection's place; dropping it frees the place.
pub(crate) struct Connection {
    connections: Arc<Connections>,
    id: u64,
    /// Cancelled when the connection must close to make room.
    pub(crate) shed: CancellationToken,
}

/// A request in progress on a connection: it is not idle meanwhile.
pub(crate) struct Busy {
    connection: Arc<Connection>,
}

/// A caller already holds its share of the connections.
#[derive(Debug)]
pub(crate) struct OverShare {
    pub(crate) held: usize,
    pub(crate) share: usize,
}

fn lock(mutex: &Mutex<Table>) -> MutexGuard<'_, Table> {
    // Every critical section is a map update or a scan of open connections.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connections {
    /// A table for at most `cap` connections.
    pub(crate) fn new(cap: usize) -> Arc<Connections> {
        let cap = cap.max(1);
        Arc::new(Connections {
            cap,
            share: (cap * CALLER_CONNECTION_SHARE_PERCENT / 100).max(1),
            table: Mutex::default(),
        })
    }

    /// A place for a new connection from `address`: free, or taken from
    /// an idle connection (which is shed); `None` when every connection
    /// is busy.
    pub(crate) fn open(self: &Arc<Self>, address: IpAddr) -> Option<Connection> {
        let mut table = lock(&self.table);
        if table.open.len() >= self.cap {
            let victim = table.idle_of_biggest()?;
            table.close(victim).shed.cancel();
        }
        let id = table.next;
        table.next += 1;
        let shed = CancellationToken::new();
        let holder = Holder::Address(address);
        *table.held.entry(holder.clone()).or_default() += 1;
        table.open.insert(
            id,
            Open {
                holder,
                busy: 0,
                since: Instant::now(),
                shed: shed.clone(),
            },
        );
        Some(Connection {
            connections: self.clone(),
            id,
            shed,
        })
    }

    /// Connections open now.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.table).open.len()
    }
}

impl Table {
    /// The idle connection to shed: of the holder with the most
    /// connections, the one idle longest.
    fn idle_of_biggest(&self) -> Option<u64> {
        self.open
            .iter()
            .filter(|(_, open)| open.busy == 0)
            .max_by_key(|(_, open)| (self.held[&open.holder], std::cmp::Reverse(open.since)))
            .map(|(id, _)| *id)
    }

    fn close(&mut self, id: u64) -> Open {
        let open = self.open.remove(&id).expect("an open connection");
        self.forget_one(&open.holder);
        open
    }

    fn forget_one(&mut self, holder: &Holder) {
        if let Some(count) = self.held.get_mut(holder) {
            *count -= 1;
            if *count == 0 {
                self.held.remove(holder);
            }
        }
    }
}

impl Connection {
    /// Marks a request in progress until the returned value is dropped.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        let mut table = lock(&self.connections.table);
        if let Some(open) = table.open.get_mut(&self.id) {
            open.busy += 1;
        }
        Busy {
            connection: self.clone(),
        }
    }

    /// Counts this connection against `caller` from now on, unless the
    /// caller already holds its share on other connections. A request that
    /// frees resources (a cancellation) passes `exempt`: it is never
    /// refused for load.
    pub(crate) fn attribute(&self, caller: &Credential, exempt: bool) -> Result<(), OverShare> {
        let share = self.connections.share;
        let holder = Holder::Caller(caller.clone());
        let mut table = lock(&self.connections.table);
        let held = table.held.get(&holder).copied().unwrap_or(0);
        let Some(open) = table.open.get_mut(&self.id) else {
            return Ok(());
        };
        if open.holder == holder {
            return Ok(());
        }
        if held >= share && !exempt {
            return Err(OverShare { held, share });
        }
        let previous = std::mem::replace(&mut open.holder, holder.clone());
        table.forget_one(&previous);
        *table.held.entry(holder).or_default() += 1;
        Ok(())
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut table = lock(&self.connections.table);
        // Gone already if it was shed.
        if table.open.contains_key(&self.id) {
            table.close(self.id);
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut table = lock(&self.connection.connections.table);
        if let Some(open) = table.open.get_mut(&self.connection.id) {
            open.busy -= 1;
            if open.busy == 0 {
                open.since = Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn r37_at_the_cap_an_idle_connection_of_the_biggest_holder_makes_room() {
        let connections = Connections::new(4);
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let mine = Arc::new(connections.open(other).unwrap());
        let _busy = mine.busy();
        let idle: Vec<_> = (0..3).map(|_| connections.open(HERE).unwrap()).collect();
        let newcomer = connections.open(other).expect("room made");
        assert!(idle[0].shed.is_cancelled(), "the oldest idle one is shed");
        assert!(!mine.shed.is_cancelled(), "a busy one never is");
        assert_eq!(connections.len(), 4);
        drop(idle);
        drop(newcomer);
        assert_eq!(connections.len(), 1);
    }

    #[test]
    fn r37_when_every_connection_is_busy_a_new_one_is_refused() {
        let connections = Connections::new(2);
        let held: Vec<_> = (0..2)
            .map(|_| Arc::new(connections.open(HERE).unwrap()))
            .collect();
        let _busy: Vec<_> = held.iter().map(|c| c.busy()).collect();
        assert!(connections.open(HERE).is_none());
    }

    #[test]
    fn r37_a_caller_holds_its_share_and_a_cancellation_passes_beyond_it() {
        let connections = Connections::new(4);
        let alice = Credential::token("alice");
        let open: Vec<_> = (0..3).map(|_| connections.open(HERE).unwrap()).collect();
        open[0].attribute(&alice, false).unwrap();
        open[1].attribute(&alice, false).unwrap();
        let over = open[2].attribute(&alice, false).unwrap_err();
        assert_eq!((over.held, over.share), (2, 2));
        open[2]
            .attribute(&alice, true)
            .expect("a cancellation passes");
        // Another caller still has room, and re-attributing is a no-op.
        let bob = connections.open(HERE).unwrap();
        bob.attribute(&Credential::token("bob"), false).unwrap();
        open[0].attribute(&alice, false).unwrap();
    }
}
