//! Retained outputs: the full text behind a bounded part, kept in a managed
//! directory opened once with cap-std, so nothing outside it can be touched
//! through it (R16).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

use crate::model::outcome::RetainedOutput;

/// How long retained outputs are kept by default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Default cap on the bytes all retained outputs may take; the oldest are
/// evicted to make room, so a plugin cannot fill the disk.
pub const DEFAULT_RETENTION_QUOTA: u64 = 1 << 30;

/// Prefix of every retained-output reference.
pub(crate) const REFERENCE_PREFIX: &str = "toolhost-output:";

/// Hex digits in an output id: a random (v4) UUID in simple form, so ids
/// are unguessable.
const ID_LEN: usize = 32;

/// The managed directory of retained outputs: private to this user,
/// never followed through a symlink, capped in size.
#[derive(Debug)]
pub(crate) struct OutputStore {
    dir: Dir,
    path: PathBuf,
    quota: u64,
    /// Bytes of retained outputs in the directory, as far as we know.
    used: Mutex<u64>,
}

impl OutputStore {
    /// Opens (creating, mode 0700) the directory, which must be a real
    /// directory owned by this user, not a symlink.
    pub(crate) fn open(path: impl Into<PathBuf>, quota: u64) -> io::Result<OutputStore> {
        let path = path.into();
        create_private_dir(&path)?;
        check_private_dir(&path)?;
        let dir = Dir::open_ambient_dir(&path, ambient_authority())?;
        let store = OutputStore {
            dir,
            path,
            quota,
            used: Mutex::new(0),
        };
        let used = store.retained()?.iter().map(|(_, len, _)| len).sum();
        *store.lock() = used;
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        // A plain counter: poison cannot leave it half-updated.
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The directory's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` atomically (a new private temporary file, then rename)
    /// under a fresh random id and returns its reference, evicting the
    /// oldest outputs if the quota needs the room.
    pub(crate) fn retain(&self, text: &str) -> io::Result<RetainedOutput> {
        self.make_room(text.len() as u64)?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("{id}.txt");
        let tmp = format!(".{id}.tmp");
        let write = || -> io::Result<()> {
            // create_new: never write through a link someone planted.
            let mut file = self.dir.open_with(&tmp, &private_new_file())?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            self.dir.rename(&tmp, &self.dir, &name)
        };
        if let Err(e) = write() {
            let _ = self.dir.remove_file(&tmp);
            *self.lock() -= text.len() as u64;
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

    /// Counts `bytes` against the quota, evicting the oldest outputs first
    /// when they do not fit.
    fn make_room(&self, bytes: u64) -> io::Result<()> {
        if bytes > self.quota {
            return Err(io::Error::other(format!(
                "{bytes} bytes exceed the retention quota of {} bytes; raise `HostBuilder::retention_quota`",
                self.quota
            )));
        }
        let mut used = self.lock();
        if *used + bytes > self.quota {
            let mut oldest = self.retained()?;
            oldest.sort_by_key(|(modified, _, _)| *modified);
            let mut total: u64 = oldest.iter().map(|(_, len, _)| len).sum();
            for (_, len, name) in oldest {
                if total + bytes <= self.quota {
                    break;
                }
                self.dir.remove_file(&name)?;
                total -= len;
            }
            *used = total;
        }
        *used += bytes;
        Ok(())
    }

    /// Every retained output: when it was written, its size, its name.
    fn retained(&self) -> io::Result<Vec<(SystemTime, u64, String)>> {
        let mut found = Vec::new();
        for entry in self.dir.entries()? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !is_retained_name(&name) {
                continue;
            }
            let meta = entry.metadata()?;
            let modified = meta
                .modified()
                .map_or(SystemTime::UNIX_EPOCH, |m| m.into_std());
            found.push((modified, meta.len(), name));
        }
        Ok(found)
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
        *self.lock() = self.retained()?.iter().map(|(_, len, _)| len).sum();
        Ok(removed)
    }
}

/// A new file only this user can read, refusing any existing name.
fn private_new_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    cap_std::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

#[cfg(unix)]
fn create_private_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

#[cfg(not(unix))]
fn create_private_dir(path: &Path) -> io::Result<()> {
    std::fs::create_dir_all(path)
}

/// The directory must not be a symlink (it could point anywhere) and, on
/// Unix, must belong to this user, who alone may enter it.
fn check_private_dir(path: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(io::Error::other(
            "it is a symbolic link; give the real directory (a link could point anywhere)",
        ));
    }
    if !meta.is_dir() {
        return Err(io::Error::other("it is not a directory"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(io::Error::other(format!(
                "it belongs to user {}, not to this user ({me}); use a directory of your own",
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

/// The default output directory: `$XDG_STATE_HOME/toolhost/outputs`, else
/// `~/.local/state/toolhost/outputs`; a per-user directory in the system
/// temporary directory only when neither is known.
pub(crate) fn default_output_dir() -> PathBuf {
    output_dir_from(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
}

fn output_dir_from(state: Option<std::ffi::OsString>, home: Option<std::ffi::OsString>) -> PathBuf {
    let state = state
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            home.filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        });
    match state {
        Some(dir) => dir.join("toolhost").join("outputs"),
        None => std::env::temp_dir().join(format!("toolhost-outputs-{}", user_id())),
    }
}

#[cfg(unix)]
fn user_id() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn user_id() -> u32 {
    0
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
        let store = OutputStore::open(dir.path(), DEFAULT_RETENTION_QUOTA).unwrap();
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

#[cfg(test)]
mod location_tests {
    use super::*;

    #[test]
    fn r28_outputs_default_to_a_per_user_state_directory() {
        let state = output_dir_from(Some("/state".into()), Some("/home/me".into()));
        assert_eq!(state, Path::new("/state/toolhost/outputs"));
        let home = output_dir_from(None, Some("/home/me".into()));
        assert_eq!(home, Path::new("/home/me/.local/state/toolhost/outputs"));
        let neither = output_dir_from(Some("".into()), None);
        assert!(neither.starts_with(std::env::temp_dir()));
        assert!(neither.to_string_lossy().contains(&user_id().to_string()));
    }
}
