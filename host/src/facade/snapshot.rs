//! One model request's view of the tools: what to advertise, and the
//! captured tools its calls settle against (R8, R9).

use std::sync::Arc;

use crate::model::call::Call;
use crate::model::outcome::Settlement;
use crate::model::tool::{Tool, ToolDefinition};
use crate::registry::snapshot::CapturedTools;
use crate::settle::pipeline::Pipeline;
use crate::settle::settle;

/// One model request's captured tools (R8). Calls settle against it even if
/// the registry changes or plugins unload afterwards (R9). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub(crate) tools: Arc<CapturedTools>,
    pub(crate) pipeline: Arc<Pipeline>,
}

impl Snapshot {
    /// The advertised definitions, sorted by name.
    pub fn definitions(&self) -> &[ToolDefinition] {
        self.tools.definitions()
    }

    /// The captured tool for `name`, if any.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.tools.get(name)
    }

    /// Whether this is a final-step snapshot (R11).
    pub fn is_final_step(&self) -> bool {
        self.tools.final_step
    }

    /// Settles one call; never fails as a whole: every way a call can end is
    /// an [`Outcome`](crate::Outcome). Returns once the outcome is recorded
    /// by the event sink.
    pub async fn settle(&self, call: Call) -> Settlement {
        settle(&self.pipeline, &self.tools, call).await
    }
}
