//! The after-hook seam (R18): embedder code that sees, and may change, each
//! bounded outcome before it is published.

use crate::context::CallContext;
use crate::outcome::Outcome;

/// What an after-hook sees besides the outcome.
#[derive(Debug)]
pub struct HookCall<'a> {
    /// The call's identity.
    pub context: &'a CallContext,
    /// The effective tool name.
    pub tool: &'a str,
}

/// Runs after settlement on the bounded outcome (R18). A hook may change
/// it; changed content is normalized and bounded again.
pub trait AfterHook: Send + Sync {
    /// Inspects or changes `outcome`.
    fn after(&self, call: &HookCall<'_>, outcome: &mut Outcome);

    /// The hook's name in error messages. Default: its type name.
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }
}
