//! The granted root: turning a model's path into a path inside it, asking
//! permission with paths relative to it, and replacing files atomically.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write as _};
use std::path::{Component, Path, PathBuf};

use toolhost_sdk::prelude::*;

/// Where the host maps the granted directory unless the configuration's
/// `root` says otherwise (`toolhost --std DIR` maps DIR here).
pub const DEFAULT_ROOT: &str = "/workspace";

/// Symbolic links followed while resolving one path: as Linux's
/// `MAXSYMLINKS`, so a loop of links ends in an error instead of spinning.
pub const MAX_SYMLINK_HOPS: usize = 40;

/// The directory every path is confined to.
#[derive(Debug, Clone)]
pub struct Root {
    guest: PathBuf,
}

/// A path inside the root.
#[derive(Debug, Clone)]
pub struct Target {
    /// The path as the guest opens it (absolute, under the root, through
    /// no symbolic link).
    pub path: PathBuf,
    /// The path relative to the root, `/`-separated; `.` for the root.
    pub rel: String,
}

impl Root {
    /// The root the plugin was configured with: `config.root`, or
    /// [`DEFAULT_ROOT`].
    pub fn of(cx: &Context) -> Result<Root, ToolError> {
        let config = cx.config();
        let guest = config
            .get("root")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_ROOT);
        let guest = PathBuf::from(guest);
        if !guest.is_absolute() {
            return Err(ToolError::new(format!(
                "the plugin's configured root {} is not an absolute path; configure `root` as the guest path of the granted directory",
                guest.display()
            )));
        }
        Ok(Root { guest })
    }

    /// The root as the guest sees it.
    pub fn path(&self) -> &Path {
        &self.guest
    }

    /// Resolves `given` (relative to the root, or absolute under it; none
    /// or empty for the root itself). Refuses a path that leaves the root
    /// through `..` or through a symbolic link.
    pub fn resolve(&self, given: Option<&str>) -> Result<Target, ToolError> {
        let given = given.unwrap_or("");
        let path = Path::new(given);
        let relative = if path.is_absolute() {
            path.strip_prefix(&self.guest).map_err(|_| {
                ToolError::new(format!(
                    "`{given}` is outside the granted root {}; give a path relative to the root",
                    self.guest.display()
                ))
            })?
        } else {
            path
        };
        let mut queue = VecDeque::new();
        for component in relative.components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => queue.push_back(Part::Up(None)),
                Component::Normal(name) => queue.push_back(Part::Name(name.to_owned())),
                Component::RootDir | Component::Prefix(_) => {}
            }
        }
        let mut resolved: Vec<OsString> = Vec::new();
        let mut hops = 0;
        let mut exists = true;
        while let Some(part) = queue.pop_front() {
            let name = match part {
                Part::Up(link) => {
                    if resolved.pop().is_some() {
                        continue;
                    }
                    return Err(match link {
                        Some(link) => through_link(given, &link),
                        None => ToolError::new(format!(
                            "`{given}` leaves the granted root through `..`; give a path inside it"
                        )),
                    });
                }
                Part::Name(name) => name,
            };
            let candidate = self.join(&resolved).join(&name);
            let link = exists
                && fs::symlink_metadata(&candidate).is_ok_and(|m| m.file_type().is_symlink());
            if !link {
                exists = exists && candidate.exists();
                resolved.push(name);
                continue;
            }
            hops += 1;
            let link = relative_name(&resolved, &name);
            if hops > MAX_SYMLINK_HOPS {
                return Err(through_link(given, &link));
            }
            let target = match fs::read_link(&candidate) {
                Ok(target) if !target.is_absolute() => target,
                // The host gives an absolute target that a grant holds as
                // the guest's path of it: inside the root, resolution
                // starts again from the root.
                Ok(target) => match target.strip_prefix(&self.guest) {
                    Ok(inside) => {
                        resolved.clear();
                        inside.to_owned()
                    }
                    Err(_) => return Err(through_link(given, &link)),
                },
                // The host refuses to read a link whose absolute target is
                // outside every grant.
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    return Err(ToolError::new(format!(
                        "`{given}` goes through the symbolic link `{link}`, whose target is an absolute path outside the granted root: it cannot be followed. Give a path inside the root."
                    )));
                }
                _ => return Err(through_link(given, &link)),
            };
            // The link's target replaces it, relative to its directory; a
            // `..` of it that climbs above the root is a link out of it.
            for component in target.components().rev() {
                match component {
                    Component::ParentDir => queue.push_front(Part::Up(Some(link.clone()))),
                    Component::Normal(n) => queue.push_front(Part::Name(n.to_owned())),
                    _ => {}
                }
            }
        }
        let rel = if resolved.is_empty() {
            ".".to_owned()
        } else {
            resolved
                .iter()
                .map(|p| p.to_string_lossy())
                .collect::<Vec<_>>()
                .join("/")
        };
        Ok(Target {
            path: self.join(&resolved),
            rel,
        })
    }

    /// Resolves `given` as [`Root::resolve`] does, except its last
    /// component: a symbolic link there is itself the target, as it is
    /// for what deleting or moving a file away removes.
    pub fn resolve_entry(&self, given: &str) -> Result<Target, ToolError> {
        let path = Path::new(given);
        let Some(Component::Normal(name)) = path.components().next_back() else {
            return self.resolve(Some(given));
        };
        let parent: PathBuf = {
            let mut components = path.components();
            components.next_back();
            components.collect()
        };
        let dir = self.resolve(parent.to_str())?;
        let name = name.to_string_lossy();
        Ok(Target {
            path: dir.path.join(name.as_ref()),
            rel: if dir.rel == "." {
                name.into_owned()
            } else {
                format!("{}/{name}", dir.rel)
            },
        })
    }

    fn join(&self, parts: &[OsString]) -> PathBuf {
        let mut path = self.guest.clone();
        path.extend(parts);
        path
    }

    /// `path` (under the root) relative to it, `/`-separated.
    pub fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.guest).unwrap_or(path);
        let rel = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        if rel.is_empty() { ".".to_owned() } else { rel }
    }
}

/// One step of a path being resolved.
enum Part {
    /// `..`, from the model's path (`None`) or from the target of a link.
    Up(Option<String>),
    Name(OsString),
}

/// `resolved/name`, `/`-separated.
fn relative_name(resolved: &[OsString], name: &OsString) -> String {
    let mut parts: Vec<String> = resolved
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    parts.push(name.to_string_lossy().into_owned());
    parts.join("/")
}

fn through_link(given: &str, link: &str) -> ToolError {
    ToolError::new(format!(
        "`{given}` goes through the symbolic link `{link}`, which points outside the granted root (or loops); only paths inside the root can be used"
    ))
}

/// The save patterns offered with a request about the file `rel`: its
/// directory.
pub fn save_for_file(rel: &str) -> Vec<String> {
    match rel.rsplit_once('/') {
        Some((dir, _)) => vec![format!("{dir}/*")],
        None => vec!["*".to_owned()],
    }
}

/// The save patterns offered with a request about the directory `rel`:
/// itself and everything in it.
pub fn save_for_dir(rel: &str) -> Vec<String> {
    if rel == "." {
        vec!["*".to_owned()]
    } else {
        vec![rel.to_owned(), format!("{rel}/*")]
    }
}

/// Asks permission for `action` on `resources`, offering `save`.
pub fn ask(
    cx: &Context,
    action: &str,
    resources: &[&str],
    save: &[String],
    metadata: Option<Value>,
) -> Result<(), ToolError> {
    let save: Vec<&str> = save.iter().map(String::as_str).collect();
    cx.request_permission(action, resources, &save, metadata)?;
    Ok(())
}

/// A model-visible error for a failed filesystem operation on `rel`.
pub fn fs_error(action: &str, rel: &str, error: &io::Error) -> ToolError {
    let hint = match error.kind() {
        io::ErrorKind::NotFound => "it does not exist; check the path (glob or list can find it)",
        io::ErrorKind::PermissionDenied => "access is denied (the root may be granted read-only)",
        io::ErrorKind::IsADirectory => "it is a directory; give a file path",
        io::ErrorKind::NotADirectory => "a part of the path is not a directory",
        io::ErrorKind::ReadOnlyFilesystem => "the root is granted read-only",
        _ => "",
    };
    if hint.is_empty() {
        ToolError::new(format!("Cannot {action} `{rel}`: {error}."))
    } else {
        ToolError::new(format!("Cannot {action} `{rel}`: {hint} ({error})."))
    }
}

/// The largest file `edit` and `apply_patch` change: the file, its copy
/// with line endings normalized and the edited result together stay well
/// inside a call's default 256 MiB of memory.
pub const MAX_EDIT_BYTES: u64 = 32 << 20;

/// The refusal of `rel`, which is neither a regular file nor a directory;
/// `does` says what the tool does to regular files (`edit changes`).
pub fn not_regular(rel: &str, does: &str) -> ToolError {
    ToolError::new(format!(
        "`{rel}` is not a regular file (a FIFO, socket or device); {does} regular files only."
    ))
}

/// The bytes of the file `target`, which `tool` is about to change:
/// refused, before anything is read, when it is not a regular file or is
/// larger than [`MAX_EDIT_BYTES`].
pub fn read_to_change(target: &Target, tool: &str) -> Result<Vec<u8>, ToolError> {
    let metadata = fs::metadata(&target.path).map_err(|e| fs_error("read", &target.rel, &e))?;
    if metadata.is_dir() {
        return Err(ToolError::new(format!(
            "`{}` is a directory; give a file path.",
            target.rel
        )));
    }
    if !metadata.is_file() {
        return Err(not_regular(&target.rel, &format!("{tool} changes")));
    }
    if metadata.len() > MAX_EDIT_BYTES {
        return Err(ToolError::new(format!(
            "`{}` is too large to edit ({} bytes; edit and apply_patch change files of at most {} MiB). Leave it unchanged, or ask the user to change it.",
            target.rel,
            crate::text::count(metadata.len()),
            MAX_EDIT_BYTES >> 20
        )));
    }
    fs::read(&target.path).map_err(|e| fs_error("read", &target.rel, &e))
}

/// Replaces (or creates) the file at `path` with `bytes` atomically: the
/// bytes go to a temporary file beside it, synced, then renamed over it,
/// so a reader sees the old file or the new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temp = temp_beside(path);
    let written = (|| {
        let mut file = fs::File::create_new(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    let result = written.and_then(|()| fs::rename(&temp, path));
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// A fresh, hidden name beside `path` for a file about to replace it.
pub fn temp_beside(path: &Path) -> PathBuf {
    // RandomState's keys come from the host's random source.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{random:016x}.toolhost-tmp"))
}

/// Creates the missing parent directories of `target` (inside the root:
/// `target` was resolved).
pub fn create_parents(target: &Target) -> Result<(), ToolError> {
    if let Some(parent) = target.path.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| fs_error("create the directories of", &target.rel, &e))?;
    }
    Ok(())
}
