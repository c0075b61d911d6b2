//! Approvers for permission requests that ask: `--yes`, or a terminal prompt.

use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;

use toolhost::{Approver, PermissionRequest, Reply};

/// `--yes`: approve each request once.
pub(crate) struct Yes;

impl Approver for Yes {
    fn ask<'a>(
        &'a self,
        _: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        Box::pin(async { Reply::Once })
    }
}

/// Asks the person at the terminal.
pub(crate) struct Terminal;

impl Approver for Terminal {
    fn ask<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        let question = format!(
            "{} wants to {} {}. Allow? [o]nce / [a]lways / [r]eject: ",
            request.tool,
            request.action,
            request.resources.join(", ")
        );
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut stderr = std::io::stderr();
                let _ = write!(stderr, "{question}");
                let _ = stderr.flush();
                let mut line = String::new();
                if std::io::stdin().lock().read_line(&mut line).is_err() {
                    return Reply::Reject;
                }
                match line.trim().to_ascii_lowercase().as_str() {
                    "o" | "once" | "y" | "yes" => Reply::Once,
                    "a" | "always" => Reply::Always,
                    _ => Reply::Reject,
                }
            })
            .await
            .unwrap_or(Reply::Reject)
        })
    }
}
