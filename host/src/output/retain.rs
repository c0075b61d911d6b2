//! Retained outputs: the full text behind a bounded part, kept in a managed
//! directory opened once with cap-std, so nothing outside it can be touched
//! through it (R16).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::model::outcome::RetainedOutput;

/// How long retained outputs are kept by default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Prefix of every retained-output reference.
pub(crate) const REFERENCE_PREFIX: &str = "toolhost-output:";

/// Hex digits in an output id: a random (v4) UUID in simple form, so ids
/// are unguessable.
const ID_LEN: usize = 32;

/// The managed directory of retained outputs.
#[derive(Debug)]
pub(crate) struct OutputStore {
    dir: Dir,
    path: PathBuf,
}

impl OutputStore {
    /// Opens (creating) the directory.
    pub(crate) fn open(path: impl Into<PathBuf>) -> io::Result<OutputStore> {
        let path = path.into();
        std::fs::create_dir_all(&path)?;
        let dir = Dir::open_ambient_dir(&path, ambient_authority())?;
        Ok(OutputStore { dir, path })
    }

    /// The directory's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` atomically (temporary file, then rename) under a fresh
    /// random id and returns its reference.
    pub(crate) fn retain(&self, text: &str) -> io::Result<RetainedOutput> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("{id}.txt");
        let tmp = format!(".{id}.tmp");
        let write = || -> io::Result<()> {
            let mut file = self.dir.create(&tmp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            self.dir.rename(&tmp, &self.dir, &name)
        };
        if let Err(e) = write() {
            let _ = self.dir.remove_file(&tmp);
            return Err(e);
        }
        Ok(RetainedOutput {
            reference: format!("{REFERENCE_PREFIX}{id}"),
            path: self.path.join(name),
            bytes: text.len() as u64,
        })
    }

    /// The file behind a reference, if it is one of ours and still exists.
    pub(crate) fn resolve(&self, reference: &str) -> Option<PathBuf> {
        let id = reference.strip_prefix(REFERENCE_PREFIX)?;
        // Only ids of our shape: anything else could name another file.
        if !is_id(id) {
            return None;
        }
        let name = format!("{id}.txt");
        self.dir.exists(&name).then(|| self.path.join(name))
    }

    /// Removes retained outputs older than `max_age`; returns how many.
    pub(crate) fn clean(&self, max_age: Duration) -> io::Result<usize> {
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in self.dir.entries()? {
            let entry = entry?;
            let old = entry
                .metadata()?
                .modified()
                .map(|m| now.duration_since(m.into_std()).unwrap_or_default() > max_age)
                .unwrap_or(false);
            let name = entry.file_name();
            let ours = name.to_str().is_some_and(is_retained_name);
            if old && ours {
                self.dir.remove_file(&name)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Whether a file name is one this store writes: `<id>.txt` or `.<id>.tmp`.
fn is_retained_name(name: &str) -> bool {
    name.strip_suffix(".txt")
        .or_else(|| name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")))
        .is_some_and(is_id)
}

fn is_id(id: &str) -> bool {
    id.len() == ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retained_ids_are_random_and_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let store = OutputStore::open(dir.path()).unwrap();
        let a = store.retain("same text").unwrap();
        let b = store.retain("same text").unwrap();
        assert_ne!(a.reference, b.reference);
        // Ids are random UUIDs (version 4), not derived from time or a
        // counter.
        for r in [&a, &b] {
            let id = uuid::Uuid::parse_str(&r.reference[REFERENCE_PREFIX.len()..]).unwrap();
            assert_eq!(id.get_version(), Some(uuid::Version::Random));
        }
        assert_eq!(store.resolve(&a.reference), Some(a.path.clone()));
        assert_eq!(std::fs::read_to_string(&a.path).unwrap(), "same text");
        assert_eq!(store.resolve("toolhost-output:../../etc/passwd"), None);
    }
}
