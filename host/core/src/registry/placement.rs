//! Placements and registrations (R1-R4).
//!
//! A [`Placement`] holds the registrations of one level: the process-wide
//! application placement, one location, or one session of a location. Within
//! a placement the latest active registration of a name wins (R3).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::model::tool::{NameError, Tool, normalize_name};

/// Process-wide sequence: later registrations get larger numbers, across all
/// placements, so "latest" is well defined.
static NEXT_REGISTRATION: AtomicU64 = AtomicU64::new(1);

/// Why a `register` call changed nothing.
///
/// Not `#[non_exhaustive]`: each refusal is one the WIT world's
/// `registration-error` names, so a new one is a change of the contract.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RegistrationError {
    /// A name cannot be normalized into a valid effective name (R1).
    #[error("tool `{tool}`: {source}")]
    InvalidName {
        /// The name as authored.
        tool: String,
        /// What is wrong with it.
        source: NameError,
    },
    /// A schema is not valid JSON Schema (R2).
    #[error("tool `{tool}`: {message}")]
    InvalidSchema {
        /// The name as authored.
        tool: String,
        /// What is wrong, naming the schema.
        message: String,
    },
    /// Two tools in one call normalize to the same name (R2).
    #[error(
        "tool `{tool}`: its name normalizes to `{name}`, which another tool in the same registration already uses; rename one of them"
    )]
    DuplicateName {
        /// The second authored name.
        tool: String,
        /// The shared effective name.
        name: String,
    },
    /// The scope was closed (R7), or its session ended (R35).
    #[error(
        "the registration scope is closed (its plugin was unloaded or its session ended); nothing more can be registered in it"
    )]
    ScopeClosed,
}

/// Which level a registration lives at. Higher levels shadow lower ones:
/// session over location over application (R5, R35).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Level {
    /// Process-wide, shared by every location.
    Application,
    /// One location (workspace).
    Location,
    /// One session of a location, closed when the session ends (R35).
    Session,
}

/// One level's registrations.
pub struct Placement {
    pub(super) level: Level,
    entries: Mutex<Vec<Entry>>,
}

struct Entry {
    registration: u64,
    name: String,
    tool: Tool,
}

impl Placement {
    /// An empty placement at `level`.
    pub fn new(level: Level) -> Arc<Placement> {
        Arc::new(Placement {
            level,
            entries: Mutex::new(Vec::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        // Entries are only pushed or retained under the lock; a panic while
        // holding it cannot leave them half-updated, so poison is harmless.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The effective tool of `name` in this placement: the latest active one.
    pub(super) fn effective(&self, name: &str) -> Option<(u64, Tool)> {
        self.lock()
            .iter()
            .rev()
            .find(|e| e.name == name)
            .map(|e| (e.registration, e.tool.clone()))
    }

    /// Registers `tools` atomically (R2): every name is checked before any is
    /// inserted.
    pub fn register(
        self: &Arc<Self>,
        tools: Vec<(String, Tool)>,
    ) -> Result<Registration, RegistrationError> {
        let mut named: Vec<(String, Tool)> = Vec::with_capacity(tools.len());
        for (authored, tool) in tools {
            let name =
                normalize_name(&authored).map_err(|source| RegistrationError::InvalidName {
                    tool: authored.clone(),
                    source,
                })?;
            if named.iter().any(|(n, _)| *n == name) {
                return Err(RegistrationError::DuplicateName {
                    tool: authored,
                    name,
                });
            }
            named.push((name, tool));
        }
        let id = NEXT_REGISTRATION.fetch_add(1, Ordering::Relaxed);
        let names: Vec<String> = named.iter().map(|(n, _)| n.clone()).collect();
        {
            let mut entries = self.lock();
            entries.extend(named.into_iter().map(|(name, tool)| Entry {
                registration: id,
                name,
                tool,
            }));
        }
        Ok(Registration {
            inner: Arc::new(RegistrationInner {
                id,
                names,
                placement: Arc::downgrade(self),
                closed: AtomicBool::new(false),
            }),
        })
    }

    fn remove(&self, registration: u64) {
        self.lock().retain(|e| e.registration != registration);
    }

    pub(super) fn listing(&self) -> Vec<(u64, String, Tool)> {
        self.lock()
            .iter()
            .map(|e| (e.registration, e.name.clone(), e.tool.clone()))
            .collect()
    }
}

impl fmt::Debug for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Placement")
            .field("level", &self.level)
            .field("entries", &self.lock().len())
            .finish()
    }
}

/// A set of tools registered by one `register` call. The tools stay
/// registered until [`Registration::close`] or until the handle is dropped;
/// closing removes exactly this registration and reveals the next-latest
/// active registration of each name (R4).
#[must_use = "dropping a Registration closes it"]
pub struct Registration {
    pub(super) inner: Arc<RegistrationInner>,
}

pub(super) struct RegistrationInner {
    id: u64,
    names: Vec<String>,
    placement: Weak<Placement>,
    closed: AtomicBool,
}

impl RegistrationInner {
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(super) fn close(&self) {
        // Closing twice is harmless (R4).
        if !self.closed.swap(true, Ordering::AcqRel)
            && let Some(placement) = self.placement.upgrade()
        {
            placement.remove(self.id);
        }
    }
}

impl Registration {
    /// The registration's id, unique in this process and increasing.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The effective names it holds, in the order given.
    pub fn names(&self) -> &[String] {
        &self.inner.names
    }

    /// Removes exactly this registration. Idempotent.
    pub fn close(&self) {
        self.inner.close();
    }

    /// Whether it has been closed.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.inner.close();
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("id", &self.inner.id)
            .field("names", &self.inner.names)
            .field("closed", &self.is_closed())
            .finish()
    }
}
