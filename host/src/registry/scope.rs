//! Registration scopes: everything registered through one is closed when
//! it closes (R7).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::model::tool::Tool;
use crate::registry::placement::{Placement, Registration, RegistrationError, RegistrationInner};

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

    /// Whether any registration made through this scope is still open.
    pub(crate) fn has_open_registrations(&self) -> bool {
        let state = self.lock();
        state
            .registrations
            .iter()
            .filter_map(Weak::upgrade)
            .any(|r| !r.is_closed())
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
