//! Where a plugin's component comes from: the one seam every loader
//! (the library, the CLI, `serve`, manifests) goes through.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::plugin::OCI_SCHEME;

/// Where a plugin's component comes from. Loading resolves it to the
/// component's bytes, checked (a component, within
/// `toolhost::limits::MAX_PLUGIN_BYTES`, and for a
/// registry its digest and signatures), and records where they came from
/// in [`PluginInfo::path`](crate::plugin::PluginInfo::path).
///
/// A path converts with [`PluginSource::from_path`]: `oci://…` names a
/// registry reference, anything else a file.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PluginSource {
    /// A component file.
    File(PathBuf),
    /// A component already in memory (one a program embeds, say). Its
    /// `name` stands for it in messages and is the plugin's name unless
    /// its options give one.
    Bytes {
        /// What messages call it.
        name: String,
        /// The component.
        wasm: Arc<[u8]>,
    },
    /// A reference into an OCI registry (`oci://registry/repository:tag`
    /// or `…@sha256:…`), pulled and verified through the host's
    /// `toolhost::HostBuilder::distribution` (R41).
    Oci(String),
}

impl PluginSource {
    /// A component in memory, called `name` in messages.
    pub fn bytes(name: impl Into<String>, wasm: impl Into<Arc<[u8]>>) -> PluginSource {
        PluginSource::Bytes {
            name: name.into(),
            wasm: wasm.into(),
        }
    }

    /// A path as a command line or a manifest writes it: `oci://…` is a
    /// registry reference, anything else a file.
    pub fn from_path(path: &Path) -> PluginSource {
        match path.to_str().filter(|p| p.starts_with(OCI_SCHEME)) {
            Some(reference) => PluginSource::Oci(reference.to_owned()),
            None => PluginSource::File(path.to_owned()),
        }
    }

    /// The file it is, if it is one (what `serve --watch` can watch).
    pub fn file(&self) -> Option<&Path> {
        match self {
            PluginSource::File(path) => Some(path),
            _ => None,
        }
    }

    /// Where it came from as a path: the file, the reference, or the
    /// name of bytes in memory (what messages and
    /// [`PluginInfo::path`](crate::plugin::PluginInfo::path) show).
    pub fn label(&self) -> PathBuf {
        match self {
            PluginSource::File(path) => path.clone(),
            PluginSource::Bytes { name, .. } => PathBuf::from(name),
            PluginSource::Oci(reference) => PathBuf::from(reference),
        }
    }
}

impl fmt::Debug for PluginSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginSource::File(path) => f.debug_tuple("File").field(path).finish(),
            PluginSource::Bytes { name, wasm } => f
                .debug_struct("Bytes")
                .field("name", name)
                .field("len", &wasm.len())
                .finish(),
            PluginSource::Oci(reference) => f.debug_tuple("Oci").field(reference).finish(),
        }
    }
}

impl fmt::Display for PluginSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.label().display().fmt(f)
    }
}

impl From<&Path> for PluginSource {
    fn from(path: &Path) -> PluginSource {
        PluginSource::from_path(path)
    }
}

impl From<&PathBuf> for PluginSource {
    fn from(path: &PathBuf) -> PluginSource {
        PluginSource::from_path(path)
    }
}

impl From<PathBuf> for PluginSource {
    fn from(path: PathBuf) -> PluginSource {
        PluginSource::from_path(&path)
    }
}

impl From<&str> for PluginSource {
    fn from(path: &str) -> PluginSource {
        PluginSource::from_path(Path::new(path))
    }
}

impl From<&PluginSource> for PluginSource {
    fn from(source: &PluginSource) -> PluginSource {
        source.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_a_file_unless_it_is_an_oci_reference() {
        assert_eq!(
            PluginSource::from("plugins/echo.wasm"),
            PluginSource::File("plugins/echo.wasm".into())
        );
        assert_eq!(
            PluginSource::from("oci://localhost:5000/echo:1"),
            PluginSource::Oci("oci://localhost:5000/echo:1".into())
        );
        let bytes = PluginSource::bytes("std", &b"\0asm"[..]);
        assert_eq!(bytes.label(), PathBuf::from("std"));
        assert_eq!(bytes.file(), None);
        assert_eq!(format!("{bytes:?}"), r#"Bytes { name: "std", len: 4 }"#);
    }
}
