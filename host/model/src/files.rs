//! Reading files the host is given (plugins, manifests) without letting
//! them stall or flood it: regular files only, opened without blocking,
//! read with a bound; and the private directory of the host's state.

use std::io;
use std::path::Path;

use crate::error::LoadError;

/// Reads `path`, which must be a regular file of at most `max` bytes. It is
/// opened without blocking (a FIFO cannot stall the loader) and read with a
/// bound (a device or a growing file cannot make it read forever).
pub fn read_regular_file(path: &Path, max: u64) -> Result<Vec<u8>, LoadError> {
    use std::io::Read as _;

    let read_error = |source| LoadError::Read {
        path: path.to_owned(),
        source,
    };
    let file = open_nonblocking(path).map_err(read_error)?;
    let meta = file.metadata().map_err(read_error)?;
    if !meta.is_file() {
        return Err(LoadError::NotAFile {
            path: path.to_owned(),
            kind: file_kind(&meta),
        });
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > max {
        return Err(LoadError::TooLarge {
            path: path.to_owned(),
            limit: max,
        });
    }
    Ok(bytes)
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO";
        } else if t.is_char_device() || t.is_block_device() {
            return "a device";
        } else if t.is_socket() {
            return "a socket";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Creates `path` (mode 0700 on Unix) if needed and checks that it is a
/// private directory of this user's: not a symlink, owned by this user
/// (others' access bits are cleared).
pub fn private_dir(path: &Path) -> io::Result<()> {
    create_dir_private(path)?;
    check_private_dir(path)
}

#[cfg(unix)]
fn create_dir_private(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

#[cfg(not(unix))]
fn create_dir_private(path: &Path) -> io::Result<()> {
    std::fs::create_dir_all(path)
}

/// A directory of this user's state: it must not be a symlink (it could point anywhere) and, on
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
