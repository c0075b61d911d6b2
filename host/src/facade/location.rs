//! A location (workspace): its placement over the application's, where
//! plugins are activated, native tools registered and snapshots taken.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Error;
use crate::facade::snapshot::Snapshot;
use crate::model::tool::Tool;
use crate::registry::placement::{Placement, Registration, RegistrationError};
use crate::registry::scope::Scope;
use crate::registry::snapshot::{CatalogEntry, Overlay, SnapshotOptions};
use crate::runtime::activation::Activation;
use crate::runtime::load::{Loader, Plugin, PluginOptions};
use crate::settle::pipeline::Pipeline;

/// One placement's registry view: a location over the application, or the
/// application itself. Registers tools and takes snapshots.
#[derive(Clone)]
pub struct Location {
    pub(crate) loader: Arc<Loader>,
    pub(crate) pipeline: Arc<Pipeline>,
    pub(crate) own: Arc<Placement>,
    pub(crate) overlay: Overlay,
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Location")
            .field("own", &self.own)
            .finish_non_exhaustive()
    }
}

impl Location {
    /// Activates `plugin` here: its `activate` runs in an instance of its
    /// own and registers into this placement.
    pub async fn activate(&self, plugin: &Plugin) -> Result<Activation, Error> {
        Activation::start(plugin, self.own.clone()).await
    }

    /// Loads and activates the plugin at `path` with `options`.
    pub async fn load(
        &self,
        path: impl AsRef<Path>,
        options: &PluginOptions,
    ) -> Result<Activation, Error> {
        let plugin = self.loader.load(path.as_ref(), options).await?;
        self.activate(&plugin).await
    }

    /// Hot reload: activates the plugin at `path` (overlaying `old`'s
    /// registrations), then unloads `old`, so no snapshot ever sees a gap.
    pub async fn reload(
        &self,
        old: &Activation,
        path: impl AsRef<Path>,
        options: &PluginOptions,
    ) -> Result<Activation, Error> {
        let new = self.load(path, options).await?;
        old.unload();
        Ok(new)
    }

    /// A registration scope in this placement, for native tools.
    pub fn scope(&self) -> Scope {
        Scope::new(self.own.clone())
    }

    /// Registers native tools by authored name, atomically.
    pub fn register(
        &self,
        tools: impl IntoIterator<Item = (impl Into<String>, Tool)>,
    ) -> Result<Registration, RegistrationError> {
        let tools = tools.into_iter().map(|(n, t)| (n.into(), t)).collect();
        self.own.register(tools)
    }

    /// Every active registration visible here, sorted by name, winners first.
    pub fn catalog(&self) -> Vec<CatalogEntry> {
        self.overlay.catalog()
    }

    /// The effective tool of `name` right now.
    pub fn effective(&self, name: &str) -> Option<Tool> {
        self.overlay.effective(name)
    }

    /// The file behind a retained-output reference from a bounding marker
    /// (`toolhost-output:<id>`), if it is still kept.
    pub fn retained_output(&self, reference: &str) -> Option<PathBuf> {
        self.pipeline.outputs.as_ref().ok()?.resolve(reference)
    }

    /// A snapshot for one model request (R8).
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_with(&SnapshotOptions::default())
    }

    /// A snapshot with options: final step (R11), catalog filtering (R12).
    pub fn snapshot_with(&self, options: &SnapshotOptions) -> Snapshot {
        Snapshot {
            tools: Arc::new(self.overlay.capture(options)),
            pipeline: self.pipeline.clone(),
        }
    }
}
