//! A plugin's grants as a WASI context: exactly the directories and
//! environment granted, stdout and stderr captured, no sockets.

use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use crate::config::grants::Grants;
use crate::error::GrantError;
use crate::wasm::stdio::LogBuffer;

/// Builds a WASI context holding exactly `grants`, with stdout and stderr
/// captured.
pub(crate) fn wasi_ctx(
    grants: &Grants,
    stdout: &LogBuffer,
    stderr: &LogBuffer,
) -> Result<WasiCtx, GrantError> {
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    for dir in &grants.dirs {
        let perms = if dir.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        builder
            .preopened_dir(&dir.host, dir.guest_path(), perms)
            .map_err(|e| GrantError {
                host: dir.host.clone(),
                reason: format!("{e:#}"),
            })?;
    }
    for env in &grants.env {
        let value = env.value.clone().or_else(|| std::env::var(&env.name).ok());
        if let Some(value) = value {
            builder.env(&env.name, value);
        }
    }
    Ok(builder.build())
}
