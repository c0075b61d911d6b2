//! The local content store: every blob pulled (manifests, configs, layers,
//! signature payloads) in a file named by its digest, written atomically
//! and checked against the digest again each time it is read, so a pinned
//! plugin loads offline and a corrupt file is never used.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::reference::is_digest;
use super::sha256_digest;
use crate::error::OciError;
use crate::files::read_regular_file;

/// Blobs under `DIR/blobs/sha256/HEX`, and under `DIR/signatures/HEX` the
/// digest of the signature manifest last seen for the manifest `HEX`.
#[derive(Debug, Clone)]
pub(crate) struct Blobs {
    dir: PathBuf,
}

impl Blobs {
    pub(crate) fn new(dir: PathBuf) -> Blobs {
        Blobs { dir }
    }

    /// The file of `digest` (already checked to be `sha256:HEX`).
    pub(crate) fn path(&self, digest: &str) -> PathBuf {
        debug_assert!(is_digest(digest));
        self.dir
            .join("blobs")
            .join("sha256")
            .join(digest.trim_start_matches("sha256:"))
    }

    /// The blob `digest`, if stored, at most `max` bytes and intact; a
    /// corrupt one is removed.
    pub(crate) fn read(&self, digest: &str, max: u64) -> Option<Vec<u8>> {
        let path = self.path(digest);
        let bytes = read_regular_file(&path, max).ok()?;
        if sha256_digest(&bytes) == digest {
            return Some(bytes);
        }
        tracing::warn!(
            "{} does not match its digest; pulling it again",
            path.display()
        );
        let _ = std::fs::remove_file(&path);
        None
    }

    /// Whether the blob `digest` is stored and intact (read in full).
    pub(crate) fn has(&self, digest: &str, max: u64) -> bool {
        self.read(digest, max).is_some()
    }

    /// Stores `bytes`, which hash to `digest`.
    pub(crate) fn write(&self, digest: &str, bytes: &[u8]) -> Result<PathBuf, OciError> {
        let mut file = self.temp()?;
        file.write_all(bytes)
            .map_err(|e| self.error(&self.dir, e))?;
        self.persist(file, digest)
    }

    /// A temporary file beside the blobs, to stream one into.
    pub(crate) fn temp(&self) -> Result<tempfile::NamedTempFile, OciError> {
        let dir = self.dir.join("blobs").join("sha256");
        std::fs::create_dir_all(&dir).map_err(|e| self.error(&dir, e))?;
        tempfile::Builder::new()
            .prefix(".partial-")
            .tempfile_in(&dir)
            .map_err(|e| self.error(&dir, e))
    }

    /// Moves a complete, verified temporary file into place as `digest`.
    pub(crate) fn persist(
        &self,
        file: tempfile::NamedTempFile,
        digest: &str,
    ) -> Result<PathBuf, OciError> {
        let path = self.path(digest);
        file.persist(&path)
            .map_err(|e| self.error(&path, e.error))?;
        Ok(path)
    }

    /// The signature manifest digest stored for the manifest `digest`.
    pub(crate) fn signatures(&self, digest: &str) -> Option<String> {
        let path = self.signature_index(digest);
        let text = read_regular_file(&path, 128).ok()?;
        let text = String::from_utf8(text).ok()?;
        is_digest(text.trim()).then(|| text.trim().to_owned())
    }

    /// Records `signatures` as the signature manifest of `digest`.
    pub(crate) fn set_signatures(&self, digest: &str, signatures: &str) -> Result<(), OciError> {
        let path = self.signature_index(digest);
        let dir = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(dir).map_err(|e| self.error(dir, e))?;
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| self.error(dir, e))?;
        file.write_all(signatures.as_bytes())
            .map_err(|e| self.error(&path, e))?;
        file.persist(&path)
            .map_err(|e| self.error(&path, e.error))?;
        Ok(())
    }

    fn signature_index(&self, digest: &str) -> PathBuf {
        self.dir
            .join("signatures")
            .join(digest.trim_start_matches("sha256:"))
    }

    fn error(&self, path: &Path, e: std::io::Error) -> OciError {
        OciError::Store {
            path: path.to_owned(),
            reason: e.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_error_keeps_its_cause() {
        use std::error::Error as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        // A file where the content store's directory must be.
        let digest = sha256_digest(b"x");
        let failed = Blobs::new(file).write(&digest, b"x").unwrap_err();
        assert!(matches!(failed, OciError::Store { .. }), "{failed:?}");
        let cause = failed.source().expect("a cause");
        assert!(
            cause.downcast_ref::<std::io::Error>().is_some(),
            "{cause:?}"
        );
        assert!(failed.to_string().ends_with(&cause.to_string()), "{failed}");
    }
}
