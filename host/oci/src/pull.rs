//! Pulling and inspecting: a reference resolved to its manifest digest
//! (pinned, locked, or its tag's), the manifest checked to be a wasm
//! artifact, its signature verified, then its config and component layer
//! pulled into the content store, each bounded and checked against its
//! digest. What is stored is not pulled again.

use std::path::PathBuf;

use super::lock::Locked;
use super::manifest::{Descriptor, Manifest, check_digest, not_a_plugin, too_large};
use super::reference::{OciReference, is_digest};
use super::session::{Failure, Session, bounded};
use super::{
    Distribution, Fetched, Inspection, MAX_OCI_CONFIG_BYTES, MAX_OCI_MANIFEST_BYTES,
    WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};
use crate::error::OciError;

impl Distribution {
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
        let digest = self.digest_to_fetch(&mut session, locked).await?;
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
        self.check_config(&mut session, &digest, &manifest).await?;
        let path = self.layer(&mut session, &layer, max_layer).await?;
        Ok(Fetched {
            reference: reference.clone(),
            digest,
            path,
            signer,
            annotations: manifest.annotations,
        })
    }

    /// The manifest digest to fetch: the reference's own; else, locked,
    /// the locked digest, which the tag must still name (the registry
    /// unreachable, it loads from the store); else what the tag names now.
    async fn digest_to_fetch(
        &self,
        session: &mut Session<'_>,
        locked: Option<&Locked>,
    ) -> Result<String, OciError> {
        let reference = session.reference;
        match (reference.digest(), locked) {
            (Some(digest), _) => Ok(digest.to_owned()),
            (None, Some(locked)) => match session.resolve().await {
                Ok((now, bytes)) if now == locked.digest => self.keep(now, &bytes),
                Ok((now, _)) => Err(OciError::Moved {
                    reference: reference.to_string(),
                    locked: locked.digest.clone(),
                    now,
                }),
                Err(Failure::Unreachable(why)) => {
                    session.offline = Some(why);
                    Ok(locked.digest.clone())
                }
                Err(failure) => Err(failure.into_error(reference)),
            },
            (None, None) => self.resolve(session).await,
        }
    }

    /// The manifest's config: stored, else pulled; a JSON object.
    async fn check_config(
        &self,
        session: &mut Session<'_>,
        digest: &str,
        manifest: &Manifest,
    ) -> Result<(), OciError> {
        let reference = session.reference;
        let config = self
            .blob(session, &manifest.config, MAX_OCI_CONFIG_BYTES, "config")
            .await?;
        if !serde_json::from_slice::<serde_json::Value>(&config).is_ok_and(|v| v.is_object()) {
            return Err(not_a_plugin(
                reference,
                digest,
                "its config is not a JSON object",
            ));
        }
        Ok(())
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

    /// The manifest digest `session`'s reference names: its own, or what
    /// its tag resolves to (that manifest stored).
    pub(super) async fn resolve(&self, session: &mut Session<'_>) -> Result<String, OciError> {
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

    /// A small blob (config, payload) in memory: stored, else pulled.
    pub(super) async fn blob(
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

#[cfg(test)]
mod tests {
    use super::super::manifest::OCI_MANIFEST;
    use super::super::sha256_digest;
    use super::super::test_registry::{hostile, unsigned};
    use super::*;

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
}
