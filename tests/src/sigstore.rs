//! A private Sigstore instance for the keyless-signature tests: its own
//! Fulcio-style certificate authority, certificate-transparency log and
//! Rekor-style transparency log keys, the `trusted_root.json` that names
//! them, and the bundles a keyless signer would get from them — a
//! short-lived certificate for an identity and OIDC issuer with an
//! embedded SCT, a `hashedrekord` log entry (a `dsse` one for an
//! attestation) with its signed entry timestamp, inclusion proof and signed
//! checkpoint. Nothing is faked on the verifying
//! side: Toolhost checks these with the Sigstore project's verifier, as it
//! checks the public-good instance's.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, PublicKeyData as _, SanType,
    SerialNumber, SigningKey as _,
};
use ring::digest::{SHA256, digest};
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

/// The OID of Fulcio's OIDC issuer extension (DER UTF8String).
const FULCIO_ISSUER: &[u64] = &[1, 3, 6, 1, 4, 1, 57264, 1, 8];

/// The OID of an embedded SCT list (RFC 6962).
const SCT_LIST: &[u64] = &[1, 3, 6, 1, 4, 1, 11129, 2, 4, 2];

/// The checkpoint origin of the test log, and the key name its signature
/// lines carry (Rekor's form: the name, then the tree ID).
const LOG_ORIGIN: &str = "rekor.toolhost.test - 1";
const LOG_NAME: &str = "rekor.toolhost.test";

/// The instance's keys and CA certificate.
#[allow(missing_debug_implementations)]
pub struct Instance {
    ca_key: KeyPair,
    ca_params: CertificateParams,
    ca_der: Vec<u8>,
    ct_key: KeyPair,
    rekor_key: KeyPair,
}

impl Default for Instance {
    fn default() -> Self {
        Instance::new()
    }
}

impl Instance {
    /// A new instance with fresh keys.
    pub fn new() -> Instance {
        let ca_key = KeyPair::generate().expect("a P-256 key");
        let mut ca_params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::OrganizationName, "toolhost.test");
        name.push(DnType::CommonName, "toolhost test fulcio");
        ca_params.distinguished_name = name;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca_params.not_before = OffsetDateTime::now_utc() - Duration::days(1);
        ca_params.not_after = OffsetDateTime::now_utc() + Duration::days(30);
        let ca_der = ca_params.self_signed(&ca_key).expect("a CA").der().to_vec();
        Instance {
            ca_key,
            ca_params,
            ca_der,
            ct_key: KeyPair::generate().expect("a P-256 key"),
            rekor_key: KeyPair::generate().expect("a P-256 key"),
        }
    }

    /// The `trusted_root.json` naming this instance's CA, CT log and
    /// transparency log.
    pub fn trusted_root(&self) -> String {
        let log = |key: &KeyPair, url: &str| {
            let spki = key.subject_public_key_info();
            json!({
                "baseUrl": url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": B64.encode(&spki),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": "2020-01-01T00:00:00Z"},
                },
                "logId": {"keyId": B64.encode(sha256(&spki))},
            })
        };
        json!({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(&self.rekor_key, "https://rekor.toolhost.test")],
            "certificateAuthorities": [{
                "subject": {"organization": "toolhost.test", "commonName": "toolhost test fulcio"},
                "uri": "https://fulcio.toolhost.test",
                "certChain": {"certificates": [{"rawBytes": B64.encode(&self.ca_der)}]},
                "validFor": {"start": "2020-01-01T00:00:00Z"},
            }],
            "ctlogs": [log(&self.ct_key, "https://ctfe.toolhost.test")],
            "timestampAuthorities": [],
        })
        .to_string()
    }

    /// A Sigstore bundle (v0.3 JSON) in which `identity` (an email), vouched
    /// for by `issuer`, signs `message` — logged in this instance's log.
    pub fn sign(&self, message: &[u8], identity: &str, issuer: &str) -> String {
        let key = KeyPair::generate().expect("a P-256 key");
        let certificate = self.certificate(&key, identity, issuer);
        let signature = key.sign(message).expect("an ECDSA signature");
        let entry = self.log_entry(message, &signature, &certificate);
        json!({
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": B64.encode(&certificate)},
                "tlogEntries": [entry],
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": B64.encode(sha256(message))},
                "signature": B64.encode(&signature),
            },
        })
        .to_string()
    }

    /// A Sigstore bundle (v0.3 JSON) in which `identity`, vouched for by
    /// `issuer`, attests the in-toto `statement` (JSON: its subjects name
    /// artifacts and their digests) in a DSSE envelope — logged as a `dsse`
    /// entry in this instance's log, as `cosign attest` or GitHub's
    /// `attest-build-provenance` make them.
    pub fn attest(&self, statement: &str, identity: &str, issuer: &str) -> String {
        const IN_TOTO: &str = "application/vnd.in-toto+json";
        let key = KeyPair::generate().expect("a P-256 key");
        let certificate = self.certificate(&key, identity, issuer);
        let pae = format!(
            "DSSEv1 {} {IN_TOTO} {} {statement}",
            IN_TOTO.len(),
            statement.len()
        );
        let signature = key.sign(pae.as_bytes()).expect("an ECDSA signature");
        let envelope = json!({
            "payload": B64.encode(statement),
            "payloadType": IN_TOTO,
            "signatures": [{"sig": B64.encode(&signature)}],
        });
        let body = json!({
            "apiVersion": "0.0.1",
            "kind": "dsse",
            "spec": {
                "envelopeHash": {"algorithm": "sha256", "value": hex(&sha256(envelope.to_string().as_bytes()))},
                "payloadHash": {"algorithm": "sha256", "value": hex(&sha256(statement.as_bytes()))},
                "signatures": [{"signature": B64.encode(&signature), "verifier": B64.encode(pem(&certificate))}],
            },
        })
        .to_string();
        json!({
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": B64.encode(&certificate)},
                "tlogEntries": [self.logged(&body, "dsse")],
            },
            "dsseEnvelope": envelope,
        })
        .to_string()
    }

    /// A short-lived code-signing certificate for `key`, as Fulcio issues:
    /// the identity as an email SAN, the issuer in Fulcio's extension, and
    /// an SCT from this instance's CT log over the precertificate.
    fn certificate(&self, key: &KeyPair, identity: &str, issuer: &str) -> Vec<u8> {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.subject_alt_names = vec![SanType::Rfc822Name(
            identity.try_into().expect("an IA5 identity"),
        )];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        params.serial_number = Some(SerialNumber::from_slice(&sha256(identity.as_bytes())[..16]));
        params.not_before = OffsetDateTime::now_utc() - Duration::minutes(1);
        params.not_after = OffsetDateTime::now_utc() + Duration::minutes(10);
        params.use_authority_key_identifier_extension = true;
        params.custom_extensions = vec![CustomExtension::from_oid_content(
            FULCIO_ISSUER,
            der_utf8(issuer),
        )];
        let ca = Issuer::from_params(&self.ca_params, &self.ca_key);
        let precertificate = params.signed_by(key, &ca).expect("a certificate");
        let tbs = first_element(precertificate.der());
        let sct = self.sct(tbs);
        params
            .custom_extensions
            .push(CustomExtension::from_oid_content(
                SCT_LIST,
                der_octets(&sct),
            ));
        params
            .signed_by(key, &ca)
            .expect("a certificate")
            .der()
            .to_vec()
    }

    /// A TLS-encoded SCT list holding one SCT over the precertificate TBS.
    fn sct(&self, tbs: &[u8]) -> Vec<u8> {
        let timestamp = (OffsetDateTime::now_utc().unix_timestamp() as u64 - 30) * 1000;
        let issuer_key_hash = sha256(&self.ca_key.subject_public_key_info());
        let mut signed = vec![0u8, 0u8];
        signed.extend_from_slice(&timestamp.to_be_bytes());
        signed.extend_from_slice(&1u16.to_be_bytes());
        signed.extend_from_slice(&issuer_key_hash);
        signed.extend_from_slice(&(tbs.len() as u32).to_be_bytes()[1..]);
        signed.extend_from_slice(tbs);
        signed.extend_from_slice(&0u16.to_be_bytes());
        let signature = self.ct_key.sign(&signed).expect("an SCT signature");
        let mut sct = vec![0u8];
        sct.extend_from_slice(&sha256(&self.ct_key.subject_public_key_info()));
        sct.extend_from_slice(&timestamp.to_be_bytes());
        sct.extend_from_slice(&0u16.to_be_bytes());
        sct.extend_from_slice(&[4, 3]);
        sct.extend_from_slice(&(signature.len() as u16).to_be_bytes());
        sct.extend_from_slice(&signature);
        let mut list = ((sct.len() + 2) as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&(sct.len() as u16).to_be_bytes());
        list.extend_from_slice(&sct);
        list
    }

    /// The `hashedrekord` entry logging `signature`.
    fn log_entry(&self, message: &[u8], signature: &[u8], certificate: &[u8]) -> Value {
        let body = json!({
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": hex(&sha256(message))}},
                "signature": {"content": B64.encode(signature), "publicKey": {"content": B64.encode(pem(certificate))}},
            },
        })
        .to_string();
        self.logged(&body, "hashedrekord")
    }

    /// The log entry of `body` (of `kind`, version 0.0.1) as the only leaf
    /// of the log: its SET, inclusion proof and signed checkpoint.
    fn logged(&self, body: &str, kind: &str) -> Value {
        let log_id = sha256(&self.rekor_key.subject_public_key_info());
        let integrated_time = OffsetDateTime::now_utc().unix_timestamp() - 10;
        // Canonical JSON: serde_json's maps are sorted and compact.
        let promise = json!({
            "body": B64.encode(body),
            "integratedTime": integrated_time,
            "logID": hex(&log_id),
            "logIndex": 0,
        })
        .to_string();
        let set = self.rekor_key.sign(promise.as_bytes()).expect("a SET");
        let mut leaf = vec![0u8];
        leaf.extend_from_slice(body.as_bytes());
        let root = sha256(&leaf);
        json!({
            "logIndex": "0",
            "logId": {"keyId": B64.encode(log_id)},
            "kindVersion": {"kind": kind, "version": "0.0.1"},
            "integratedTime": integrated_time.to_string(),
            "inclusionPromise": {"signedEntryTimestamp": B64.encode(set)},
            "inclusionProof": {
                "logIndex": "0",
                "rootHash": B64.encode(&root),
                "treeSize": "1",
                "hashes": [],
                "checkpoint": {"envelope": self.checkpoint(&root)},
            },
            "canonicalizedBody": B64.encode(body),
        })
    }

    /// A signed note for a tree of one leaf whose root is `root`.
    fn checkpoint(&self, root: &[u8]) -> String {
        let note = format!("{LOG_ORIGIN}\n1\n{}\n", B64.encode(root));
        let mut signature = sha256(&self.rekor_key.subject_public_key_info())[..4].to_vec();
        signature.extend(self.rekor_key.sign(note.as_bytes()).expect("a signature"));
        format!("{note}\n\u{2014} {LOG_NAME} {}", B64.encode(signature))
    }
}

/// A certificate's PEM, as a log entry names its verifier.
fn pem(certificate: &[u8]) -> String {
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        B64.encode(certificate)
    )
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    digest(&SHA256, bytes).as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The DER of a UTF8String.
fn der_utf8(text: &str) -> Vec<u8> {
    der(0x0c, text.as_bytes())
}

/// The DER of an OCTET STRING.
fn der_octets(bytes: &[u8]) -> Vec<u8> {
    der(0x04, bytes)
}

fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match content.len() {
        n if n < 0x80 => out.push(n as u8),
        n if n < 0x100 => out.extend([0x81, n as u8]),
        n => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(content);
    out
}

/// The first element of a DER SEQUENCE (a certificate's TBS), whole.
fn first_element(sequence: &[u8]) -> &[u8] {
    let inner = &sequence[header_len(sequence)..];
    let (header, len) = (header_len(inner), content_len(inner));
    &inner[..header + len]
}

fn header_len(der: &[u8]) -> usize {
    match der[1] {
        n if n < 0x80 => 2,
        n => 2 + usize::from(n & 0x7f),
    }
}

fn content_len(der: &[u8]) -> usize {
    match der[1] {
        n if n < 0x80 => usize::from(n),
        n => der[2..2 + usize::from(n & 0x7f)]
            .iter()
            .fold(0, |len, b| (len << 8) | usize::from(*b)),
    }
}
