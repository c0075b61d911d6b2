//! Registration scopes: everything registered through one is closed when
//! it closes (R7). A scope may sit within another (a plugin's within its
//! session's), and closing the outer one closes everything registered
//! through the inner ones too (R35).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::model::tool::Tool;
use crate::registry::placement::{Placement, Registration, RegistrationError, RegistrationInner};

/// A registration scope: everything registered through it is closed when the
/// scope closes (R7). Each plugin activation owns one. A scope opened in a
/// session also closes when the session ends (R35).
pub struct Scope {
    placement: Arc<Placement>,
    /// The scope this one sits within: every registration made here is
    /// recorded there too, so closing it closes them.
    outer: Option<Arc<Scope>>,
    state: Mutex<ScopeState>,
}

#[derive(Default)]
struct ScopeState {
    closed: bool,
    registrations: Vec<Weak<RegistrationInner>>,
}

impl ScopeState {
    fn record(&mut self, registration: &Registration) {
        self.registrations.retain(|r| r.strong_count() > 0);
        self.registrations.push(Arc::downgrade(&registration.inner));
    }
}

impl Scope {
    /// A scope of its own in `placement`.
    pub fn new(placement: Arc<Placement>) -> Scope {
        Scope {
            placement,
            outer: None,
            state: Mutex::new(ScopeState::default()),
        }
    }

    /// A scope within `outer`, registering into the same placement.
    pub fn within(outer: &Arc<Scope>) -> Scope {
        Scope {
            placement: outer.placement.clone(),
            outer: Some(outer.clone()),
            state: Mutex::new(ScopeState::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ScopeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The placement it registers into.
    pub fn placement(&self) -> &Arc<Placement> {
        &self.placement
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
        let tools: Vec<(String, Tool)> = tools.into_iter().map(|(n, t)| (n.into(), t)).collect();
        // The outer scope checks its own closing and records the
        // registration; locks are taken inner before outer, never the
        // other way round.
        let registration = match &self.outer {
            Some(outer) => outer.register(tools)?,
            None => self.placement.register(tools)?,
        };
        state.record(&registration);
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

    /// Whether any registration made through this scope is still open.
    pub fn has_open_registrations(&self) -> bool {
        let state = self.lock();
        state
            .registrations
            .iter()
            .filter_map(Weak::upgrade)
            .any(|r| !r.is_closed())
    }

    /// Whether the scope has been closed, or the scope it sits within
    /// (its session's) has.
    pub fn is_closed(&self) -> bool {
        self.lock().closed || self.outer.as_ref().is_some_and(|o| o.is_closed())
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
