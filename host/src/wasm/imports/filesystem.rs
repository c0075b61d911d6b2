//! `wasi:filesystem/types` `open-at`, wrapped around wasmtime-wasi's (R31):
//! grants expose only regular files, directories and symlinks to them, so
//! no host thread ever blocks opening a FIFO or device on a guest's behalf;
//! and one call holds at most [`MAX_HANDLES_PER_CALL`] handles, so it cannot
//! exhaust the host's descriptors.

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
    linker.instance(FILESYSTEM_TYPES)?.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: StoreContextMut<'_, StoreState>, params: OpenAtParams| {
            Box::new(async move { Ok((open_at(store.data_mut(), params).await?,)) })
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
