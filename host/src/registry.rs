//! Placements, scopes, registrations and request snapshots (R1-R12).
//!
//! A [`Placement`] holds the registrations of one level: the process-wide
//! application placement, or one location. Within a placement the latest
//! active registration of a name wins (R3); a location's registrations shadow
//! the application's (R5). A [`Snapshot`] captures, per model request, the
//! effective tool of every advertised name (R8).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::permission::Rules;
use crate::tool::{NameError, Tool, ToolDefinition, normalize_name};

/// Process-wide sequence: later registrations get larger numbers, across all
/// placements, so "latest" is well defined.
static NEXT_REGISTRATION: AtomicU64 = AtomicU64::new(1);

/// Why a `register` call changed nothing.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
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
    /// The scope was closed (R7).
    #[error(
        "the registration scope is closed (its plugin was unloaded); nothing more can be registered in it"
    )]
    ScopeClosed,
}

/// Which level a registration lives at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Process-wide, shared by every location.
    Application,
    /// One location (workspace).
    Location,
}

/// One level's registrations.
pub(crate) struct Placement {
    level: Level,
    entries: Mutex<Vec<Entry>>,
}

struct Entry {
    registration: u64,
    name: String,
    tool: Tool,
}

impl Placement {
    pub(crate) fn new(level: Level) -> Arc<Placement> {
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
    fn effective(&self, name: &str) -> Option<(u64, Tool)> {
        self.lock()
            .iter()
            .rev()
            .find(|e| e.name == name)
            .map(|e| (e.registration, e.tool.clone()))
    }

    /// Registers `tools` atomically (R2): every name is checked before any is
    /// inserted.
    pub(crate) fn register(
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

    fn listing(&self) -> Vec<(u64, String, Tool)> {
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
    inner: Arc<RegistrationInner>,
}

struct RegistrationInner {
    id: u64,
    names: Vec<String>,
    placement: Weak<Placement>,
    closed: AtomicBool,
}

impl RegistrationInner {
    fn close(&self) {
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
        self.inner.closed.load(Ordering::Acquire)
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

/// A registration scope: everything registered through it is closed when the
/// scope closes (R7). Each plugin activation owns one.
pub struct Scope {
    placement: Arc<Placement>,
    state: Mutex<ScopeState>,
}

#[derive(Default)]
struct ScopeState {
    closed: bool,
    registrations: Vec<Weak<RegistrationInner>>,
}

impl Scope {
    pub(crate) fn new(placement: Arc<Placement>) -> Scope {
        Scope {
            placement,
            state: Mutex::new(ScopeState::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ScopeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `(authored name, tool)` pairs atomically in this scope's
    /// placement. Fails with [`RegistrationError::ScopeClosed`] once closed.
    pub fn register(
        &self,
        tools: impl IntoIterator<Item = (impl Into<String>, Tool)>,
    ) -> Result<Registration, RegistrationError> {
        let mut state = self.lock();
        if state.closed {
            return Err(RegistrationError::ScopeClosed);
        }
        let tools = tools.into_iter().map(|(n, t)| (n.into(), t)).collect();
        let registration = self.placement.register(tools)?;
        state.registrations.retain(|r| r.strong_count() > 0);
        state
            .registrations
            .push(Arc::downgrade(&registration.inner));
        Ok(registration)
    }

    /// Closes every registration made through this scope. Idempotent.
    pub fn close(&self) {
        let registrations = {
            let mut state = self.lock();
            state.closed = true;
            std::mem::take(&mut state.registrations)
        };
        for r in registrations.iter().filter_map(Weak::upgrade) {
            r.close();
        }
    }

    /// Whether the scope has been closed.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        self.close();
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("level", &self.placement.level)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// One active registration of a name, as `toolhost list` shows it.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    /// The effective name.
    pub name: String,
    /// The registered tool.
    pub tool: Tool,
    /// The level it is registered at.
    pub level: Level,
    /// Its registration's id.
    pub registration: u64,
    /// Whether a later registration or a location registration hides it.
    pub shadowed: bool,
}

/// The two placements a location sees: its own over the application's.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub(crate) application: Arc<Placement>,
    pub(crate) location: Arc<Placement>,
}

impl View {
    /// The effective tool for `name`: location first (R5), latest wins (R3).
    pub(crate) fn effective(&self, name: &str) -> Option<Tool> {
        self.location
            .effective(name)
            .or_else(|| self.application.effective(name))
            .map(|(_, t)| t)
    }

    /// Every active registration of every name, sorted by name, with the
    /// winner first for each name.
    pub(crate) fn catalog(&self) -> Vec<CatalogEntry> {
        let mut all: Vec<CatalogEntry> = Vec::new();
        for placement in [&self.location, &self.application] {
            let mut listing = placement.listing();
            listing.reverse();
            all.extend(
                listing
                    .into_iter()
                    .map(|(registration, name, tool)| CatalogEntry {
                        name,
                        tool,
                        level: placement.level,
                        registration,
                        shadowed: false,
                    }),
            );
        }
        // Stable sort keeps location-before-application and latest-first.
        all.sort_by(|a, b| a.name.cmp(&b.name));
        for i in 1..all.len() {
            if all[i].name == all[i - 1].name {
                all[i].shadowed = true;
            }
        }
        all
    }

    pub(crate) fn snapshot(&self, options: &SnapshotOptions) -> Captured {
        let mut tools = BTreeMap::new();
        for entry in self.catalog().into_iter().filter(|e| !e.shadowed) {
            tools.insert(entry.name, entry.tool);
        }
        // Visibility only (R12): hidden tools stay captured and callable.
        let definitions = tools
            .iter()
            .filter(|(name, _)| {
                options
                    .visibility
                    .as_ref()
                    .is_none_or(|r| r.is_visible(name))
            })
            .map(|(name, tool)| tool.definition(name))
            .collect();
        Captured {
            definitions,
            tools,
            final_step: options.final_step,
        }
    }
}

/// How to take a snapshot.
#[derive(Debug, Clone, Default)]
pub struct SnapshotOptions {
    /// The agent's final step: keep definitions, reject every call (R11).
    /// Default: `false`.
    pub final_step: bool,
    /// Permission rules used to hide tools from the catalog (R12). A tool is
    /// hidden when the last rule matching its name with resource `*` denies
    /// it. Hiding is visibility only: a hidden tool that is called anyway still
    /// settles. Default: none, everything visible.
    pub visibility: Option<Rules>,
}

/// The captured state of a snapshot: definitions plus tools.
#[derive(Debug, Clone)]
pub(crate) struct Captured {
    pub(crate) definitions: Vec<ToolDefinition>,
    pub(crate) tools: BTreeMap<String, Tool>,
    pub(crate) final_step: bool,
}
