//! `toolhost:plugin/call`: live only in a call's store (R24, R27). Each
//! function knows its call from the store it runs in; no ids cross over.

use std::sync::Arc;

use crate::model::approval::{Approver, PermissionDenied, PermissionRequest};
use crate::model::context::CallContext;
use crate::model::event::CallEvents;
use crate::model::text::truncate;
use crate::net::CallHttp;
use crate::permission::Policy;
use crate::wasm::bindings::toolhost::plugin::call as wit;
use crate::wasm::bindings::{ImportMisuse, PermissionError};

/// The longest JSON text accepted for one progress update or permission
/// metadata; larger values are guest misbehaviour.
pub const MAX_PROGRESS_BYTES: usize = 64 << 10;

/// Resources, and save patterns, one permission request may name: what a
/// person can review at once.
pub const MAX_PERMISSION_ITEMS: usize = 64;

/// The longest action, resource or save pattern of a permission request.
pub const MAX_PERMISSION_TEXT: usize = 4 << 10;

/// What a call's store knows about its call.
pub struct CallState {
    pub(crate) context: CallContext,
    /// The plugin's name, for saved permission answers.
    pub(crate) plugin: String,
    pub(crate) tool: String,
    pub(crate) progress: CallEvents,
    pub(crate) policy: Policy,
    /// The call's own approver, over the host's.
    pub(crate) approver: Option<Arc<dyn Approver>>,
    /// The plugin's configuration as JSON text.
    pub(crate) config: Arc<str>,
    /// What outbound HTTP the call may make, and what it made.
    pub(crate) http: Option<Arc<CallHttp>>,
}

/// The narrow view the call import works on.
pub(crate) struct CallImport<'a> {
    pub(crate) call: Option<&'a mut CallState>,
}

impl CallImport<'_> {
    fn call(&mut self, func: &str) -> wasmtime::Result<&mut CallState> {
        // Outside a call (during activation) these imports do not exist in
        // spirit; using them is a guest defect.
        self.call.as_deref_mut().ok_or_else(|| {
            wasmtime::Error::new(ImportMisuse(format!(
                "used call.{func} outside a tool call (during activate)"
            )))
        })
    }
}

impl wit::Host for CallImport<'_> {
    fn config(&mut self) -> wasmtime::Result<String> {
        Ok(self.call("config")?.config.to_string())
    }

    fn progress(&mut self, update: String) -> wasmtime::Result<()> {
        let call = self.call("progress")?;
        if update.len() > MAX_PROGRESS_BYTES {
            call.progress.reject(format!(
                "a progress update of {} bytes was dropped (limit {MAX_PROGRESS_BYTES})",
                update.len()
            ));
            return Ok(());
        }
        match serde_json::from_str::<serde_json::Value>(&update) {
            Ok(value) if value.is_object() => call.progress.report(value),
            _ => call
                .progress
                .reject("a progress update that is not a JSON object was dropped".into()),
        }
        Ok(())
    }

    async fn request_permission(
        &mut self,
        action: String,
        resources: Vec<String>,
        save: Vec<String>,
        metadata: Option<String>,
    ) -> Result<(), PermissionError> {
        let call = self.call("request-permission")?;
        if let Some(refusal) = oversized(&action, &resources, &save) {
            return Err(PermissionError::Denied(refusal));
        }
        let metadata = metadata
            .filter(|m| m.len() <= MAX_PROGRESS_BYTES)
            .and_then(|m| serde_json::from_str(&m).ok())
            .filter(serde_json::Value::is_object);
        let request = PermissionRequest {
            context: call.context.clone(),
            plugin: call.plugin.clone(),
            tool: call.tool.clone(),
            action,
            resources,
            save,
            metadata,
        };
        call.policy
            .decide(&request, call.approver.as_ref())
            .await
            .map_err(PermissionError::Denied)
    }

    fn convert_permission_denied(
        &mut self,
        e: PermissionError,
    ) -> wasmtime::Result<wit::PermissionDenied> {
        match e {
            PermissionError::Denied(denied) => Ok(wit::PermissionDenied {
                message: denied.to_string(),
            }),
            PermissionError::Trap(trap) => Err(trap),
        }
    }
}

/// A refusal for a request too large to show anyone (R28), if it is.
fn oversized(action: &str, resources: &[String], save: &[String]) -> Option<PermissionDenied> {
    let too_long = |s: &String| s.len() > MAX_PERMISSION_TEXT;
    let problem = if resources.len() > MAX_PERMISSION_ITEMS || save.len() > MAX_PERMISSION_ITEMS {
        format!("(a request may name at most {MAX_PERMISSION_ITEMS} resources and save patterns)")
    } else if action.len() > MAX_PERMISSION_TEXT
        || resources.iter().any(too_long)
        || save.iter().any(too_long)
    {
        format!("(a request's texts are at most {MAX_PERMISSION_TEXT} bytes each)")
    } else {
        return None;
    };
    Some(PermissionDenied {
        action: truncate(action.to_owned(), 64),
        resource: problem,
    })
}
