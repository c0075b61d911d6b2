//! Pushing, signing and attaching: a component pushed in the wasm OCI
//! artifact layout (a reproducible manifest), cosign-compatible key-pair
//! signatures and Sigstore bundles added to its signature manifest beside
//! the ones already there.

use std::collections::BTreeMap;

use oci_client::RegistryOperation;

use super::manifest::{Descriptor, Manifest, OCI_IMAGE_CONFIG, OCI_MANIFEST, too_large};
use super::reference::OciReference;
use super::session::{Failure, Session, bounded};
use super::{
    Distribution, MAX_SIGSTORE_BUNDLE_BYTES, Pushed, SigningKey, WASM_CONFIG_MEDIA_TYPE,
    WASM_LAYER_MEDIA_TYPE, keyless, sign,
};
use crate::error::OciError;

impl Distribution {
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
            let config = wasm_config(&layer, wasm).map_err(|e| session.refused(e.to_string()))?;
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
}

/// The wasm OCI config of the component `wasm`, whose layer is `layer`.
fn wasm_config(layer: &Descriptor, wasm: &[u8]) -> serde_json::Result<Vec<u8>> {
    let (imports, exports) = world(wasm);
    serde_json::to_vec(&serde_json::json!({
        // A fixed time, so a push of the same component is the same
        // manifest (reproducible, and re-signable).
        "created": "1970-01-01T00:00:00Z",
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer.digest],
        "component": {"imports": imports, "exports": exports},
    }))
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
