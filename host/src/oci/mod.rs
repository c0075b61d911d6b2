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

mod keyless;
mod lock;
mod reference;
mod sign;
mod store;
mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt as _;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, RegistryOperation};
use serde::{Deserialize, Serialize};

pub use keyless::{KeylessSigner, MAX_SIGSTORE_BUNDLE_BYTES, SigstoreRoot};
pub use lock::{LOCK_FILE, Lock, Locked};
pub use reference::OciReference;
pub use sign::{PublicKey, SigningKey};
pub use trust::TrustPolicy;

use self::reference::{canonical_registry, is_digest};
use self::store::Blobs;
use crate::error::OciError;
use crate::files::read_regular_file;

/// The largest manifest accepted: the size the distribution spec asks
/// registries to accept (4 MiB); a plugin's manifest is under 1 KiB.
pub const MAX_OCI_MANIFEST_BYTES: u64 = 4 << 20;

/// The largest wasm config blob accepted: it lists a few digests and names.
pub const MAX_OCI_CONFIG_BYTES: u64 = 1 << 20;

/// Signatures found for one artifact: cosign simple-signing (payload,
/// signature) pairs and Sigstore bundles.
#[derive(Default)]
struct Signatures {
    simple: Vec<(Vec<u8>, Vec<u8>)>,
    bundles: Vec<Vec<u8>>,
}

impl Signatures {
    fn len(&self) -> usize {
        self.simple.len() + self.bundles.len()
    }
}

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

/// The OCI image manifest media type, the only manifest kind pulled.
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// The config media type of a cosign signature manifest.
const OCI_IMAGE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// Annotations `toolhost push` writes (besides the OCI title and version).
pub const ANNOTATION_WIT_WORLD: &str = "dev.toolhost.wit-world";
/// The comma-separated tool names a pushed plugin registers.
pub const ANNOTATION_TOOLS: &str = "dev.toolhost.tools";

/// `sha256:HEX` of `bytes`.
pub(crate) fn sha256_digest(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    format!("sha256:{}", hex(digest.as_ref()))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Registry credentials, each for one registry (`HOST[:PORT]`):
/// `TOOLHOST_REGISTRY_USERNAME` and `TOOLHOST_REGISTRY_PASSWORD` for the
/// registries `TOOLHOST_REGISTRY_HOSTS` lists (comma-separated), else the
/// registry's entry in Docker's `config.json` (`$DOCKER_CONFIG/config.json`
/// or `~/.docker/config.json`: `auth`, or `username` and `password`).
/// They are sent only to their registry, and only when it asks (a 401
/// challenge). Credential helpers are not run.
#[derive(Clone, Default)]
pub struct Credentials {
    registries: BTreeMap<String, (String, String)>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("registries", &self.registries.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The user and password `Credentials::from_environment` reads, and the
/// registries they are for: without that list they are sent nowhere, since
/// any reference (`oci://attacker.example/x`) could name the registry.
const USERNAME_VARIABLE: &str = "TOOLHOST_REGISTRY_USERNAME";
const PASSWORD_VARIABLE: &str = "TOOLHOST_REGISTRY_PASSWORD";
const HOSTS_VARIABLE: &str = "TOOLHOST_REGISTRY_HOSTS";

/// Said once per process, however often the environment is read.
static UNSCOPED_WARNING: std::sync::Once = std::sync::Once::new();

/// The largest Docker config file read.
const MAX_DOCKER_CONFIG_BYTES: u64 = 1 << 20;

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl Credentials {
    /// No credentials: anonymous pulls.
    pub fn none() -> Credentials {
        Credentials::default()
    }

    /// From the environment and Docker's config file, as documented on
    /// the type. A malformed config file is an error naming it. A user and
    /// password without `TOOLHOST_REGISTRY_HOSTS` are not used, and a
    /// warning (once) says so.
    pub fn from_environment() -> Result<Credentials, OciError> {
        let mut credentials = Credentials::default();
        let config = match std::env::var_os("DOCKER_CONFIG") {
            Some(dir) => Some(PathBuf::from(dir).join("config.json")),
            None => std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".docker").join("config.json")),
        };
        if let Some(path) = config.filter(|path| path.exists()) {
            credentials.registries = docker_config(&path)?;
        }
        let var = |name| std::env::var(name).ok();
        match (
            var(USERNAME_VARIABLE),
            var(PASSWORD_VARIABLE),
            var(HOSTS_VARIABLE),
        ) {
            (Some(user), Some(password), Some(hosts)) => {
                for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
                    credentials = credentials.with(host, user.clone(), password.clone());
                }
            }
            (Some(_), Some(_), None) => UNSCOPED_WARNING.call_once(|| {
                tracing::warn!(
                    "{USERNAME_VARIABLE} and {PASSWORD_VARIABLE} are not used: set {HOSTS_VARIABLE} to the registries they are for (HOST[:PORT], comma-separated), so that they are never sent to a registry a reference merely names"
                );
            }),
            _ => {}
        }
        Ok(credentials)
    }

    /// Uses `user` and `password` for `registry` (`HOST[:PORT]`) only.
    pub fn with(mut self, registry: impl Into<String>, user: String, password: String) -> Self {
        let registry = canonical_registry(&registry.into());
        self.registries.insert(registry, (user, password));
        self
    }

    fn auth(&self, registry: &str) -> RegistryAuth {
        match self.registries.get(&canonical_registry(registry)) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

fn docker_config(path: &Path) -> Result<BTreeMap<String, (String, String)>, OciError> {
    use base64::Engine as _;
    let file_error = |reason: String| OciError::File {
        path: path.to_owned(),
        reason,
    };
    let bytes =
        read_regular_file(path, MAX_DOCKER_CONFIG_BYTES).map_err(|e| file_error(e.to_string()))?;
    let config: DockerConfig = serde_json::from_slice(&bytes)
        .map_err(|e| file_error(format!("not a Docker config file: {e}")))?;
    let mut out = BTreeMap::new();
    for (registry, auth) in config.auths {
        // Keys are `host:port`, or URLs such as `https://index.docker.io/v1/`.
        let host = registry
            .trim_start_matches("https://")
            .trim_start_matches("http://");
        let host = canonical_registry(host.split('/').next().unwrap_or(host));
        let pair = match (auth.auth, auth.username, auth.password) {
            (Some(encoded), _, _) => {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .ok()
                    .and_then(|d| String::from_utf8(d).ok())
                    .ok_or_else(|| {
                        file_error(format!(
                            "the auth of {registry} is not base64 of user:password"
                        ))
                    })?;
                let (user, password) = decoded.split_once(':').ok_or_else(|| {
                    file_error(format!("the auth of {registry} is not user:password"))
                })?;
                (user.to_owned(), password.to_owned())
            }
            (None, Some(user), Some(password)) => (user, password),
            _ => continue,
        };
        out.insert(host, pair);
    }
    Ok(out)
}

/// Where plugins come from and whom to trust: the local content store,
/// the trust policy, TLS roots, plain-HTTP registries, credentials and an
/// optional lock file. Give it to
/// [`HostBuilder::distribution`](crate::HostBuilder::distribution) so
/// `oci://` paths load; use it alone to push, lock and inspect.
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

/// An OCI image manifest, as read from a registry (hostile: every field
/// checked before use).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    config: Descriptor,
    layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
}

impl Descriptor {
    fn of(media_type: &str, bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.to_owned(),
            digest: sha256_digest(bytes),
            size: bytes.len() as u64,
            annotations: BTreeMap::new(),
        }
    }

    fn client(&self) -> OciDescriptor {
        OciDescriptor {
            media_type: self.media_type.clone(),
            digest: self.digest.clone(),
            size: i64::try_from(self.size).unwrap_or(i64::MAX),
            ..OciDescriptor::default()
        }
    }
}

/// One operation on one reference: its client, credentials and whether the
/// registry has been found unreachable.
struct Session<'a> {
    reference: &'a OciReference,
    client: Client,
    /// Manifests are read with our own client, so their size is bounded
    /// while they arrive (oci-client reads a whole body first).
    http: reqwest::Client,
    scheme: &'static str,
    auth: RegistryAuth,
    /// Once the registry has challenged a manifest request (401): its pull
    /// token, or `None` when it takes basic authentication. Until then
    /// manifests are asked for anonymously.
    token: Option<Option<String>>,
    offline: Option<String>,
    /// How long the registry may send nothing ([`OCI_READ_TIMEOUT`]).
    read_timeout: Duration,
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

    /// Pulls (or finds in the content store) the plugin `reference`,
    /// verifies its digests and its signature against the trust policy
    /// (and the lock file), and stores its component of at most
    /// `max_layer` bytes. Nothing is compiled.
    pub async fn fetch(&self, reference: &str, max_layer: u64) -> Result<Fetched, OciError> {
        let parsed = OciReference::parse(reference)?;
        bounded(&parsed, self.fetch_unbounded(reference, &parsed, max_layer)).await
    }

    async fn fetch_unbounded(
        &self,
        text: &str,
        reference: &OciReference,
        max_layer: u64,
    ) -> Result<Fetched, OciError> {
        let mut session = self.session(reference).await?;
        let locked = self.locked_entry(text, reference)?;
        let digest = match (reference.digest(), locked) {
            (Some(digest), _) => digest.to_owned(),
            (None, Some(locked)) => match session.resolve().await {
                Ok((now, bytes)) if now == locked.digest => self.keep(now, &bytes)?,
                Ok((now, _)) => {
                    return Err(OciError::Moved {
                        reference: reference.to_string(),
                        locked: locked.digest.clone(),
                        now,
                    });
                }
                Err(Failure::Unreachable(why)) => {
                    session.offline = Some(why);
                    locked.digest.clone()
                }
                Err(failure) => return Err(failure.into_error(reference)),
            },
            (None, None) => {
                let (digest, bytes) = session
                    .resolve()
                    .await
                    .map_err(|f| f.into_error(reference))?;
                self.keep(digest, &bytes)?
            }
        };
        let manifest = self.manifest(&mut session, &digest).await?;
        let layer = wasm_layer(reference, &digest, &manifest, max_layer)?;
        let signer = self.verify(&mut session, &digest).await?;
        if let Some(locked) = locked.and_then(|l| l.signer.as_ref())
            && Some(locked) != signer.as_ref()
        {
            return Err(OciError::LockedSigner {
                reference: reference.to_string(),
                digest,
                locked: locked.clone(),
                found: signer,
            });
        }
        let config = self
            .blob(
                &mut session,
                &manifest.config,
                MAX_OCI_CONFIG_BYTES,
                "config",
            )
            .await?;
        if !serde_json::from_slice::<serde_json::Value>(&config).is_ok_and(|v| v.is_object()) {
            return Err(not_a_plugin(
                reference,
                &digest,
                "its config is not a JSON object",
            ));
        }
        let path = self.layer(&mut session, &layer, max_layer).await?;
        Ok(Fetched {
            reference: reference.clone(),
            digest,
            path,
            signer,
            annotations: manifest.annotations,
        })
    }

    /// Shows a plugin's digest, annotations and signatures without pulling
    /// its component or running anything.
    pub async fn inspect(&self, reference: &str) -> Result<Inspection, OciError> {
        let parsed = OciReference::parse(reference)?;
        bounded(&parsed, async {
            let mut session = self.session(&parsed).await?;
            let digest = self.resolve(&mut session).await?;
            let manifest = self.manifest(&mut session, &digest).await?;
            let layer = wasm_layer(&parsed, &digest, &manifest, u64::MAX)?;
            let signatures = self.signatures(&mut session, &digest).await?;
            let signatures = self.signers(&parsed, &digest, &signatures);
            Ok(Inspection {
                reference: parsed.to_string(),
                digest,
                annotations: manifest.annotations,
                layer: layer.digest,
                size: layer.size,
                signatures,
            })
        })
        .await
    }

    /// Pushes `wasm` to `reference` (which must name a tag) in the wasm
    /// OCI artifact layout with `annotations` on its manifest, and, given
    /// `key`, a cosign-compatible signature of the manifest digest.
    pub async fn push(
        &self,
        wasm: &[u8],
        reference: &str,
        annotations: BTreeMap<String, String>,
        key: Option<&SigningKey>,
    ) -> Result<Pushed, OciError> {
        let parsed = OciReference::parse(reference)?;
        if parsed.tag().is_none() || parsed.digest().is_some() {
            return Err(OciError::InvalidReference {
                reference: reference.to_owned(),
                reason: "a push names a tag, not a digest".into(),
            });
        }
        bounded(&parsed, async {
            let mut session = self.session(&parsed).await?;
            session.authenticate(RegistryOperation::Push).await?;
            let layer = Descriptor::of(WASM_LAYER_MEDIA_TYPE, wasm);
            let (imports, exports) = world(wasm);
            let config = serde_json::to_vec(&serde_json::json!({
                // A fixed time, so a push of the same component is the same
                // manifest (reproducible, and re-signable).
                "created": "1970-01-01T00:00:00Z",
                "architecture": "wasm",
                "os": "wasip2",
                "layerDigests": [layer.digest],
                "component": {"imports": imports, "exports": exports},
            }))
            .map_err(|e| session.refused(e.to_string()))?;
            let config_descriptor = Descriptor::of(WASM_CONFIG_MEDIA_TYPE, &config);
            session.push_blob(&config_descriptor, config).await?;
            session.push_blob(&layer, wasm.to_vec()).await?;
            let manifest = Manifest {
                schema_version: 2,
                media_type: Some(OCI_MANIFEST.into()),
                config: config_descriptor,
                layers: vec![layer],
                annotations,
            };
            let digest = session.push_manifest(&parsed, &manifest).await?;
            let signer = match key {
                Some(key) => Some(self.sign_digest(&mut session, &digest, key).await?),
                None => None,
            };
            Ok(Pushed {
                reference: parsed.to_string(),
                digest,
                signer,
            })
        })
        .await
    }

    /// The exact bytes of `reference`'s manifest and their digest: what a
    /// keyless signature signs (`python -m sigstore sign`, `cosign
    /// sign-blob --bundle`), to attach with [`Distribution::attach_bundle`].
    pub async fn manifest_bytes(&self, reference: &str) -> Result<(String, Vec<u8>), OciError> {
        let parsed = OciReference::parse(reference)?;
        bounded(&parsed, async {
            let mut session = self.session(&parsed).await?;
            let digest = self.resolve(&mut session).await?;
            self.manifest(&mut session, &digest).await?;
            let bytes = self
                .blobs
                .read(&digest, MAX_OCI_MANIFEST_BYTES)
                .ok_or_else(|| session.refused("the stored manifest cannot be read".into()))?;
            Ok((digest, bytes))
        })
        .await
    }

    /// Attaches a Sigstore bundle (JSON) that signs `reference`'s manifest
    /// to its signature manifest, keeping the signatures already there. The
    /// signer is named when this distribution's trust policy trusts it.
    pub async fn attach_bundle(&self, reference: &str, bundle: &[u8]) -> Result<Pushed, OciError> {
        let parsed = OciReference::parse(reference)?;
        bounded(&parsed, async {
            let mut session = self.session(&parsed).await?;
            session.authenticate(RegistryOperation::Push).await?;
            let digest = self.resolve(&mut session).await?;
            if bundle.len() as u64 > MAX_SIGSTORE_BUNDLE_BYTES {
                return Err(too_large(
                    &parsed,
                    &digest,
                    "Sigstore bundle",
                    MAX_SIGSTORE_BUNDLE_BYTES,
                ));
            }
            keyless::check_attachable(bundle, &digest).map_err(|reason| {
                OciError::BadSignature {
                    reference: parsed.to_string(),
                    digest: digest.clone(),
                    reason: format!("bad bundle: {reason}"),
                }
            })?;
            let layer = Descriptor::of(keyless::BUNDLE_MEDIA_TYPE, bundle);
            self.add_signature(&mut session, &digest, layer, bundle.to_vec())
                .await?;
            let signer = keyless::verify_any(
                &self.trust.keyless(&parsed.repository_path()),
                bundle,
                &digest,
                self.bound(&parsed),
            )
            .ok();
            Ok(Pushed {
                reference: parsed.to_string(),
                digest,
                signer,
            })
        })
        .await
    }

    /// The manifest digest `session`'s reference names: its own, or what
    /// its tag resolves to (that manifest stored).
    async fn resolve(&self, session: &mut Session<'_>) -> Result<String, OciError> {
        let reference = session.reference;
        match reference.digest() {
            Some(digest) => Ok(digest.to_owned()),
            None => {
                let (digest, bytes) = session
                    .resolve()
                    .await
                    .map_err(|f| f.into_error(reference))?;
                self.keep(digest, &bytes)
            }
        }
    }

    /// For each signature found, its signer if one trusted for
    /// `reference`'s repository verifies it (as loading would), else `None`.
    fn signers(
        &self,
        reference: &OciReference,
        digest: &str,
        found: &Signatures,
    ) -> Vec<Option<String>> {
        let repository = reference.repository_path();
        let keys = self.trust.keys(&repository);
        let keyless = self.trust.keyless(&repository);
        let bound = self.bound(reference);
        let simple = found.simple.iter().map(|(payload, signature)| {
            keys.iter()
                .find(|k| {
                    k.verifies(payload, signature)
                        && sign::check_payload(payload, digest, bound).is_ok()
                })
                .map(|k| k.fingerprint().to_owned())
        });
        let bundles = found
            .bundles
            .iter()
            .map(|bundle| keyless::verify_any(&keyless, bundle, digest, bound).ok());
        simple.chain(bundles).collect()
    }

    /// The reference whose repository a key-pair signature (or a keyless
    /// attestation) must have been made for, unless the trust policy
    /// accepts any for it.
    fn bound<'r>(&self, reference: &'r OciReference) -> Option<&'r OciReference> {
        let any = self
            .trust
            .any_reference_allowed(&reference.repository_path());
        (!any).then_some(reference)
    }

    /// Signs the artifact `reference` names (already pushed) with `key`,
    /// keeping the signatures already there.
    pub async fn sign(&self, reference: &str, key: &SigningKey) -> Result<Pushed, OciError> {
        let parsed = OciReference::parse(reference)?;
        bounded(&parsed, async {
            let mut session = self.session(&parsed).await?;
            session.authenticate(RegistryOperation::Push).await?;
            let digest = self.resolve(&mut session).await?;
            let signer = self.sign_digest(&mut session, &digest, key).await?;
            Ok(Pushed {
                reference: parsed.to_string(),
                digest,
                signer: Some(signer),
            })
        })
        .await
    }

    /// Adds a signature of the manifest `digest` by `key` to its signature
    /// manifest.
    async fn sign_digest(
        &self,
        session: &mut Session<'_>,
        digest: &str,
        key: &SigningKey,
    ) -> Result<String, OciError> {
        let payload = sign::payload(&session.reference.repository_path(), digest);
        let signature = key.sign(&payload).map_err(|e| session.refused(e))?;
        let mut layer = Descriptor::of(sign::SIMPLE_SIGNING, &payload);
        layer
            .annotations
            .insert(sign::SIGNATURE_ANNOTATION.into(), sign::encode(&signature));
        self.add_signature(session, digest, layer, payload).await?;
        Ok(key.public_key().fingerprint().to_owned())
    }

    /// Adds `layer` (its content `blob`) to the signature manifest of the
    /// manifest `digest` (`sha256-HEX.sig`), keeping the layers already there.
    async fn add_signature(
        &self,
        session: &mut Session<'_>,
        digest: &str,
        layer: Descriptor,
        blob: Vec<u8>,
    ) -> Result<(), OciError> {
        let reference = session.reference;
        let tag = reference.at_tag(&sign::signature_tag(digest));
        let mut layers = match session.manifest_bytes(&tag, "signature manifest").await {
            Ok(bytes) => serde_json::from_slice::<Manifest>(&bytes)
                .map(|m| m.layers)
                .unwrap_or_default(),
            Err(Failure::NotFound) => Vec::new(),
            Err(failure) => return Err(failure.into_error(reference)),
        };
        layers.retain(|l| l.digest != layer.digest);
        layers.push(layer);
        let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "",
            "os": "",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }))
        .map_err(|e| session.refused(e.to_string()))?;
        let config_descriptor = Descriptor::of(OCI_IMAGE_CONFIG, &config);
        session.push_blob(&config_descriptor, config).await?;
        session.push_blob(&layers[layers.len() - 1], blob).await?;
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.into()),
            config: config_descriptor,
            layers,
            annotations: BTreeMap::new(),
        };
        session.push_manifest(&tag, &manifest).await?;
        Ok(())
    }

    /// A session for `reference`'s registry: HTTPS, or plain HTTP when the
    /// registry is named by `plain_http`, or is on loopback and does not
    /// speak HTTPS (as Docker treats 127.0.0.0/8: HTTPS tried first).
    async fn session<'a>(&self, reference: &'a OciReference) -> Result<Session<'a>, OciError> {
        // reqwest is built with rustls but no provider of its own.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = self.http_client(reference)?;
        let plain = self.plain_http.iter().any(|r| r == reference.registry())
            || (reference.on_loopback() && !speaks_https(&http, reference).await);
        let config = ClientConfig {
            protocol: if plain {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            extra_root_certificates: self
                .roots
                .iter()
                .map(|pem| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.clone(),
                })
                .collect(),
            platform_resolver: None,
            connect_timeout: Some(OCI_CONNECT_TIMEOUT),
            read_timeout: Some(self.read_timeout),
            ..ClientConfig::default()
        };
        Ok(Session {
            reference,
            client: Client::new(config),
            http,
            scheme: if plain { "http" } else { "https" },
            auth: self.credentials.auth(reference.registry()),
            token: None,
            offline: None,
            read_timeout: self.read_timeout,
        })
    }

    /// The client manifests are read with: the registry CAs trusted, no
    /// redirects followed.
    fn http_client(&self, reference: &OciReference) -> Result<reqwest::Client, OciError> {
        let mut http = reqwest::Client::builder()
            .connect_timeout(OCI_CONNECT_TIMEOUT)
            .read_timeout(self.read_timeout)
            .redirect(reqwest::redirect::Policy::none());
        for pem in &self.roots {
            let certificate =
                reqwest::Certificate::from_pem(pem).map_err(|e| OciError::Registry {
                    reference: reference.to_string(),
                    reason: format!("a --http-ca certificate is not PEM: {e}"),
                })?;
            http = http.add_root_certificate(certificate);
        }
        http.build().map_err(|e| OciError::Registry {
            reference: reference.to_string(),
            reason: error_chain(&e),
        })
    }

    /// The lock file's pin of `text`, in locked mode (where a tag without
    /// one is refused).
    fn locked_entry(
        &self,
        text: &str,
        reference: &OciReference,
    ) -> Result<Option<&Locked>, OciError> {
        let Some((path, lock)) = &self.lock else {
            return Ok(None);
        };
        match lock.get(text) {
            Some(locked) => Ok(Some(locked)),
            None if reference.digest().is_some() => Ok(None),
            None => Err(OciError::NotLocked {
                reference: text.to_owned(),
                lock: path.clone(),
            }),
        }
    }

    /// Stores the manifest `bytes` a tag resolved to (`digest` is their
    /// SHA-256); the digest.
    fn keep(&self, digest: String, bytes: &[u8]) -> Result<String, OciError> {
        self.blobs.write(&digest, bytes)?;
        Ok(digest)
    }

    /// The manifest `digest`: from the store, else pulled, bounded and
    /// checked against the digest, then stored.
    async fn manifest(
        &self,
        session: &mut Session<'_>,
        digest: &str,
    ) -> Result<Manifest, OciError> {
        let reference = session.reference;
        let bytes = match self.blobs.read(digest, MAX_OCI_MANIFEST_BYTES) {
            Some(bytes) => bytes,
            None => {
                let by_digest = OciReference::parse(&format!(
                    "oci://{}/{}@{digest}",
                    reference.registry(),
                    reference.repository()
                ))?;
                let bytes = session
                    .manifest_bytes(&by_digest, "manifest")
                    .await
                    .map_err(|f| f.into_error(reference))?;
                check_digest(reference, "manifest", digest, &bytes)?;
                self.blobs.write(digest, &bytes)?;
                bytes
            }
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            not_a_plugin(
                reference,
                digest,
                &format!("its manifest is not an OCI image manifest ({e})"),
            )
        })
    }

    /// Verifies the signatures of the manifest `digest` against the trust
    /// policy: the signer's fingerprint, or `None` when unsigned is allowed.
    async fn verify(
        &self,
        session: &mut Session<'_>,
        digest: &str,
    ) -> Result<Option<String>, OciError> {
        let reference = session.reference;
        let repository = reference.repository_path();
        let keys = self.trust.keys(&repository);
        let keyless = self.trust.keyless(&repository);
        let unsigned = self.trust.unsigned_allowed(&repository);
        if keys.is_empty() && keyless.is_empty() {
            return if unsigned {
                Ok(None)
            } else {
                Err(OciError::NoTrustedKey {
                    reference: reference.to_string(),
                    digest: digest.to_owned(),
                    repository,
                })
            };
        }
        let signatures = self.signatures(session, digest).await?;
        let bound = self.bound(reference);
        let mut bad = None;
        for (payload, signature) in &signatures.simple {
            if let Some(key) = keys.iter().find(|k| k.verifies(payload, signature)) {
                match sign::check_payload(payload, digest, bound) {
                    Ok(()) => return Ok(Some(key.fingerprint().to_owned())),
                    Err(reason) => bad = Some(reason),
                }
            }
        }
        let mut other_signers = Vec::new();
        for bundle in &signatures.bundles {
            match keyless::verify_any(&keyless, bundle, digest, bound) {
                Ok(signer) => return Ok(Some(signer)),
                Err(keyless::Failure::WrongSigner(why)) => other_signers.push(why),
                Err(keyless::Failure::BadBundle(why)) => bad = Some(format!("bad bundle: {why}")),
            }
        }
        if unsigned {
            return Ok(None);
        }
        let (reference, digest) = (reference.to_string(), digest.to_owned());
        Err(match bad {
            Some(reason) => OciError::BadSignature {
                reference,
                digest,
                reason,
            },
            None if signatures.len() == 0 => OciError::Unsigned {
                reference,
                digest,
                repository,
            },
            None => OciError::WrongSigner {
                reference,
                digest,
                repository,
                signatures: signatures.len(),
                keyless: other_signers,
            },
        })
    }

    /// The signatures in the manifest `digest`'s cosign signature
    /// manifest: pulled when the registry is reachable, else the ones stored
    /// when it last was. At most [`MAX_SIGNATURES`].
    async fn signatures(
        &self,
        session: &mut Session<'_>,
        digest: &str,
    ) -> Result<Signatures, OciError> {
        let reference = session.reference;
        let tag = reference.at_tag(&sign::signature_tag(digest));
        let bytes = match session.offline {
            Some(_) => None,
            None => match session.manifest_bytes(&tag, "signature manifest").await {
                Ok(bytes) => {
                    let found = sha256_digest(&bytes);
                    self.blobs.write(&found, &bytes)?;
                    self.blobs.set_signatures(digest, &found)?;
                    Some(bytes)
                }
                Err(Failure::NotFound) => return Ok(Signatures::default()),
                Err(Failure::Unreachable(why)) => {
                    session.offline = Some(why);
                    None
                }
                Err(failure) => return Err(failure.into_error(reference)),
            },
        };
        let bytes = match bytes {
            Some(bytes) => bytes,
            None => match self
                .blobs
                .signatures(digest)
                .and_then(|d| self.blobs.read(&d, MAX_OCI_MANIFEST_BYTES))
            {
                Some(bytes) => bytes,
                None => return Ok(Signatures::default()),
            },
        };
        let manifest: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| OciError::BadSignature {
                reference: reference.to_string(),
                digest: digest.to_owned(),
                reason: format!("its signature manifest is not an OCI image manifest ({e})"),
            })?;
        let mut out = Signatures::default();
        for layer in manifest
            .layers
            .iter()
            .filter(|l| l.media_type == sign::SIMPLE_SIGNING || keyless::is_bundle(&l.media_type))
            .take(MAX_SIGNATURES)
        {
            if keyless::is_bundle(&layer.media_type) {
                let bundle = self
                    .blob(session, layer, MAX_SIGSTORE_BUNDLE_BYTES, "Sigstore bundle")
                    .await?;
                out.bundles.push(bundle);
                continue;
            }
            let Some(signature) = layer
                .annotations
                .get(sign::SIGNATURE_ANNOTATION)
                .and_then(|s| sign::decode(s))
            else {
                continue;
            };
            let payload = self
                .blob(
                    session,
                    layer,
                    MAX_SIGNATURE_PAYLOAD_BYTES,
                    "signature payload",
                )
                .await?;
            out.simple.push((payload, signature));
        }
        Ok(out)
    }

    /// A small blob (config, payload) in memory: stored, else pulled.
    async fn blob(
        &self,
        session: &mut Session<'_>,
        descriptor: &Descriptor,
        max: u64,
        what: &'static str,
    ) -> Result<Vec<u8>, OciError> {
        let reference = session.reference;
        check_descriptor(reference, descriptor, max, what)?;
        if let Some(bytes) = self.blobs.read(&descriptor.digest, max) {
            return Ok(bytes);
        }
        let mut bytes = Vec::new();
        session.pull(descriptor, max, what, &mut bytes).await?;
        self.blobs.write(&descriptor.digest, &bytes)?;
        Ok(bytes)
    }

    /// The component layer's stored file: stored, else streamed to a
    /// temporary file, counted and hashed on the way, and moved into place
    /// only when complete and matching its digest.
    async fn layer(
        &self,
        session: &mut Session<'_>,
        descriptor: &Descriptor,
        max: u64,
    ) -> Result<PathBuf, OciError> {
        if self.blobs.has(&descriptor.digest, max) {
            return Ok(self.blobs.path(&descriptor.digest));
        }
        let mut file = self.blobs.temp()?;
        session
            .pull(descriptor, max, "layer", file.as_file_mut())
            .await?;
        self.blobs.persist(file, &descriptor.digest)
    }
}

/// How a registry request failed: unreachable (where a locked or pinned
/// digest may load from the store), not found (a missing signature tag is
/// no signature), or refused with an error.
enum Failure {
    Unreachable(String),
    NotFound,
    Refused(OciError),
}

impl Failure {
    fn into_error(self, reference: &OciReference) -> OciError {
        match self {
            Failure::Unreachable(reason) => OciError::Offline {
                reference: reference.to_string(),
                reason,
            },
            Failure::NotFound => OciError::Registry {
                reference: reference.to_string(),
                reason: "the registry has no such manifest or repository".into(),
            },
            Failure::Refused(e) => e,
        }
    }
}

impl Session<'_> {
    fn refused(&self, reason: String) -> OciError {
        OciError::Registry {
            reference: self.reference.to_string(),
            reason,
        }
    }

    fn failure(&self, e: OciDistributionError) -> Failure {
        let missing = |code: &OciErrorCode| {
            matches!(
                code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NotFound | OciErrorCode::NameUnknown
            )
        };
        match e {
            OciDistributionError::RequestError(e) if unreachable(&e) => {
                Failure::Unreachable(error_chain(&e))
            }
            OciDistributionError::RegistryError { envelope, .. }
                if envelope.errors.iter().any(|e| missing(&e.code)) =>
            {
                Failure::NotFound
            }
            OciDistributionError::ServerError { code: 404, .. } => Failure::NotFound,
            OciDistributionError::UnauthorizedError { .. } => Failure::Refused(self.unauthorized()),
            other => Failure::Refused(self.refused(error_chain(&other))),
        }
    }

    /// The registry answered 401 to what credentials Toolhost had for it.
    fn unauthorized(&self) -> OciError {
        let registry = self.reference.registry();
        self.refused(format!(
            "it answered 401 Unauthorized: it wants credentials for {registry} that Toolhost was not given, or refused the ones given; log in (`docker login {registry}`) or set {USERNAME_VARIABLE}, {PASSWORD_VARIABLE} and {HOSTS_VARIABLE}={registry}"
        ))
    }

    /// The registry went silent for the read timeout while `descriptor`
    /// was arriving.
    fn silent(&self, what: &str, descriptor: &Descriptor) -> OciError {
        self.refused(format!(
            "it timed out: nothing arrived for {} (OCI_READ_TIMEOUT) while its {what} {} was being pulled, so the pull was abandoned; retry, and if it recurs check the registry and the network to it",
            humantime::format_duration(self.read_timeout),
            descriptor.digest
        ))
    }

    async fn authenticate(&self, operation: RegistryOperation) -> Result<(), OciError> {
        self.client
            .auth(&self.reference.client(None), &self.auth, operation)
            .await
            .map(|_| ())
            .map_err(|e| self.failure(e).into_error(self.reference))
    }

    /// The digest the reference's tag names now, and the manifest's
    /// bytes (whose SHA-256 it is: a registry's digest header is not
    /// trusted).
    async fn resolve(&mut self) -> Result<(String, Vec<u8>), Failure> {
        let bytes = self.manifest_bytes(self.reference, "manifest").await?;
        Ok((sha256_digest(&bytes), bytes))
    }

    /// Answers the registry's challenge, keeping its pull token, or `None`
    /// for basic authentication (oci-client reads the challenge of
    /// `GET /v2/`, asks the token service with the credentials, and keeps
    /// the token for blob pulls too).
    async fn challenged(&mut self) -> Result<(), Failure> {
        let token = self
            .client
            .auth(
                &self.reference.client(None),
                &self.auth,
                RegistryOperation::Pull,
            )
            .await
            .map_err(|e| self.failure(e))?;
        self.token = Some(token);
        Ok(())
    }

    /// A manifest request, with the token or the credentials once the
    /// registry has challenged.
    fn manifest_request(&self, url: &str) -> reqwest::RequestBuilder {
        let request = self
            .http
            .get(url)
            .header(http::header::ACCEPT, OCI_MANIFEST);
        match (&self.token, &self.auth) {
            (Some(Some(token)), _) => request.bearer_auth(token),
            (Some(None), RegistryAuth::Basic(user, password)) => {
                request.basic_auth(user, Some(password))
            }
            _ => request,
        }
    }

    /// The manifest `reference` names, read with a bound: refused as soon
    /// as it passes [`MAX_OCI_MANIFEST_BYTES`].
    async fn manifest_bytes(
        &mut self,
        reference: &OciReference,
        what: &'static str,
    ) -> Result<Vec<u8>, Failure> {
        let url = format!(
            "{}://{}/v2/{}/manifests/{}",
            self.scheme,
            reference.registry(),
            reference.repository(),
            reference.digest().or(reference.tag()).unwrap_or_default()
        );
        let named = self.reference;
        let unreachable = move |e: reqwest::Error| {
            if unreachable(&e) {
                Failure::Unreachable(error_chain(&e))
            } else {
                Failure::Refused(OciError::Registry {
                    reference: named.to_string(),
                    reason: error_chain(&e),
                })
            }
        };
        let mut response = self
            .manifest_request(&url)
            .send()
            .await
            .map_err(unreachable)?;
        // Credentials go only in answer to this registry's own challenge,
        // never unasked: a registry that does not ask gets none.
        if response.status() == reqwest::StatusCode::UNAUTHORIZED && self.token.is_none() {
            self.challenged().await?;
            if matches!(
                (&self.token, &self.auth),
                (Some(Some(_)), _) | (_, RegistryAuth::Basic(..))
            ) {
                response = self
                    .manifest_request(&url)
                    .send()
                    .await
                    .map_err(unreachable)?;
            }
        }
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(Failure::NotFound);
        }
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(Failure::Refused(self.unauthorized()));
        }
        if !status.is_success() {
            return Err(Failure::Refused(
                self.refused(format!("GET of the {what} answered {status}")),
            ));
        }
        let digest = reference.digest().unwrap_or("(by tag)");
        let too_large = || {
            Failure::Refused(too_large(
                self.reference,
                digest,
                what,
                MAX_OCI_MANIFEST_BYTES,
            ))
        };
        if response
            .content_length()
            .is_some_and(|n| n > MAX_OCI_MANIFEST_BYTES)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if (bytes.len() + chunk.len()) as u64 > MAX_OCI_MANIFEST_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    /// Streams the blob `descriptor` into `out`, refusing it as soon as it
    /// passes its declared size or `max`, and checking its digest.
    async fn pull(
        &mut self,
        descriptor: &Descriptor,
        max: u64,
        what: &'static str,
        out: &mut impl std::io::Write,
    ) -> Result<(), OciError> {
        let reference = self.reference;
        if let Some(why) = &self.offline {
            return Err(OciError::Offline {
                reference: reference.to_string(),
                reason: why.clone(),
            });
        }
        self.client
            .store_auth_if_needed(reference.registry(), &self.auth)
            .await;
        let mut stream = self
            .client
            .pull_blob_stream(&reference.client(None), &descriptor.client())
            .await
            .map_err(|e| self.failure(e).into_error(reference))?;
        let limit = descriptor.size.min(max);
        if stream.content_length.is_some_and(|n| n > limit) {
            return Err(too_large(reference, &descriptor.digest, what, limit));
        }
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        let mut total = 0u64;
        let store_error = |e: std::io::Error| OciError::Store {
            path: PathBuf::from(&descriptor.digest),
            reason: e.to_string(),
        };
        while let Some(chunk) = stream.stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                // oci-client's own digest check ends the stream with an
                // error (whatever the length, and against the registry's
                // digest header when it names another); ours below decides,
                // naming both digests.
                Err(e) if is_digest_failure(&e) => break,
                Err(e) if timed_out(&e) => return Err(self.silent(what, descriptor)),
                Err(e) => return Err(self.refused(format!("reading its {what}: {e}"))),
            };
            total += chunk.len() as u64;
            if total > limit {
                return Err(too_large(reference, &descriptor.digest, what, limit));
            }
            context.update(&chunk);
            out.write_all(&chunk).map_err(store_error)?;
        }
        let hex: String = context
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let actual = format!("sha256:{hex}");
        if actual != descriptor.digest {
            return Err(OciError::DigestMismatch {
                reference: reference.to_string(),
                what,
                expected: descriptor.digest.clone(),
                actual,
            });
        }
        out.flush().map_err(store_error)
    }

    async fn push_blob(&self, descriptor: &Descriptor, bytes: Vec<u8>) -> Result<(), OciError> {
        let image = self.reference.client(None);
        if self
            .client
            .blob_exists(&image, &descriptor.digest)
            .await
            .unwrap_or(false)
        {
            return Ok(());
        }
        self.client
            .push_blob(&image, bytes, &descriptor.digest)
            .await
            .map(|_| ())
            .map_err(|e| self.failure(e).into_error(self.reference))
    }

    /// Pushes `manifest` to `reference` (a tag); its digest.
    async fn push_manifest(
        &self,
        reference: &OciReference,
        manifest: &Manifest,
    ) -> Result<String, OciError> {
        let bytes = serde_json::to_vec(manifest).map_err(|e| self.refused(e.to_string()))?;
        let digest = sha256_digest(&bytes);
        self.client
            .push_manifest_raw(
                &reference.client(None),
                bytes,
                http::HeaderValue::from_static(OCI_MANIFEST),
            )
            .await
            .map_err(|e| self.failure(e).into_error(self.reference))?;
        Ok(digest)
    }
}

/// Whether a loopback registry answers the distribution API's base check
/// (`GET /v2/`) over HTTPS, or does not answer it over plain HTTP either
/// (then HTTPS, whose error says more, and an unreachable registry stays
/// unreachable).
async fn speaks_https(http: &reqwest::Client, reference: &OciReference) -> bool {
    let base = |scheme: &str| format!("{scheme}://{}/v2/", reference.registry());
    if http.get(base("https")).send().await.is_ok() {
        return true;
    }
    let answered = |status: reqwest::StatusCode| {
        status.is_success() || status == reqwest::StatusCode::UNAUTHORIZED
    };
    !matches!(http.get(base("http")).send().await, Ok(r) if answered(r.status()))
}

/// The component's top-level import and export names, as the wasm OCI
/// config lists them (the caller has loaded it, so it parses; a part that
/// does not is left out).
fn world(wasm: &[u8]) -> (Vec<String>, Vec<String>) {
    use wasmparser::{Parser, Payload};
    let (mut imports, mut exports, mut depth) = (Vec::new(), Vec::new(), 0usize);
    for payload in Parser::new(0).parse_all(wasm).map_while(Result::ok) {
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                imports.extend(reader.into_iter().flatten().map(|i| i.name.name.to_owned()));
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                exports.extend(reader.into_iter().flatten().map(|e| e.name.name.to_owned()));
            }
            _ => {}
        }
    }
    (imports, exports)
}

/// Runs a pull or push within [`OCI_PULL_TIMEOUT`].
async fn bounded<T>(
    reference: &OciReference,
    work: impl Future<Output = Result<T, OciError>>,
) -> Result<T, OciError> {
    tokio::time::timeout(OCI_PULL_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| {
            Err(OciError::TimedOut {
                reference: reference.to_string(),
                limit: OCI_PULL_TIMEOUT,
            })
        })
}

/// The manifest's one `application/wasm` layer, checked: the wasm
/// artifact layout, a sane digest, within `max` bytes.
fn wasm_layer(
    reference: &OciReference,
    digest: &str,
    manifest: &Manifest,
    max: u64,
) -> Result<Descriptor, OciError> {
    if manifest.schema_version != 2 {
        return Err(not_a_plugin(
            reference,
            digest,
            "its manifest's schemaVersion is not 2",
        ));
    }
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(not_a_plugin(
            reference,
            digest,
            &format!(
                "its config's media type is not {WASM_CONFIG_MEDIA_TYPE} (a container image, not a wasm component?)"
            ),
        ));
    }
    check_descriptor(reference, &manifest.config, MAX_OCI_CONFIG_BYTES, "config")?;
    let mut wasm = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER_MEDIA_TYPE);
    match (wasm.next(), wasm.next()) {
        (Some(layer), None) => {
            check_descriptor(reference, layer, max, "layer")?;
            Ok(layer.clone())
        }
        _ => Err(not_a_plugin(
            reference,
            digest,
            &format!("it has not exactly one {WASM_LAYER_MEDIA_TYPE} layer"),
        )),
    }
}

/// A descriptor's digest is `sha256:HEX` (it names a file) and its size
/// within `max`.
fn check_descriptor(
    reference: &OciReference,
    descriptor: &Descriptor,
    max: u64,
    what: &'static str,
) -> Result<(), OciError> {
    if !is_digest(&descriptor.digest) {
        let digest: String = descriptor.digest.chars().take(80).collect();
        return Err(not_a_plugin(
            reference,
            &digest,
            &format!("its {what} is named by a digest that is not sha256:HEX"),
        ));
    }
    check_size(reference, &descriptor.digest, what, descriptor.size, max)
}

fn check_size(
    reference: &OciReference,
    digest: &str,
    what: &'static str,
    size: u64,
    max: u64,
) -> Result<(), OciError> {
    if size > max {
        return Err(too_large(reference, digest, what, max));
    }
    Ok(())
}

fn check_digest(
    reference: &OciReference,
    what: &'static str,
    expected: &str,
    bytes: &[u8],
) -> Result<(), OciError> {
    let actual = sha256_digest(bytes);
    if actual != expected {
        return Err(OciError::DigestMismatch {
            reference: reference.to_string(),
            what,
            expected: expected.to_owned(),
            actual,
        });
    }
    Ok(())
}

fn too_large(reference: &OciReference, digest: &str, what: &'static str, limit: u64) -> OciError {
    OciError::TooLarge {
        reference: reference.to_string(),
        digest: digest.to_owned(),
        what,
        limit,
    }
}

fn not_a_plugin(reference: &OciReference, digest: &str, reason: &str) -> OciError {
    OciError::NotAPlugin {
        reference: reference.to_string(),
        digest: digest.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Whether a request failed for want of a registry (no connection, no
/// answer in time), not for a TLS failure (an untrusted certificate is the
/// registry refused, not offline).
fn unreachable(e: &reqwest::Error) -> bool {
    if !(e.is_connect() || e.is_timeout()) {
        return false;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = source {
        if tls_failure(cause) {
            return false;
        }
        source = cause.source();
    }
    true
}

/// Whether `e` is a TLS error, itself or inside (nested) I/O errors.
fn tls_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    if e.is::<rustls::Error>() {
        return true;
    }
    e.downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
        .is_some_and(|inner| tls_failure(inner))
}

/// Whether a blob stream ended with oci-client's digest check failing.
fn is_digest_failure(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<oci_client::errors::DigestError>())
}

/// Whether `e` is a read that timed out, itself or inside (nested) I/O
/// errors (oci-client wraps reqwest's body errors in one).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(e) = e.downcast_ref::<reqwest::Error>() {
        return e.is_timeout();
    }
    e.downcast_ref::<std::io::Error>().is_some_and(|io| {
        io.kind() == std::io::ErrorKind::TimedOut
            || io.get_ref().is_some_and(|inner| timed_out(inner))
    })
}

/// An error and its sources on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A hostile registry on loopback: answers `GET /v2/` with 200 and
    /// every other request with `answer(path)` (a whole HTTP response; one
    /// shorter than its `Content-Length` is left open and silent, as a
    /// registry that stalls), recording each request's head.
    async fn hostile(
        answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static,
    ) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (seen, answer) = (requests.clone(), Arc::new(answer));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (seen, answer) = (seen.clone(), answer.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        // A TLS hello (the HTTPS probe): a plain server hangs up.
                        if head.is_empty() && byte[0] == 0x16 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                    seen.lock().unwrap().push(head);
                    let response = if path == "/v2/" {
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
                            .to_vec()
                    } else {
                        answer(&path)
                    };
                    let _ = stream.write_all(&response).await;
                    if short(&response) {
                        // Silent until the client gives up and hangs up.
                        let _ = stream.read(&mut byte).await;
                        return;
                    }
                    let _ = stream.shutdown().await;
                });
            }
        });
        (address, requests)
    }

    /// Whether an HTTP response's body is shorter than its `Content-Length`.
    fn short(response: &[u8]) -> bool {
        let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
            return false;
        };
        let body = response.len() - end - 4;
        String::from_utf8_lossy(&response[..end])
            .lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.trim().parse::<usize>().ok())
            .is_some_and(|length| body < length)
    }

    /// An HTTP 200 response with `body` (declared `length` bytes long) and
    /// `headers` (each ending in CRLF).
    fn ok(body: &[u8], length: usize, headers: &str) -> Vec<u8> {
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n{headers}Connection: close\r\n\r\n"
        )
        .into_bytes();
        response.extend_from_slice(body);
        response
    }

    /// A hostile registry serving one wasm artifact at tag `1`: its
    /// manifest (naming `layer`'s digest and size), an empty JSON config,
    /// and `response` (a whole HTTP response) for the layer.
    async fn artifact(layer: &[u8], response: Vec<u8>) -> (String, Arc<Mutex<Vec<String>>>) {
        let config = b"{}";
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": sha256_digest(config), "size": config.len()},
            "layers": [{"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": sha256_digest(layer), "size": layer.len()}],
        }))
        .unwrap();
        let config_digest = sha256_digest(config);
        hostile(move |path| {
            if path.ends_with("/manifests/1") {
                let content_type = format!("Content-Type: {OCI_MANIFEST}\r\n");
                ok(&manifest, manifest.len(), &content_type)
            } else if path.ends_with(&config_digest) {
                ok(config, config.len(), "")
            } else if path.contains("/blobs/") {
                response.clone()
            } else {
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
            }
        })
        .await
    }

    /// A distribution with its own store, no credentials, every repository
    /// allowed unsigned.
    fn unsigned(store: &Path) -> Distribution {
        Distribution::new(store)
            .credentials(Credentials::none())
            .trust(TrustPolicy::new().allow_unsigned("*"))
    }

    #[tokio::test]
    async fn r41_a_manifest_past_its_bound_is_refused_while_it_arrives() {
        // No Content-Length: the body runs until the connection closes.
        let (address, _) = hostile(|_| {
            let mut response = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
            response.resize(response.len() + (MAX_OCI_MANIFEST_BYTES as usize) * 2, b' ');
            response
        })
        .await;
        let store = tempfile::tempdir().unwrap();
        let distribution = unsigned(store.path());
        let reference = format!("oci://{address}/big/manifest:1");
        let err = distribution.fetch(&reference, 1 << 20).await.unwrap_err();
        assert!(
            matches!(&err, OciError::TooLarge { what: "manifest", limit, .. } if *limit == MAX_OCI_MANIFEST_BYTES),
            "{err}"
        );
        assert!(err.to_string().starts_with(&reference), "{err}");
        let kept = std::fs::read_dir(store.path().join("blobs/sha256"))
            .map(|entries| entries.count())
            .unwrap_or(0);
        assert_eq!(kept, 0, "nothing of it is kept");
    }

    #[tokio::test]
    async fn r41_a_layer_declared_past_the_plugin_bound_is_refused_before_it_is_pulled() {
        let config = b"{}";
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": sha256_digest(config), "size": 2},
            "layers": [{"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": sha256_digest(b"x"), "size": 300u64 << 20}],
        }))
        .unwrap();
        let (address, requests) = hostile(move |_| {
            let mut response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {OCI_MANIFEST}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                manifest.len()
            )
            .into_bytes();
            response.extend_from_slice(&manifest);
            response
        })
        .await;
        let store = tempfile::tempdir().unwrap();
        let distribution = unsigned(store.path());
        let err = distribution
            .fetch(&format!("oci://{address}/big/layer:1"), 256 << 20)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, OciError::TooLarge { what: "layer", limit, .. } if *limit == 256 << 20),
            "{err}"
        );
        let requests = requests.lock().unwrap();
        assert!(
            requests.iter().all(|r| !r.contains("/blobs/")),
            "{requests:?}"
        );
    }

    #[tokio::test]
    async fn r41_an_untrusted_certificate_is_a_refusal_not_an_offline_registry() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Not TLS: the handshake fails, as with an untrusted certificate.
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let _ = std::io::Write::write_all(&mut stream, b"HTTP/1.1 400 no\r\n\r\n");
            }
        });
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let e = client
            .get(format!("https://127.0.0.1:{port}/v2/"))
            .send()
            .await
            .unwrap_err();
        assert!(!unreachable(&e), "{}", error_chain(&e));
        // A closed port is unreachable.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let e = client
            .get(format!("https://127.0.0.1:{port}/v2/"))
            .send()
            .await
            .unwrap_err();
        assert!(unreachable(&e), "{}", error_chain(&e));
    }

    #[tokio::test]
    async fn r41_a_layer_of_other_bytes_is_a_digest_mismatch_naming_both_digests() {
        let layer = [7u8; 64];
        let forged = b"not the layer".to_vec();
        let same_length = [8u8; 64];
        for (served, headers) in [
            // Shorter than declared: oci-client's own check ended the stream.
            (forged, String::new()),
            // The registry's digest header vouching for the forged bytes.
            (
                same_length.to_vec(),
                format!("Docker-Content-Digest: {}\r\n", sha256_digest(&same_length)),
            ),
        ] {
            let response = ok(&served, served.len(), &headers);
            let (address, _) = artifact(&layer, response).await;
            let store = tempfile::tempdir().unwrap();
            let reference = format!("oci://{address}/forged/layer:1");
            let err = unsigned(store.path())
                .fetch(&reference, 1 << 20)
                .await
                .unwrap_err();
            match &err {
                OciError::DigestMismatch {
                    reference: named,
                    what: "layer",
                    expected,
                    actual,
                } => {
                    assert_eq!(named, &reference);
                    assert_eq!(expected, &sha256_digest(&layer));
                    assert_eq!(actual, &sha256_digest(&served));
                }
                other => panic!("not a digest mismatch: {other}"),
            }
            let layer_file = store
                .path()
                .join("blobs/sha256")
                .join(&sha256_digest(&layer)["sha256:".len()..]);
            assert!(!layer_file.exists(), "the forged layer is not kept");
        }
    }

    #[tokio::test]
    async fn r41_a_registry_silent_mid_layer_is_reported_as_timed_out() {
        let layer = [7u8; 4096];
        // Half the layer, then nothing, the connection left open.
        let (address, _) = artifact(&layer, ok(&layer[..2048], layer.len(), "")).await;
        let store = tempfile::tempdir().unwrap();
        let reference = format!("oci://{address}/silent/layer:1");
        let limit = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let err = unsigned(store.path())
            .read_timeout(limit)
            .fetch(&reference, 1 << 20)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10), "{err}");
        let text = err.to_string();
        assert!(
            matches!(&err, OciError::Registry { reference: named, .. } if named == &reference),
            "{text}"
        );
        for part in [
            "timed out",
            "300ms",
            "OCI_READ_TIMEOUT",
            &sha256_digest(&layer),
            "retry",
        ] {
            assert!(text.contains(part), "{part} not in: {text}");
        }
        assert!(!text.contains("decoding"), "{text}");
    }

    #[tokio::test]
    async fn r41_credentials_are_sent_only_after_the_registry_challenges() {
        let layer = [7u8; 64];
        let (address, requests) = artifact(&layer, ok(&layer, layer.len(), "")).await;
        let store = tempfile::tempdir().unwrap();
        // Credentials for this very registry, which never asks for them.
        let credentials = Credentials::none().with(&address, "alice".into(), "s3cret".into());
        unsigned(store.path())
            .credentials(credentials)
            .fetch(&format!("oci://{address}/open/registry:1"), 1 << 20)
            .await
            .unwrap();
        let requests = requests.lock().unwrap();
        assert!(requests.len() >= 3, "{requests:?}");
        let sent: Vec<&String> = requests
            .iter()
            .filter(|r| r.to_ascii_lowercase().contains("\nauthorization:"))
            .collect();
        assert!(sent.is_empty(), "credentials sent unasked: {sent:?}");
    }
}
