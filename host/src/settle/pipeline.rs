//! The settlement pipeline's host-wide settings, and what a settlement
//! collects on the way.

use std::fmt;
use std::sync::Arc;

use crate::model::budget::{Budget, OutputBounds, Usage};
use crate::model::event::EventSink;
use crate::model::hook::AfterHook;
use crate::model::outcome::Logs;
use crate::output::retain::{Retention, id_of};
use crate::store::{StoreError, StoreSlot};

/// The largest partial-progress snapshot kept on an error outcome (R19).
pub const MAX_PARTIAL_BYTES: usize = 16 << 10;

/// Host-wide settings of the settlement pipeline.
pub(crate) struct Pipeline {
    /// The budget of tools that carry none of their own (native tools).
    pub(crate) budget: Budget,
    /// The bounds of tools that carry none of their own.
    pub(crate) bounds: OutputBounds,
    /// Where outcomes, events, retained outputs and saved answers live.
    pub(crate) store: Arc<StoreSlot>,
    /// How much retained output the store keeps, and for how long.
    pub(crate) retention: Retention,
    pub(crate) sink: Option<Arc<dyn EventSink>>,
    pub(crate) hooks: Vec<Arc<dyn AfterHook>>,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("budget", &self.budget)
            .field("bounds", &self.bounds)
            .field("hooks", &self.hooks.len())
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// The text of the retained output `reference` names, if `scope` may
    /// read it and the store still keeps it.
    pub(crate) async fn retained(
        &self,
        scope: &str,
        reference: &str,
    ) -> Result<Option<String>, StoreError> {
        let Some(id) = id_of(reference) else {
            return Ok(None);
        };
        let Some(store) = self.store.get().await? else {
            return Ok(None);
        };
        Ok(store
            .output(id)
            .await?
            .filter(|output| output.session == scope)
            .map(|output| String::from_utf8_lossy(&output.text).into_owned()))
    }
}

/// What settlement collects besides the outcome.
#[derive(Default)]
pub(crate) struct Record {
    pub(crate) usage: Usage,
    pub(crate) warnings: Vec<String>,
    pub(crate) logs: Logs,
}
