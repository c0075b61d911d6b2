//! Plugins from OCI registries (R41): `oci://` references pulled with the
//! ORAS project's `oci-client`, in the CNCF wasm OCI artifact layout
//! (`application/vnd.wasm.config.v0+json` config, one `application/wasm`
//! layer), so what `wkg` pushes loads and what Toolhost pushes `wkg` pulls.
//!
//! Everything from a registry is hostile until bounded and verified: the
//! manifest, config, layer and signature payloads are each bounded in
//! size, the whole pull in time; every blob is checked against its digest
//! and stored under it; a plugin's signature is verified against the
//! [`TrustPolicy`] before a byte of it is compiled. A digest already pulled
//! loads offline.
//!
//! One job a module: `credentials` (environment and Docker config),
//! `session` (one registry conversation: TLS or plain HTTP,
//! authentication, bounded reads), `pull` (fetch and inspect), `verify`
//! (signature discovery and checks), `push` (push, sign, attach a bundle);
//! beneath them `manifest` (the wire format), `reference`, `store` (the
//! content store), `lock`, `trust`, `sign` (key pairs) and `keyless`
//! (Sigstore bundles). Built on oci-client and reqwest (HTTP), ring
//! (digests, ECDSA) and sigstore-verify (bundles).
//!
//! A crate of its own above `toolhost-model` (its only Toolhost
//! dependency), with no wasm runtime: the runtime loads what it pulls, and
//! embedders reach it as `toolhost::oci` (feature `oci`).

#![deny(missing_docs)]

mod credentials;
mod keyless;
mod lock;
mod manifest;
mod pull;
mod push;
mod reference;
mod session;
mod sign;
mod store;
#[cfg(test)]
mod test_registry;
mod trust;
mod verify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
// The model crate under the names its modules had when this was a module
// of `toolhost`.
use toolhost_model::{self as model, error, files};

pub use credentials::Credentials;
pub use keyless::{KeylessSigner, MAX_SIGSTORE_BUNDLE_BYTES, SigstoreRoot};
pub use lock::{LOCK_FILE, Lock, Locked};
pub use reference::OciReference;
pub use sign::{PublicKey, SigningKey};
pub use trust::TrustPolicy;

use self::credentials::MAX_DOCKER_CONFIG_BYTES;
use self::store::Blobs;
use crate::error::OciError;
use crate::files::read_regular_file;

/// The largest manifest accepted: the size the distribution spec asks
/// registries to accept (4 MiB); a plugin's manifest is under 1 KiB.
pub const MAX_OCI_MANIFEST_BYTES: u64 = 4 << 20;

/// The largest wasm config blob accepted: it lists a few digests and names.
pub const MAX_OCI_CONFIG_BYTES: u64 = 1 << 20;

/// The largest signature payload accepted: cosign's is about 250 bytes.
pub const MAX_SIGNATURE_PAYLOAD_BYTES: u64 = 64 << 10;

/// Signatures checked per artifact: more is an attempt to make the host
/// fetch and verify without end.
pub const MAX_SIGNATURES: usize = 16;

/// The longest one pull (or push) may take, manifest to last layer byte:
/// a 256 MiB plugin at well under 1 MB/s.
pub const OCI_PULL_TIMEOUT: Duration = Duration::from_secs(600);

/// How long connecting to a registry may take.
pub const OCI_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a registry may send nothing while a response is read.
pub const OCI_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The wasm artifact's config media type (CNCF wasm OCI artifact layout).
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";

/// The wasm artifact's layer media type.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";

/// Annotations `toolhost push` writes (besides the OCI title and version).
pub const ANNOTATION_WIT_WORLD: &str = "dev.toolhost.wit-world";
/// The comma-separated tool names a pushed plugin registers.
pub const ANNOTATION_TOOLS: &str = "dev.toolhost.tools";

/// `sha256:HEX` of `bytes`.
fn sha256_digest(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    format!("sha256:{}", hex::encode(digest))
}

/// Where plugins come from and whom to trust: the local content store,
/// the trust policy, TLS roots, plain-HTTP registries, credentials and an
/// optional lock file. Give it to
/// `toolhost::HostBuilder::distribution` so
/// `oci://` paths load; use it alone to push, lock and inspect.
///
/// Talking to a registry needs a process-wide rustls crypto provider
/// (oci-client makes its own HTTP client, which takes the process's), and
/// the library installs none: install one first, e.g.
/// `rustls::crypto::ring::default_provider().install_default()`, as the
/// `toolhost` CLI does. Without one, pulls and pushes fail with
/// [`OciError::Registry`] saying so.
#[derive(Debug, Clone)]
pub struct Distribution {
    blobs: Blobs,
    trust: TrustPolicy,
    plain_http: Vec<String>,
    roots: Vec<Vec<u8>>,
    credentials: Credentials,
    lock: Option<(PathBuf, Lock)>,
    /// [`OCI_READ_TIMEOUT`], shorter in tests.
    read_timeout: Duration,
}

/// A plugin pulled, verified and stored, ready to compile.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Fetched {
    /// The reference it was named by.
    pub reference: OciReference,
    /// The manifest digest.
    pub digest: String,
    /// The stored, verified component (`application/wasm` layer).
    pub path: PathBuf,
    /// The fingerprint of the key whose signature verified, or `None` when
    /// its repository is allowed unsigned and it had no valid signature.
    pub signer: Option<String>,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
}

/// What `inspect` shows, nothing run and no layer pulled.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Inspection {
    /// The reference.
    pub reference: String,
    /// The manifest digest.
    pub digest: String,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The component layer's digest and size.
    pub layer: String,
    /// Its size in bytes, as the manifest declares it.
    pub size: u64,
    /// Each signature found: its signer's fingerprint if a trusted key
    /// verifies it, else `None` (an unknown key, or not for this digest).
    pub signatures: Vec<Option<String>>,
}

/// A push's result.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Pushed {
    /// The reference pushed to.
    pub reference: String,
    /// The manifest digest: pin it as `REFERENCE@DIGEST`.
    pub digest: String,
    /// The signing key's fingerprint, if signed.
    pub signer: Option<String>,
}

impl Distribution {
    /// A distribution whose content store is `store` (pulled blobs by
    /// digest), trusting nothing, with credentials from the environment
    /// ([`Credentials::from_environment`]; none if they cannot be read).
    pub fn new(store: impl Into<PathBuf>) -> Distribution {
        Distribution {
            blobs: Blobs::new(store.into()),
            trust: TrustPolicy::new(),
            plain_http: Vec::new(),
            roots: Vec::new(),
            credentials: Credentials::from_environment().unwrap_or_else(|e| {
                tracing::warn!("{e}; pulling anonymously");
                Credentials::none()
            }),
            lock: None,
            read_timeout: OCI_READ_TIMEOUT,
        }
    }

    /// Waits `limit` (not [`OCI_READ_TIMEOUT`]) for a silent registry.
    #[cfg(test)]
    fn read_timeout(mut self, limit: Duration) -> Self {
        self.read_timeout = limit;
        self
    }

    /// The trust policy signatures are checked against.
    pub fn trust(mut self, policy: TrustPolicy) -> Self {
        self.trust = policy;
        self
    }

    /// Reaches `registry` (host:port) over plain HTTP. Loopback registries
    /// always are; any other only when named here.
    pub fn plain_http(mut self, registry: impl Into<String>) -> Self {
        self.plain_http.push(registry.into());
        self
    }

    /// Also trusts the root certificates in this PEM file for HTTPS to
    /// registries (the CLI's `--http-ca`).
    pub fn root_certificates(mut self, pem: &Path) -> Result<Self, OciError> {
        let bytes =
            read_regular_file(pem, MAX_DOCKER_CONFIG_BYTES).map_err(|e| OciError::File {
                path: pem.to_owned(),
                reason: e.to_string(),
            })?;
        self.roots.push(bytes);
        Ok(self)
    }

    /// The registry credentials to use.
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// Locked mode (`--locked`): every tag must be in `lock` (read from
    /// `path`) and still name its digest; when the registry is unreachable
    /// the locked digest loads from the content store.
    pub fn locked(mut self, path: PathBuf, lock: Lock) -> Self {
        self.lock = Some((path, lock));
        self
    }
}
