//! The OCI image manifest and its descriptors, as read from a registry
//! (hostile: every field checked before use) and as pushed, and the errors
//! about what a registry sent that pulls, pushes and sessions share.

use std::collections::BTreeMap;

use oci_client::manifest::OciDescriptor;
use serde::{Deserialize, Serialize};

use super::reference::OciReference;
use super::sha256_digest;
use crate::error::OciError;

/// The OCI image manifest media type, the only manifest kind pulled.
pub(super) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// The config media type of a cosign signature manifest.
pub(super) const OCI_IMAGE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// An OCI image manifest, as read from a registry (hostile: every field
/// checked before use).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Manifest {
    pub(super) schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) media_type: Option<String>,
    pub(super) config: Descriptor,
    pub(super) layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Descriptor {
    pub(super) media_type: String,
    pub(super) digest: String,
    pub(super) size: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) annotations: BTreeMap<String, String>,
}

impl Descriptor {
    pub(super) fn of(media_type: &str, bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.to_owned(),
            digest: sha256_digest(bytes),
            size: bytes.len() as u64,
            annotations: BTreeMap::new(),
        }
    }

    pub(super) fn client(&self) -> OciDescriptor {
        OciDescriptor {
            media_type: self.media_type.clone(),
            digest: self.digest.clone(),
            size: i64::try_from(self.size).unwrap_or(i64::MAX),
            ..OciDescriptor::default()
        }
    }
}

/// `bytes` are what the digest `expected` names.
pub(super) fn check_digest(
    reference: &OciReference,
    what: &'static str,
    expected: &str,
    bytes: &[u8],
) -> Result<(), OciError> {
    check_sha256(reference, what, expected, sha256_digest(bytes))
}

/// `actual`, the digest of what arrived, is `expected`.
pub(super) fn check_sha256(
    reference: &OciReference,
    what: &'static str,
    expected: &str,
    actual: String,
) -> Result<(), OciError> {
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

pub(super) fn too_large(
    reference: &OciReference,
    digest: &str,
    what: &'static str,
    limit: u64,
) -> OciError {
    OciError::TooLarge {
        reference: reference.to_string(),
        digest: digest.to_owned(),
        what,
        limit,
    }
}

pub(super) fn not_a_plugin(reference: &OciReference, digest: &str, reason: &str) -> OciError {
    OciError::NotAPlugin {
        reference: reference.to_string(),
        digest: digest.to_owned(),
        reason: reason.to_owned(),
    }
}
