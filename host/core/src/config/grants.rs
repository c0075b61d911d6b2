//! WASI capabilities a plugin is granted (R25, R26). Everything starts
//! denied: no directories, no environment, no network, no inherited stdio.

use std::path::PathBuf;

use serde::Deserialize;

use crate::config::http::HttpGrant;

/// A host directory mapped into the guest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the guest sees it (e.g. `/data`). Default: the host path.
    #[serde(default)]
    pub guest: Option<String>,
    /// Whether the guest may create, change and remove files. Default: false.
    #[serde(default)]
    pub writable: bool,
}

impl DirGrant {
    /// A read-only grant of `host`, seen by the guest at `guest`.
    pub fn read_only(host: impl Into<PathBuf>, guest: impl Into<String>) -> DirGrant {
        DirGrant {
            host: host.into(),
            guest: Some(guest.into()),
            writable: false,
        }
    }

    /// A read-write grant of `host`, seen by the guest at `guest`.
    pub fn read_write(host: impl Into<PathBuf>, guest: impl Into<String>) -> DirGrant {
        DirGrant {
            writable: true,
            ..DirGrant::read_only(host, guest)
        }
    }

    /// Where the guest sees the directory: `guest`, else the host path.
    pub fn guest_path(&self) -> String {
        self.guest
            .clone()
            .unwrap_or_else(|| self.host.to_string_lossy().into_owned())
    }
}

/// An environment variable the guest may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvGrant {
    /// The variable's name.
    pub name: String,
    /// An explicit value; `None` passes the host's value, if set.
    pub value: Option<String>,
}

/// The capabilities of one plugin. Default: nothing at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Directories the guest can see.
    pub dirs: Vec<DirGrant>,
    /// Environment variables the guest can read.
    pub env: Vec<EnvGrant>,
    /// Origins the guest may send HTTP requests to (R36).
    pub http: Vec<HttpGrant>,
}
