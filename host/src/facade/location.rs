//! A location (workspace): its placement over the application's, where
//! plugins are activated, native tools registered and snapshots taken; and
//! the sessions opened on it, each a placement above it (R35).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::code::{CodeMode, with_execute};
use crate::config::plugin::PluginOptions;
use crate::error::Error;
use crate::facade::snapshot::Snapshot;
use crate::model::budget::Budget;
use crate::model::source::PluginSource;
use crate::model::tool::Tool;
use crate::permission::Policy;
use crate::registry::placement::{Level, Placement, Registration, RegistrationError};
use crate::registry::scope::Scope;
use crate::registry::snapshot::{CatalogEntry, Overlay, SnapshotOptions};
use crate::settle::pipeline::Pipeline;
use crate::store::{Store, StoreError};
use crate::wasm::activation::Activation;
use crate::wasm::load::{Loader, Plugin};

/// What every view of one location (or of the application) shares: its
/// placement, what it sees, and its open sessions by id.
pub(crate) struct LocationState {
    placement: Arc<Placement>,
    overlay: Overlay,
    sessions: Mutex<HashMap<String, Arc<Scope>>>,
}

impl LocationState {
    /// The state of a location whose own placement is the first of `overlay`.
    pub(crate) fn new(placement: Arc<Placement>, overlay: Overlay) -> Arc<LocationState> {
        Arc::new(LocationState {
            placement,
            overlay,
            sessions: Mutex::default(),
        })
    }

    /// What this location sees, without any session.
    pub(crate) fn overlay(&self) -> &Overlay {
        &self.overlay
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Arc<Scope>>> {
        // The map is only inserted into or removed from under the lock.
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The scope of session `id`, opened on first use. Everything registered
    /// in the session goes through it, so closing it ends the session.
    fn session(&self, id: &str) -> Arc<Scope> {
        self.sessions()
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(Scope::new(Placement::new(Level::Session))))
            .clone()
    }

    /// Forgets session `id` if it is still `scope` (not a later session
    /// opened under the same id).
    fn forget(&self, id: &str, scope: &Arc<Scope>) {
        let mut sessions = self.sessions();
        if sessions.get(id).is_some_and(|s| Arc::ptr_eq(s, scope)) {
            sessions.remove(id);
        }
    }
}

/// One session of a location, as a view holds it.
#[derive(Clone)]
struct SessionView {
    id: String,
    scope: Arc<Scope>,
}

/// One placement's registry view: a location over the application, the
/// application itself, or one session of either (see
/// [`Location::session`]). Registers tools and takes snapshots.
#[derive(Clone)]
pub struct Location {
    pub(crate) loader: Arc<Loader>,
    pub(crate) pipeline: Arc<Pipeline>,
    /// Code Mode, when the host has it on: snapshots then add `execute`.
    code: Option<Arc<CodeMode>>,
    home: Arc<LocationState>,
    session: Option<SessionView>,
    overlay: Overlay,
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Location")
            .field("own", &self.home.placement)
            .field("session", &self.session_id())
            .finish_non_exhaustive()
    }
}

impl Location {
    /// The view of the location (or application) behind `home`.
    pub(crate) fn new(
        loader: Arc<Loader>,
        pipeline: Arc<Pipeline>,
        code: Option<Arc<CodeMode>>,
        home: Arc<LocationState>,
    ) -> Location {
        let overlay = home.overlay.clone();
        Location {
            loader,
            pipeline,
            code,
            home,
            session: None,
            overlay,
        }
    }

    /// The view of session `id` of this location: a placement above the
    /// location's and the application's (R35). Everything a `Location`
    /// does works on it; what it registers, activates or scopes is visible
    /// only in its own snapshots, shadows the location's and the
    /// application's registrations of the same names, and closes when
    /// [`end_session`](Location::end_session) is called. The same id on the
    /// same location gives the same session until it ends.
    ///
    /// Sessions do not nest: on a session view this opens session `id` of
    /// the same location, a sibling (or the session itself, for its own id).
    pub fn session(&self, id: impl Into<String>) -> Location {
        let id = id.into();
        let scope = self.home.session(&id);
        Location {
            loader: self.loader.clone(),
            pipeline: self.pipeline.clone(),
            code: self.code.clone(),
            home: self.home.clone(),
            overlay: self.home.overlay.under(scope.placement().clone()),
            session: Some(SessionView { id, scope }),
        }
    }

    /// The session id of a session view; `None` for a location or the
    /// application.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_ref().map(|s| s.id.as_str())
    }

    /// Ends this session (R35): closes every registration made in it,
    /// including every activation's and scope's (which then reject
    /// registering with [`RegistrationError::ScopeClosed`]), and forgets
    /// its id, so a later [`session`](Location::session) with the same id is
    /// a fresh, empty one. Snapshots taken before still settle the tools
    /// they captured (R6, R9). Idempotent; does nothing on a view that is
    /// not a session.
    pub fn end_session(&self) {
        if let Some(session) = &self.session {
            self.home.forget(&session.id, &session.scope);
            session.scope.close();
        }
    }

    /// Activates `plugin` here: its `activate` runs in an instance of its
    /// own and registers into this placement.
    pub async fn activate(&self, plugin: &Plugin) -> Result<Activation, Error> {
        Activation::start(plugin, self.scope()).await
    }

    /// Loads and activates the plugin `source` names (a path, bytes in
    /// memory or a registry reference: [`PluginSource`]) with `options`.
    pub async fn load(
        &self,
        source: impl Into<PluginSource>,
        options: &PluginOptions,
    ) -> Result<Activation, Error> {
        let plugin = self.loader.load(&source.into(), options).await?;
        self.activate(&plugin).await
    }

    /// Hot reload: activates the plugin `source` names (overlaying `old`'s
    /// registrations), then unloads `old`, so no snapshot ever sees a gap.
    pub async fn reload(
        &self,
        old: &Activation,
        source: impl Into<PluginSource>,
        options: &PluginOptions,
    ) -> Result<Activation, Error> {
        let new = self.load(source, options).await?;
        old.unload();
        Ok(new)
    }

    /// A registration scope in this placement, for native tools. In a
    /// session it also closes when the session ends.
    pub fn scope(&self) -> Scope {
        match &self.session {
            Some(session) => Scope::within(&session.scope),
            None => Scope::new(self.home.placement.clone()),
        }
    }

    /// Registers native tools by authored name, atomically. In a session
    /// that has ended, fails with [`RegistrationError::ScopeClosed`].
    pub fn register(
        &self,
        tools: impl IntoIterator<Item = (impl Into<String>, Tool)>,
    ) -> Result<Registration, RegistrationError> {
        let tools: Vec<(String, Tool)> = tools.into_iter().map(|(n, t)| (n.into(), t)).collect();
        match &self.session {
            Some(session) => session.scope.register(tools),
            None => self.home.placement.register(tools),
        }
    }

    /// Every active registration visible here, sorted by name, winners first.
    pub fn catalog(&self) -> Vec<CatalogEntry> {
        self.overlay.catalog()
    }

    /// The effective tool of `name` right now.
    pub fn effective(&self, name: &str) -> Option<Tool> {
        self.overlay.effective(name)
    }

    /// The full text behind a retained-output reference, if `scope` may
    /// read it; as [`Host::retained`](crate::Host::retained).
    pub async fn retained(
        &self,
        scope: &str,
        reference: &str,
    ) -> Result<Option<String>, StoreError> {
        self.pipeline.retained(scope, reference).await
    }

    /// The TLS configuration the host's outbound clients use (its roots and
    /// any CA the embedder added), for tool sources that connect out.
    pub fn client_tls(&self) -> Arc<rustls::ClientConfig> {
        self.loader.defaults().tls.clone()
    }

    /// The host's permission policy (rules, approver, saved answers), which
    /// a tool source outside this crate narrows with
    /// [`Policy::for_plugin`].
    pub fn policy(&self) -> &Policy {
        &self.loader.defaults().policy
    }

    /// The budget of tools that carry none of their own.
    pub fn default_budget(&self) -> Budget {
        self.pipeline.budget
    }

    /// The host's store, opening the embedded one on first use; `None`
    /// when the host keeps none.
    pub async fn store(&self) -> Result<Option<Arc<dyn Store>>, StoreError> {
        Ok(self.pipeline.store.get().await?.cloned())
    }

    /// The ids and sizes of the retained outputs `scope` may read, newest
    /// first.
    pub async fn retained_list(&self, scope: &str) -> Result<Vec<(String, u64)>, StoreError> {
        match self.pipeline.store.get().await? {
            Some(store) => store.outputs_of(scope).await,
            None => Ok(Vec::new()),
        }
    }

    /// A snapshot for one model request (R8).
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_with(&SnapshotOptions::default())
    }

    /// A snapshot with options: final step (R11), catalog filtering (R12).
    /// With Code Mode on ([`HostBuilder::code_mode`](crate::HostBuilder::code_mode))
    /// it also advertises `execute`, whose programs call this snapshot's
    /// other tools (R34).
    pub fn snapshot_with(&self, options: &SnapshotOptions) -> Snapshot {
        let captured = self.overlay.capture(options);
        let tools = match &self.code {
            Some(code) => with_execute(captured, code, &self.pipeline),
            None => captured,
        };
        Snapshot {
            tools: Arc::new(tools),
            pipeline: self.pipeline.clone(),
        }
    }
}
