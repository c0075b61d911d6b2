//! `toolhost:plugin/call`: live only in a call's store (R24, R27). Each
//! function knows its call from the store it runs in; no ids cross over.

use std::sync::Arc;

use crate::model::call::CallContext;
use crate::model::event::Progress;
use crate::permission::{PermissionRequest, Policy};
use crate::runtime::bindings::PermissionError;
use crate::runtime::bindings::toolhost::plugin::call as wit;

/// The longest JSON text accepted for one progress update or permission
/// metadata; larger values are guest misbehaviour.
pub const MAX_PROGRESS_BYTES: usize = 64 << 10;

/// What a call's store knows about its call.
pub(crate) struct CallState {
    pub(crate) context: CallContext,
    pub(crate) tool: String,
    pub(crate) progress: Progress,
    pub(crate) policy: Policy,
    /// The plugin's configuration as JSON text.
    pub(crate) config: Arc<str>,
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
            wasmtime::format_err!("call.{func} used outside a tool call (during activate)")
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
        let metadata = metadata
            .filter(|m| m.len() <= MAX_PROGRESS_BYTES)
            .and_then(|m| serde_json::from_str(&m).ok())
            .filter(serde_json::Value::is_object);
        let request = PermissionRequest {
            context: call.context.clone(),
            tool: call.tool.clone(),
            action,
            resources,
            save,
            metadata,
        };
        call.policy
            .decide(&request)
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
