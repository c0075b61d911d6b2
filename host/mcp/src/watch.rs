//! `--watch`: reload a plugin when its file changes (debounced), gap-free,
//! and tell clients the tool list changed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::server::{McpServer, ServeError};

/// Quiet time after the last change to a file before it is reloaded: a
/// build or copy writes in several steps.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// Watches the loaded plugins' files while it lives.
#[derive(Debug)]
pub struct Watcher {
    _watcher: notify::RecommendedWatcher,
    task: JoinHandle<()>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl McpServer {
    /// Starts watching the files of the plugins loaded so far; each change
    /// reloads the plugin and sends `notifications/tools/list_changed`.
    pub fn watch(&self) -> Result<Watcher, ServeError> {
        let files: HashSet<PathBuf> = self.shared.plugin_files().into_iter().collect();
        let (changed, mut changes) = mpsc::unbounded_channel::<PathBuf>();
        let watched = files.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                for path in event.into_iter().flat_map(|e| e.paths) {
                    if watched.contains(&path) {
                        let _ = changed.send(path);
                    }
                }
            })
            .map_err(|e| watch_error(Path::new("."), e))?;
        // Watch the directories: a file replaced by rename is a new inode.
        let dirs: HashSet<&Path> = files.iter().filter_map(|f| f.parent()).collect();
        for dir in dirs {
            watcher
                .watch(dir, RecursiveMode::NonRecursive)
                .map_err(|e| watch_error(dir, e))?;
        }
        let server = self.clone();
        let task = tokio::spawn(async move {
            while let Some(first) = changes.recv().await {
                let mut due = HashSet::from([first]);
                while let Ok(Some(more)) = tokio::time::timeout(DEBOUNCE, changes.recv()).await {
                    due.insert(more);
                }
                for path in due {
                    if let Err(e) = server.shared.reload(&path).await {
                        tracing::warn!(
                            "kept the running plugin; reloading {} failed: {e}",
                            path.display()
                        );
                    }
                }
            }
        });
        Ok(Watcher {
            _watcher: watcher,
            task,
        })
    }
}

fn watch_error(path: &Path, e: notify::Error) -> ServeError {
    ServeError::Watch {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}
