//! HTTP sessions bound to the credential that made them (R37): a session id
//! is honoured only with the same credential, at most a bounded number of
//! sessions live at once, and the oldest idle one makes room for a new one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// HTTP sessions (2025-era `Mcp-Session-Id`) that live at once; a new one
/// beyond it closes the session idle the longest, or is refused when every
/// session is busy. Each holds its client's details and a few channels.
pub const MAX_SESSIONS: usize = 1024;

/// A session with no request for this long is closed and its memory freed.
pub const SESSION_IDLE_EXPIRY: Duration = Duration::from_secs(300);

/// What a request presented to be let in: the caller, as far as the front
/// door can tell. Two requests are the same caller exactly when their
/// credentials are equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Credential {
    /// No credential: loopback without a token, or stdio.
    Anonymous,
    /// A bearer token, known by the first 16 hex digits of its BLAKE3
    /// digest (the token itself is not kept).
    Token(Arc<str>),
    /// An OAuth caller, by its `ISSUER#SUBJECT` name.
    Caller(Arc<str>),
}

impl Credential {
    /// No credential: loopback without a token, or stdio.
    pub(crate) fn anonymous() -> Credential {
        Credential::Anonymous
    }

    /// A bearer token, known by a digest (the token itself is not kept).
    pub(crate) fn token(token: &str) -> Credential {
        let digest = blake3::hash(token.as_bytes()).to_hex();
        Credential::Token(digest[..16].into())
    }

    /// An OAuth caller, by its `ISSUER#SUBJECT` name.
    pub(crate) fn caller(name: &str) -> Credential {
        Credential::Caller(name.into())
    }

    /// A stable name for scoping what the caller owns (`anonymous`,
    /// `token:DIGEST`, `caller:NAME`, as stores already key it); never the
    /// secret.
    pub(crate) fn name(&self) -> String {
        match self {
            Credential::Anonymous => "anonymous".to_owned(),
            Credential::Token(digest) => format!("token:{digest}"),
            Credential::Caller(name) => format!("caller:{name}"),
        }
    }

    /// The store's key of session `id` that a stateless client with this
    /// credential declares. A JSON array, so that no other credential and
    /// id make the same key (`svc` in `admin:s1` is not `svc:admin` in
    /// `s1`), and never a server-minted session id (those are no arrays).
    pub(crate) fn declared_session(&self, id: &str) -> String {
        serde_json::json!(["client", self.name(), id]).to_string()
    }

    /// The scope of the retained outputs of this credential's stateless
    /// requests that declare no session: this credential's alone.
    pub(crate) fn stateless_outputs(&self) -> String {
        serde_json::json!(["stateless", self.name()]).to_string()
    }
}

/// The live HTTP sessions and who made each.
pub(crate) struct Bindings {
    entries: Mutex<HashMap<Arc<str>, Entry>>,
    max: AtomicUsize,
    /// How long a session lives without a request: the SDK ends it then,
    /// and its entry goes too (whether or not its handler ever learnt its
    /// id, which one that never sent `initialized` does not).
    idle: Mutex<Duration>,
}

struct Entry {
    credential: Credential,
    /// Whether its SSE streams are resumable (2025-11-25 and later).
    resumable: bool,
    last_seen: Instant,
    /// Requests of the session in progress.
    busy: usize,
}

/// A request of a session in progress: the session is not idle meanwhile.
pub(crate) struct InUse {
    bindings: Arc<Bindings>,
    id: Arc<str>,
    /// Whether the session's SSE streams are resumable.
    pub(crate) resumable: bool,
}

/// Every session is busy: no room for another.
#[derive(Debug)]
pub(crate) struct Full;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a plain map operation or a short scan.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Default for Bindings {
    fn default() -> Bindings {
        Bindings {
            entries: Mutex::default(),
            max: AtomicUsize::new(MAX_SESSIONS),
            idle: Mutex::new(SESSION_IDLE_EXPIRY),
        }
    }
}

impl Bindings {
    /// At most `max` sessions at once (at least one).
    pub(crate) fn set_max(&self, max: usize) {
        self.max.store(max.max(1), Ordering::Relaxed);
    }

    /// Sessions end after `idle` without a request.
    pub(crate) fn set_idle(&self, idle: Duration) {
        *lock(&self.idle) = idle;
    }

    /// Sessions alive.
    pub(crate) fn len(&self) -> usize {
        let mut entries = lock(&self.entries);
        self.prune(&mut entries);
        entries.len()
    }

    /// Drops the entries of sessions idle past their expiry: the SDK has
    /// ended them.
    fn prune(&self, entries: &mut HashMap<Arc<str>, Entry>) {
        let idle = *lock(&self.idle);
        entries.retain(|_, e| e.busy > 0 || e.last_seen.elapsed() <= idle);
    }

    /// Marks a request of session `id` in progress, if `credential` made it.
    pub(crate) fn enter(self: &Arc<Self>, id: &str, credential: &Credential) -> Option<InUse> {
        let mut entries = lock(&self.entries);
        let entry = entries.get_mut(id)?;
        if entry.credential != *credential {
            return None;
        }
        entry.busy += 1;
        entry.last_seen = Instant::now();
        Some(InUse {
            bindings: self.clone(),
            id: id.into(),
            resumable: entry.resumable,
        })
    }

    /// Makes room for one more session: the id of a session to close (the
    /// one idle the longest) when the limit is reached, `Full` when every
    /// session is busy.
    pub(crate) fn make_room(&self) -> Result<Option<Arc<str>>, Full> {
        let mut entries = lock(&self.entries);
        if entries.len() >= self.max.load(Ordering::Relaxed) {
            self.prune(&mut entries);
        }
        if entries.len() < self.max.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let oldest = entries
            .iter()
            .filter(|(_, e)| e.busy == 0)
            .min_by_key(|(_, e)| e.last_seen)
            .map(|(id, _)| id.clone())
            .ok_or(Full)?;
        entries.remove(&oldest);
        Ok(Some(oldest))
    }

    /// Records that `credential` made session `id`, with resumable streams
    /// or not.
    pub(crate) fn bind(&self, id: &str, credential: Credential, resumable: bool) {
        lock(&self.entries).insert(
            id.into(),
            Entry {
                credential,
                resumable,
                last_seen: Instant::now(),
                busy: 0,
            },
        );
    }

    /// Forgets session `id` (closed, expired or evicted).
    pub(crate) fn forget(&self, id: &str) {
        lock(&self.entries).remove(id);
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut entries = lock(&self.bindings.entries);
        if let Some(entry) = entries.get_mut(&self.id) {
            entry.busy -= 1;
            entry.last_seen = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_honoured_only_with_the_credential_that_made_it() {
        let bindings = Arc::new(Bindings::default());
        bindings.bind("s1", Credential::token("alice"), false);
        assert!(bindings.enter("s1", &Credential::token("alice")).is_some());
        assert!(
            bindings
                .enter("s1", &Credential::token("mallory"))
                .is_none()
        );
        assert!(bindings.enter("s1", &Credential::anonymous()).is_none());
        assert!(bindings.enter("s2", &Credential::token("alice")).is_none());
    }

    #[test]
    fn r37_declared_session_keys_never_collide_across_credentials() {
        let svc = Credential::caller("https://iss.example#svc");
        let admin = Credential::caller("https://iss.example#svc:admin");
        assert_ne!(
            svc.declared_session("admin:s1"),
            admin.declared_session("s1")
        );
        assert_ne!(svc.stateless_outputs(), admin.stateless_outputs());
        assert_ne!(
            svc.declared_session("x"),
            Credential::anonymous().declared_session("x")
        );
        assert_eq!(svc.declared_session("s"), svc.declared_session("s"));
    }

    #[test]
    fn the_oldest_idle_session_makes_room_and_busy_ones_stay() {
        let bindings = Arc::new(Bindings::default());
        bindings.set_max(2);
        let me = Credential::anonymous();
        bindings.bind("old", me.clone(), false);
        bindings.bind("new", me.clone(), true);
        let busy = bindings.enter("old", &me).expect("bound");
        assert_eq!(
            bindings.make_room().expect("one idle").as_deref(),
            Some("new")
        );
        bindings.bind("newer", me.clone(), false);
        let _also_busy = bindings.enter("newer", &me).expect("bound");
        assert!(bindings.make_room().is_err(), "both sessions are busy");
        drop(busy);
        assert_eq!(
            bindings.make_room().expect("old is idle").as_deref(),
            Some("old")
        );
        assert_eq!(bindings.len(), 1);
    }

    #[test]
    fn a_token_credential_does_not_keep_the_token() {
        let credential = Credential::token("s3cret-token");
        assert!(!credential.name().contains("s3cret"));
        assert!(!credential.declared_session("s1").contains("s3cret"));
        assert_eq!(credential, Credential::token("s3cret-token"));
    }
}
