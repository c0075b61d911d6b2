//! Cosign-compatible key-pair signatures: ECDSA P-256 with SHA-256 over
//! cosign's "simple signing" payload, which names the manifest digest the
//! signature is for, stored as the one layer of a manifest tagged
//! `sha256-HEX.sig` beside the artifact (what `cosign sign --key` writes and
//! `cosign verify --key` reads). Checked with ring, which rustls already
//! brings: no second crypto library.

use std::path::Path;

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};
use serde_json::{Value, json};

use super::reference::{OciReference, canonical_repository};
use crate::error::OciError;
use crate::files::read_regular_file;

/// The media type of a cosign simple-signing payload layer.
pub(crate) const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";

/// The layer annotation holding the base64 DER signature.
pub(crate) const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// The payload type cosign writes and checks.
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// The largest key file read: a PEM key is a few hundred bytes.
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// The DER prefix of a P-256 SubjectPublicKeyInfo (id-ecPublicKey,
/// prime256v1, a 66-byte bit string); the uncompressed point follows.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A public key trusted to sign plugins: ECDSA P-256, as in `cosign.pub`.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    point: Vec<u8>,
    fingerprint: String,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PublicKey").field(&self.fingerprint).finish()
    }
}

impl PublicKey {
    /// A `-----BEGIN PUBLIC KEY-----` PEM of a P-256 key (`cosign.pub`,
    /// `openssl pkey -pubout`).
    pub fn from_pem(pem: &str) -> Result<PublicKey, String> {
        let der = pem_block(pem, "PUBLIC KEY")?;
        let point = der
            .strip_prefix(&P256_SPKI_PREFIX[..])
            .filter(|p| p.len() == 65 && p[0] == 4)
            .ok_or("it is not an ECDSA P-256 public key (the kind cosign makes)")?;
        Ok(PublicKey::from_point(point))
    }

    /// Reads a public key PEM file.
    pub fn read(path: &Path) -> Result<PublicKey, OciError> {
        PublicKey::from_pem(&read_text(path)?).map_err(|reason| OciError::File {
            path: path.to_owned(),
            reason,
        })
    }

    fn from_point(point: &[u8]) -> PublicKey {
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(point);
        PublicKey {
            point: point.to_vec(),
            fingerprint: super::sha256_digest(&spki),
        }
    }

    /// `sha256:HEX` of the key's DER SubjectPublicKeyInfo: how a lock file
    /// and `toolhost inspect` name the signer.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The PEM form, for writing `cosign.pub`-style files.
    pub fn to_pem(&self) -> String {
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(&self.point);
        let b64 = base64::engine::general_purpose::STANDARD.encode(spki);
        format!("-----BEGIN PUBLIC KEY-----\n{b64}\n-----END PUBLIC KEY-----\n")
    }

    /// Whether `signature` (DER) signs `message` with this key.
    pub(crate) fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(message, signature)
            .is_ok()
    }
}

/// A private key that signs plugins on push: an unencrypted PKCS#8 P-256
/// key (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`).
pub struct SigningKey {
    pair: EcdsaKeyPair,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SigningKey")
            .field(&self.public_key().fingerprint)
            .finish()
    }
}

impl SigningKey {
    /// A `-----BEGIN PRIVATE KEY-----` PEM (PKCS#8) of a P-256 key.
    pub fn from_pem(pem: &str) -> Result<SigningKey, String> {
        if pem.contains("ENCRYPTED SIGSTORE PRIVATE KEY")
            || pem.contains("ENCRYPTED COSIGN PRIVATE KEY")
        {
            return Err("it is an encrypted cosign key, which Toolhost does not decrypt; sign with `cosign sign --key`, or use an unencrypted PKCS#8 P-256 key".into());
        }
        if pem.contains("BEGIN EC PRIVATE KEY") {
            return Err(
                "it is a SEC1 key; convert it to PKCS#8 with `openssl pkcs8 -topk8 -nocrypt`"
                    .into(),
            );
        }
        let der = pem_block(pem, "PRIVATE KEY")?;
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der, &SystemRandom::new())
                .map_err(|e| format!("it is not a PKCS#8 ECDSA P-256 private key ({e})"))?;
        Ok(SigningKey { pair })
    }

    /// Reads a private key PEM file.
    pub fn read(path: &Path) -> Result<SigningKey, OciError> {
        SigningKey::from_pem(&read_text(path)?).map_err(|reason| OciError::File {
            path: path.to_owned(),
            reason,
        })
    }

    /// The matching public key, to trust.
    pub fn public_key(&self) -> PublicKey {
        PublicKey::from_point(self.pair.public_key().as_ref())
    }

    /// A DER ECDSA signature of `message`.
    pub(crate) fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        self.pair
            .sign(&SystemRandom::new(), message)
            .map(|s| s.as_ref().to_vec())
            .map_err(|e| format!("signing failed: {e}"))
    }
}

/// The simple-signing payload for the manifest `digest` in `repository`
/// (REGISTRY/REPOSITORY), as cosign writes it.
pub(crate) fn payload(repository: &str, digest: &str) -> Vec<u8> {
    json!({
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    })
    .to_string()
    .into_bytes()
}

/// Checks that a verified payload signs the manifest `digest` and, given
/// `reference`, was made for its repository (registry and repository, as
/// cosign compares them: a valid signature copied from another repository
/// holding the same manifest is refused).
pub(crate) fn check_payload(
    payload: &[u8],
    digest: &str,
    reference: Option<&OciReference>,
) -> Result<(), String> {
    let value: Value =
        serde_json::from_slice(payload).map_err(|e| format!("its payload is not JSON ({e})"))?;
    let critical = &value["critical"];
    if critical["type"] != PAYLOAD_TYPE {
        return Err(format!("its payload's type is not \"{PAYLOAD_TYPE}\""));
    }
    match critical["image"]["docker-manifest-digest"].as_str() {
        Some(signed) if signed == digest => {}
        Some(signed) => {
            return Err(format!(
                "the signature is valid but signs {signed}, another manifest: a signature copied from another artifact"
            ));
        }
        None => return Err("its payload names no manifest digest".into()),
    }
    match reference {
        Some(reference) => check_repository(
            "signature",
            critical["identity"]["docker-reference"].as_str(),
            reference,
        ),
        None => Ok(()),
    }
}

/// Checks that the repository a valid signature (or attestation: `what`)
/// names, `signed`, is `reference`'s, compared as cosign compares them.
pub(crate) fn check_repository(
    what: &str,
    signed: Option<&str>,
    reference: &OciReference,
) -> Result<(), String> {
    let loading = reference.repository_path();
    match signed {
        Some(signed) if canonical_repository(signed) == reference.canonical_repository() => Ok(()),
        Some(signed) => Err(format!(
            "the {what} is valid but was made for {signed}, not {loading}: a {what} copied from another repository; only if {loading} holds copies of that repository's plugins on purpose, accept it with `any-reference = true` in the trust rule for {loading}"
        )),
        None => Err(format!(
            "the {what} names no repository, so it cannot be bound to {loading}; only if that is expected, accept it with `any-reference = true` in the trust rule for {loading}"
        )),
    }
}

/// The tag cosign stores the signatures of the manifest `digest` under.
pub(crate) fn signature_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1) + ".sig"
}

/// The base64 of a signature, as the annotation holds it.
pub(crate) fn encode(signature: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(signature)
}

/// A signature annotation's bytes.
pub(crate) fn decode(annotation: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(annotation.trim())
        .ok()
}

fn read_text(path: &Path) -> Result<String, OciError> {
    let file_error = |reason: String| OciError::File {
        path: path.to_owned(),
        reason,
    };
    let bytes =
        read_regular_file(path, MAX_KEY_FILE_BYTES).map_err(|e| file_error(e.to_string()))?;
    String::from_utf8(bytes).map_err(|_| file_error("it is not UTF-8 text (a PEM file)".into()))
}

/// The DER inside the first `-----BEGIN {label}-----` block.
fn pem_block(pem: &str, label: &str) -> Result<Vec<u8>, String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = pem
        .find(&begin)
        .ok_or_else(|| format!("it holds no `{begin}` block"))?
        + begin.len();
    let stop = pem[start..]
        .find(&end)
        .ok_or_else(|| format!("its `{begin}` block has no end"))?;
    let b64: String = pem[start..start + stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("its `{label}` block is not base64 ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SigningKey {
        let doc =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
                .unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(doc.as_ref());
        SigningKey::from_pem(&format!(
            "-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n"
        ))
        .unwrap()
    }

    #[test]
    fn r41_a_signature_verifies_only_with_its_key_and_its_digest() {
        let (mine, theirs) = (key(), key());
        let public = PublicKey::from_pem(&mine.public_key().to_pem()).unwrap();
        assert_eq!(public, mine.public_key());
        assert!(public.fingerprint().starts_with("sha256:"));
        let digest = format!("sha256:{}", "a".repeat(64));
        let message = payload("r.io/tools/echo", &digest);
        let signature = mine.sign(&message).unwrap();
        assert!(public.verifies(&message, &signature));
        assert!(!theirs.public_key().verifies(&message, &signature));
        assert!(!public.verifies(b"another payload", &signature));
        check_payload(&message, &digest, None).unwrap();
        let other = format!("sha256:{}", "b".repeat(64));
        assert!(
            check_payload(&message, &other, None)
                .unwrap_err()
                .contains("another manifest")
        );
        assert_eq!(
            signature_tag(&digest),
            format!("sha256-{}.sig", "a".repeat(64))
        );
    }

    #[test]
    fn r41_a_payload_made_for_another_repository_is_refused_unless_any_is_accepted() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let prod = OciReference::parse("oci://r.io/acme/prod-tool:1.0").unwrap();
        let sandbox = payload("r.io/acme/sandbox-tool", &digest);
        let reason = check_payload(&sandbox, &digest, Some(&prod)).unwrap_err();
        assert!(
            reason.starts_with(
                "the signature is valid but was made for r.io/acme/sandbox-tool, not r.io/acme/prod-tool"
            ),
            "{reason}"
        );
        assert!(reason.contains("any-reference = true"), "{reason}");
        check_payload(&sandbox, &digest, None).unwrap();
        // The same repository, written with the default port or a tag.
        for same in [
            "r.io/acme/prod-tool",
            "r.io:443/acme/prod-tool",
            "r.io/acme/prod-tool:1.0",
        ] {
            check_payload(&payload(same, &digest), &digest, Some(&prod)).unwrap();
        }
        // Docker Hub as cosign names it, for a reference written docker.io.
        let hub = OciReference::parse("oci://docker.io/acme/prod-tool:1.0").unwrap();
        check_payload(
            &payload("index.docker.io/acme/prod-tool", &digest),
            &digest,
            Some(&hub),
        )
        .unwrap();
        // No repository named at all: not bound, so refused.
        let unbound = json!({
            "critical": {"image": {"docker-manifest-digest": digest}, "type": PAYLOAD_TYPE},
        })
        .to_string();
        let reason = check_payload(unbound.as_bytes(), &digest, Some(&prod)).unwrap_err();
        assert!(reason.contains("names no repository"), "{reason}");
    }

    #[test]
    fn r41_keys_of_other_kinds_are_refused_with_what_to_do() {
        assert!(SigningKey::from_pem("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAA==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----").unwrap_err().contains("cosign sign"));
        assert!(
            PublicKey::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")
                .unwrap_err()
                .contains("P-256")
        );
        assert!(
            PublicKey::from_pem("no pem")
                .unwrap_err()
                .contains("BEGIN PUBLIC KEY")
        );
    }
}
