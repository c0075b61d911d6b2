//! `toolhost.lock`: each `oci://` reference pinned to the manifest digest
//! it named when locked, and who signed it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::OciError;
use crate::files::read_regular_file;

/// The lock file's name, as `toolhost lock` writes it.
pub const LOCK_FILE: &str = "toolhost.lock";

/// The largest lock file read.
const MAX_LOCK_BYTES: u64 = 4 * 1024 * 1024;

/// The lock file's format version.
const LOCK_VERSION: u32 = 1;

/// References and the digests they are pinned to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    version: u32,
    #[serde(default, rename = "plugin")]
    plugins: Vec<Locked>,
}

/// One pinned reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Locked {
    /// The reference as written in the manifest or on the command line.
    pub reference: String,
    /// The manifest digest it named.
    pub digest: String,
    /// The fingerprint of the key whose signature was verified, if signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
}

impl Locked {
    /// A pin of `reference` to `digest`, signed by `signer`.
    pub fn new(reference: String, digest: String, signer: Option<String>) -> Locked {
        Locked {
            reference,
            digest,
            signer,
        }
    }
}

impl Lock {
    /// An empty lock.
    pub fn new() -> Lock {
        Lock {
            version: LOCK_VERSION,
            plugins: Vec::new(),
        }
    }

    /// Reads a lock file.
    pub fn read(path: &Path) -> Result<Lock, OciError> {
        let file_error = |reason: String| OciError::File {
            path: path.to_owned(),
            reason,
        };
        let bytes =
            read_regular_file(path, MAX_LOCK_BYTES).map_err(|e| file_error(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| file_error("it is not UTF-8".into()))?;
        let lock: Lock =
            toml::from_str(&text).map_err(|e| file_error(format!("not a lock file: {e}")))?;
        if lock.version != LOCK_VERSION {
            return Err(file_error(format!(
                "lock file version {} is not {LOCK_VERSION}, the one this toolhost reads",
                lock.version
            )));
        }
        Ok(lock)
    }

    /// Writes it to `path`, atomically (a temporary file renamed).
    pub fn write(&self, path: &Path) -> Result<(), OciError> {
        let file_error = |reason: String| OciError::File {
            path: path.to_owned(),
            reason,
        };
        let text = toml::to_string(self).map_err(|e| file_error(e.to_string()))?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut file =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| file_error(e.to_string()))?;
        std::io::Write::write_all(
            &mut file,
            format!("# Written by `toolhost lock`: each oci:// plugin pinned to a manifest digest.\n{text}").as_bytes(),
        )
        .map_err(|e| file_error(e.to_string()))?;
        file.persist(path).map_err(|e| file_error(e.to_string()))?;
        Ok(())
    }

    /// The pin of `reference`, if it has one.
    pub fn get(&self, reference: &str) -> Option<&Locked> {
        self.plugins.iter().find(|p| p.reference == reference)
    }

    /// Pins a reference, replacing an earlier pin of it.
    pub fn insert(&mut self, locked: Locked) {
        self.plugins.retain(|p| p.reference != locked.reference);
        self.plugins.push(locked);
        self.plugins.sort_by(|a, b| a.reference.cmp(&b.reference));
    }

    /// Every pin, by reference.
    pub fn entries(&self) -> &[Locked] {
        &self.plugins
    }
}
