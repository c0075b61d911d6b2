//! Keyless signatures: a Sigstore bundle whose message is the plugin's
//! manifest (what `cosign sign-blob --bundle` or `python -m sigstore sign`
//! write when given the manifest's bytes), checked offline with
//! `sigstore-verify` against a trusted root — the Fulcio certificate chain
//! and its SCT, the Rekor inclusion proof, checkpoint and signed entry
//! timestamp — and against an identity and OIDC issuer the trust policy
//! names. The bundle is a layer of the artifact's signature manifest
//! (`sha256-HEX.sig`), beside any key-pair signatures.
//!
//! A bundle that signs the manifest's bytes names no repository, so it is
//! bound to the digest only. One that holds an in-toto attestation (a DSSE
//! envelope, as `cosign attest` and GitHub's build provenance write) names
//! its artifacts, and the subject with the manifest's digest must name the
//! repository being loaded, as a key-pair signature's `docker-reference`
//! must (unless the trust policy accepts any).

use std::path::Path;
use std::sync::Arc;

use sigstore_verify::trust_root::{SIGSTORE_PRODUCTION_TRUSTED_ROOT, TrustedRoot};
use sigstore_verify::types::{Bundle, Sha256Hash, SignatureContent};
use sigstore_verify::{Error as VerifyError, VerificationPolicy, Verifier};

use super::reference::OciReference;
use super::sign::check_repository;
use crate::error::OciError;
use crate::files::read_regular_file;

/// The media type of a Sigstore bundle layer (v0.3; v0.1 and v0.2 bundles
/// carry their own version in the JSON and are read the same way).
pub(crate) const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// The largest Sigstore bundle read: a certificate chain, one log entry
/// and its proof are 5–15 KiB.
pub const MAX_SIGSTORE_BUNDLE_BYTES: u64 = 256 << 10;

/// The largest trusted root file read: the public-good root is ~7 KiB.
const MAX_TRUSTED_ROOT_BYTES: u64 = 1 << 20;

/// A Sigstore trusted root (`trusted_root.json`): the certificate
/// authorities, certificate-transparency logs and transparency logs a
/// keyless signature must chain to and appear in.
#[derive(Clone)]
pub struct SigstoreRoot {
    verifier: Arc<Verifier>,
    /// Whether it lists CT logs: a root without any (a private instance
    /// with no CT log) cannot ask for an SCT.
    has_ct_logs: bool,
    name: String,
}

impl std::fmt::Debug for SigstoreRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SigstoreRoot").field(&self.name).finish()
    }
}

impl SigstoreRoot {
    /// The Sigstore public-good instance's root (Fulcio `fulcio.sigstore.dev`,
    /// Rekor `rekor.sigstore.dev`), as embedded in `sigstore-verify`: no
    /// network is used, so refresh it by upgrading or pass a newer
    /// `trusted_root.json` with [`SigstoreRoot::read`].
    pub fn public_good() -> Result<SigstoreRoot, OciError> {
        SigstoreRoot::from_json(
            SIGSTORE_PRODUCTION_TRUSTED_ROOT,
            "the Sigstore public-good root",
        )
        .map_err(|reason| OciError::File {
            path: "<embedded Sigstore trusted root>".into(),
            reason,
        })
    }

    /// Reads a `trusted_root.json` (the Sigstore TUF repository's target, or
    /// a private instance's).
    pub fn read(path: &Path) -> Result<SigstoreRoot, OciError> {
        let file_error = |reason: String| OciError::File {
            path: path.to_owned(),
            reason,
        };
        let bytes = read_regular_file(path, MAX_TRUSTED_ROOT_BYTES)
            .map_err(|e| file_error(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| file_error("it is not UTF-8".into()))?;
        SigstoreRoot::from_json(&text, &path.display().to_string()).map_err(file_error)
    }

    fn from_json(json: &str, name: &str) -> Result<SigstoreRoot, String> {
        let root = TrustedRoot::from_json(json)
            .map_err(|e| format!("it is not a Sigstore trusted root ({e})"))?;
        let has_ct_logs = !root.ctlogs.is_empty();
        let verifier =
            Verifier::new(&root).map_err(|e| format!("its trust material is refused ({e})"))?;
        Ok(SigstoreRoot {
            verifier: Arc::new(verifier),
            has_ct_logs,
            name: name.to_owned(),
        })
    }
}

/// Who may sign keylessly: the certificate identity (an email, or a URI
/// such as a CI workflow's) and the OIDC issuer that vouched for it, under
/// a trusted root. Both must match exactly.
#[derive(Debug, Clone)]
pub struct KeylessSigner {
    identity: String,
    issuer: String,
    root: SigstoreRoot,
}

impl KeylessSigner {
    /// Trusts signatures by `identity` as vouched for by `issuer`, whose
    /// certificates chain to `root`.
    pub fn new(
        identity: impl Into<String>,
        issuer: impl Into<String>,
        root: SigstoreRoot,
    ) -> KeylessSigner {
        KeylessSigner {
            identity: identity.into(),
            issuer: issuer.into(),
            root,
        }
    }

    /// How a lock file and `toolhost inspect` name this signer:
    /// `ISSUER#IDENTITY`.
    pub fn name(&self) -> String {
        format!("{}#{}", self.issuer, self.identity)
    }

    /// Checks that `bundle` signs the manifest `digest` as this signer.
    fn verify(&self, bundle: &Bundle, digest: &Sha256Hash) -> Result<(), Failure> {
        let mut policy = VerificationPolicy::new(self.identity.as_str(), self.issuer.as_str());
        if !self.root.has_ct_logs {
            policy = policy.skip_sct();
        }
        match self.root.verifier.verify(*digest, bundle, &policy) {
            Ok(_) => Ok(()),
            Err(
                e @ (VerifyError::IdentityMismatch { .. } | VerifyError::IssuerMismatch { .. }),
            ) => Err(Failure::WrongSigner(e.to_string())),
            Err(e) => Err(Failure::BadBundle(e.to_string())),
        }
    }
}

/// Why a bundle was not accepted.
#[derive(Debug)]
pub(crate) enum Failure {
    /// It verifies, but its certificate names another identity or issuer.
    WrongSigner(String),
    /// It is malformed, tampered, for another artifact, or does not chain
    /// to the trusted root or appear in its log.
    BadBundle(String),
}

/// Whether a signature-manifest layer of `media_type` is a Sigstore bundle.
pub(crate) fn is_bundle(media_type: &str) -> bool {
    media_type.starts_with("application/vnd.dev.sigstore.bundle") && media_type.contains("+json")
}

/// The name of the first of `signers` for whom the bundle (JSON bytes)
/// signs the manifest `digest` (for `reference`'s repository, given one);
/// else why not: a wrong signer when it verified for some signer's root but
/// named someone else, else a bad bundle. Every signer is tried: rules may
/// name different roots.
pub(crate) fn verify_any(
    signers: &[&KeylessSigner],
    bundle: &[u8],
    digest: &str,
    reference: Option<&OciReference>,
) -> Result<String, Failure> {
    let bundle = parse_bundle(bundle).map_err(Failure::BadBundle)?;
    let hash = manifest_hash(digest).map_err(Failure::BadBundle)?;
    let (mut wrong, mut bad) = (None, None);
    for signer in signers {
        match signer.verify(&bundle, &hash) {
            Ok(()) => {
                if let Some(reference) = reference {
                    check_subject(&bundle, digest, reference).map_err(Failure::BadBundle)?;
                }
                return Ok(signer.name());
            }
            Err(failure @ Failure::WrongSigner(_)) => wrong = Some(failure),
            Err(failure @ Failure::BadBundle(_)) => bad = Some(failure),
        }
    }
    Err(wrong
        .or(bad)
        .unwrap_or_else(|| Failure::WrongSigner("no keyless signer is trusted here".into())))
}

/// Checks that a verified attestation (a DSSE envelope) was made for
/// `reference`'s repository: a subject with the manifest `digest` names it.
/// A message signature names no repository: nothing to check.
fn check_subject(bundle: &Bundle, digest: &str, reference: &OciReference) -> Result<(), String> {
    let SignatureContent::DsseEnvelope(envelope) = &bundle.content else {
        return Ok(());
    };
    let statement: serde_json::Value = serde_json::from_slice(envelope.payload.as_bytes())
        .map_err(|e| format!("its in-toto statement is not JSON ({e})"))?;
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let mut checks = statement["subject"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|subject| subject["digest"]["sha256"].as_str() == Some(hex))
        .map(|subject| check_repository("attestation", subject["name"].as_str(), reference));
    let first = checks
        .next()
        .unwrap_or_else(|| check_repository("attestation", None, reference));
    if first.is_ok() || checks.any(|check| check.is_ok()) {
        return Ok(());
    }
    first
}

/// Checks that a bundle about to be attached to the manifest `digest` is a
/// keyless message signature of that manifest.
pub(crate) fn check_attachable(bytes: &[u8], digest: &str) -> Result<(), String> {
    let bundle = parse_bundle(bytes)?;
    if bundle.signing_certificate().is_none() {
        return Err("it holds no signing certificate: it is not a keyless bundle".into());
    }
    let SignatureContent::MessageSignature(signature) = &bundle.content else {
        return Err("it is a DSSE attestation, not a signature of the manifest; sign the manifest's bytes (`toolhost inspect --manifest`)".into());
    };
    let expected = manifest_hash(digest)?;
    match &signature.message_digest {
        Some(signed) if signed.digest.as_bytes() != expected.as_bytes() => Err(format!(
            "it signs sha256:{}, not this manifest ({digest}); sign the bytes `toolhost inspect --manifest` prints",
            hex::encode(signed.digest.as_bytes())
        )),
        _ => Ok(()),
    }
}

fn manifest_hash(digest: &str) -> Result<Sha256Hash, String> {
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or("the manifest digest is not sha256")?;
    Sha256Hash::from_hex(hex).map_err(|e| e.to_string())
}

fn parse_bundle(bytes: &[u8]) -> Result<Bundle, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the bundle is not UTF-8 JSON")?;
    Bundle::from_json(text).map_err(|e| format!("it is not a Sigstore bundle ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r41_the_embedded_public_good_root_is_accepted_and_asks_for_scts() {
        let root = SigstoreRoot::public_good().unwrap();
        assert!(root.has_ct_logs, "the public-good root lists CT logs");
        let signer = KeylessSigner::new("me@example.com", "https://accounts.google.com", root);
        assert_eq!(signer.name(), "https://accounts.google.com#me@example.com");
    }

    #[test]
    fn r41_malformed_bundles_are_bad_bundles_not_wrong_signers() {
        let root = SigstoreRoot::public_good().unwrap();
        let signer = KeylessSigner::new("me@example.com", "https://accounts.google.com", root);
        let digest = format!("sha256:{}", "a".repeat(64));
        for bundle in [&b"\xff"[..], b"{}", b"[1, 2]"] {
            match verify_any(&[&signer], bundle, &digest, None) {
                Err(Failure::BadBundle(_)) => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(is_bundle(BUNDLE_MEDIA_TYPE));
        assert!(is_bundle(
            "application/vnd.dev.sigstore.bundle+json;version=0.2"
        ));
        assert!(!is_bundle(
            "application/vnd.dev.cosign.simplesigning.v1+json"
        ));
        assert!(check_attachable(b"{}", &digest).is_err());
    }
}
