//! `wasi:filesystem/types` `open-at` and `readlink-at`, wrapped around
//! wasmtime-wasi's (R26, R31): grants expose only regular files,
//! directories and symlinks to them, so no host thread ever blocks opening
//! a FIFO or device on a guest's behalf; one call holds at most
//! [`MAX_HANDLES_PER_CALL`] handles, so it cannot exhaust the host's
//! descriptors; and a link whose target is an absolute host path inside a
//! grant reads as the guest's path of that target (wasmtime-wasi refuses
//! every absolute target), so a guest can follow links within its grants
//! without ever seeing a host path.

use std::path::{Component, Path};

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, DescriptorType, ErrorCode, Host, HostDescriptor, OpenFlags, PathFlags,
};

use crate::model::text::truncate;
use crate::wasm::store::{MAX_HANDLES_PER_CALL, StoreState};

/// The interface version wasmtime-wasi 48 links; guests importing any
/// 0.2.x version resolve to it.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

type OpenAtParams = (
    Resource<Descriptor>,
    PathFlags,
    String,
    OpenFlags,
    DescriptorFlags,
);

/// Replaces wasmtime-wasi's `open-at` with the checked one.
pub(crate) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: StoreContextMut<'_, StoreState>, params: OpenAtParams| {
            Box::new(async move { Ok((open_at(store.data_mut(), params).await?,)) })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.readlink-at",
        |mut store: StoreContextMut<'_, StoreState>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move { Ok((readlink_at(store.data_mut(), fd, path).await?,)) })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

async fn open_at(
    state: &mut StoreState,
    (fd, path_flags, path, oflags, flags): OpenAtParams,
) -> wasmtime::Result<Result<Resource<Descriptor>, ErrorCode>> {
    if let Some(kind) = special_file(state, &fd, path_flags, &path).await {
        state.note(format!(
            "refused to open `{}`: it is a {kind}, not a regular file or directory; grants expose only those",
            truncate(path, 256)
        ));
        return Ok(Err(ErrorCode::NotPermitted));
    }
    if !room_for_a_handle(state) {
        state.note(format!(
            "refused to open `{}`: the call holds {MAX_HANDLES_PER_CALL} handles, the most one call may hold; close some first",
            truncate(path, 256)
        ));
        return Ok(Err(ErrorCode::InsufficientMemory));
    }
    let mut view = state.filesystem();
    match view.open_at(fd, path_flags, path, oflags, flags).await {
        Ok(opened) => Ok(Ok(opened)),
        Err(e) => Ok(Err(view.convert_error_code(e)?)),
    }
}

/// wasmtime-wasi's `readlink-at`; where it refuses a link for its absolute
/// target, that target as the guest sees it, if a grant holds it.
async fn readlink_at(
    state: &mut StoreState,
    fd: Resource<Descriptor>,
    path: String,
) -> wasmtime::Result<Result<String, ErrorCode>> {
    let borrowed = Resource::new_borrow(fd.rep());
    let mut view = state.filesystem();
    let code = match view.readlink_at(borrowed, path.clone()).await {
        Ok(target) => return Ok(Ok(target)),
        Err(e) => view.convert_error_code(e)?,
    };
    if code != ErrorCode::NotPermitted {
        return Ok(Err(code));
    }
    Ok(granted_target(state, &fd, &path).ok_or(code))
}

/// The guest path of the absolute target of the link `path` under `fd`,
/// when one of the call's directory grants holds it (no `..` after the
/// grant's root); `None` otherwise, so a host path outside the grants is
/// never shown.
fn granted_target(state: &StoreState, fd: &Resource<Descriptor>, path: &str) -> Option<String> {
    let Ok(Descriptor::Dir(dir)) = state.table.get(fd) else {
        return None;
    };
    let file = dir.dir.try_clone().ok()?;
    // The link's own path stays sandboxed under the descriptor; only its
    // contents may be absolute.
    let target = cap_std::fs::Dir::from_std_file(file)
        .read_link_contents(path)
        .ok()?;
    if !target.is_absolute() {
        return None;
    }
    state.mounts.iter().find_map(|(host, guest)| {
        // The host's path of a granted file (as a link made outside the
        // sandbox names it), or already the guest's (as one made inside).
        let root = std::fs::canonicalize(host).ok()?;
        let rest = target
            .strip_prefix(&root)
            .or_else(|_| target.strip_prefix(guest))
            .ok()?;
        let plain = rest.components().all(|c| matches!(c, Component::Normal(_)));
        plain.then(|| Path::new(guest).join(rest).to_string_lossy().into_owned())
    })
}

/// What kind of special file `path` is, if it exists and is not a regular
/// file, a directory or (not followed) a symlink. Reading its type never
/// blocks, unlike opening it.
async fn special_file(
    state: &mut StoreState,
    fd: &Resource<Descriptor>,
    path_flags: PathFlags,
    path: &str,
) -> Option<&'static str> {
    let dir = Resource::new_borrow(fd.rep());
    let stat = state
        .filesystem()
        .stat_at(dir, path_flags, path.to_owned())
        .await
        .ok()?;
    match stat.type_ {
        DescriptorType::RegularFile | DescriptorType::Directory | DescriptorType::SymbolicLink => {
            None
        }
        DescriptorType::Fifo => Some("FIFO"),
        DescriptorType::CharacterDevice => Some("character device"),
        DescriptorType::BlockDevice => Some("block device"),
        DescriptorType::Socket => Some("socket"),
        // What a FIFO looks like through wasmtime-wasi.
        DescriptorType::Unknown => Some("special file (a FIFO?)"),
    }
}

/// Whether the call's handle table can take one more entry: probed by
/// pushing a placeholder, since the table counts but does not tell.
fn room_for_a_handle(state: &mut StoreState) -> bool {
    match state.table.push(()) {
        Ok(probe) => state.table.delete(probe).is_ok(),
        Err(_) => false,
    }
}
