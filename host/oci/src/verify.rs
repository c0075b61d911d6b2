//! Signature discovery and verification: the cosign signature manifest
//! (`sha256-HEX.sig`) beside an artifact, its key-pair signatures and
//! Sigstore bundles, checked against the trust policy. Signatures pulled
//! are stored, so a pinned plugin verifies offline too.

use super::manifest::Manifest;
use super::reference::OciReference;
use super::session::{Failure, Session};
use super::{
    Distribution, MAX_OCI_MANIFEST_BYTES, MAX_SIGNATURE_PAYLOAD_BYTES, MAX_SIGNATURES,
    MAX_SIGSTORE_BUNDLE_BYTES, keyless, sha256_digest, sign,
};
use crate::error::OciError;

/// Signatures found for one artifact: cosign simple-signing (payload,
/// signature) pairs and Sigstore bundles.
#[derive(Default)]
pub(super) struct Signatures {
    simple: Vec<(Vec<u8>, Vec<u8>)>,
    bundles: Vec<Vec<u8>>,
}

impl Signatures {
    fn len(&self) -> usize {
        self.simple.len() + self.bundles.len()
    }
}

impl Distribution {
    /// For each signature found, its signer if one trusted for
    /// `reference`'s repository verifies it (as loading would), else `None`.
    pub(super) fn signers(
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
    pub(super) fn bound<'r>(&self, reference: &'r OciReference) -> Option<&'r OciReference> {
        let any = self
            .trust
            .any_reference_allowed(&reference.repository_path());
        (!any).then_some(reference)
    }

    /// Verifies the signatures of the manifest `digest` against the trust
    /// policy: the signer's fingerprint, or `None` when unsigned is allowed.
    pub(super) async fn verify(
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
        Err(refusal(
            reference,
            digest,
            repository,
            signatures.len(),
            bad,
            other_signers,
        ))
    }

    /// The signatures in the manifest `digest`'s cosign signature
    /// manifest: pulled when the registry is reachable, else the ones stored
    /// when it last was. At most [`MAX_SIGNATURES`].
    pub(super) async fn signatures(
        &self,
        session: &mut Session<'_>,
        digest: &str,
    ) -> Result<Signatures, OciError> {
        let reference = session.reference;
        let Some(bytes) = self.signature_manifest(session, digest).await? else {
            return Ok(Signatures::default());
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

    /// The bytes of the manifest `digest`'s signature manifest: pulled (and
    /// stored) when the registry is reachable, else the ones stored when it
    /// last was; `None` when there are none.
    async fn signature_manifest(
        &self,
        session: &mut Session<'_>,
        digest: &str,
    ) -> Result<Option<Vec<u8>>, OciError> {
        let reference = session.reference;
        let tag = reference.at_tag(&sign::signature_tag(digest));
        if session.offline.is_none() {
            match session.manifest_bytes(&tag, "signature manifest").await {
                Ok(bytes) => {
                    let found = sha256_digest(&bytes);
                    self.blobs.write(&found, &bytes)?;
                    self.blobs.set_signatures(digest, &found)?;
                    return Ok(Some(bytes));
                }
                Err(Failure::NotFound) => return Ok(None),
                Err(Failure::Unreachable(why)) => session.offline = Some(why),
                Err(failure) => return Err(failure.into_error(reference)),
            }
        }
        Ok(self
            .blobs
            .signatures(digest)
            .and_then(|d| self.blobs.read(&d, MAX_OCI_MANIFEST_BYTES)))
    }
}

/// Why none of the `found` signatures of `digest` verified: one was bad,
/// there were none, or none was by a signer trusted for `repository`
/// (`keyless` says whose the bundles were).
fn refusal(
    reference: &OciReference,
    digest: &str,
    repository: String,
    found: usize,
    bad: Option<String>,
    keyless: Vec<String>,
) -> OciError {
    let (reference, digest) = (reference.to_string(), digest.to_owned());
    match bad {
        Some(reason) => OciError::BadSignature {
            reference,
            digest,
            reason,
        },
        None if found == 0 => OciError::Unsigned {
            reference,
            digest,
            repository,
        },
        None => OciError::WrongSigner {
            reference,
            digest,
            repository,
            signatures: found,
            keyless,
        },
    }
}
