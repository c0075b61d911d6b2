//! The trust policy: which keys and keyless identities may sign the plugins
//! of which repositories, and which repositories may be loaded unsigned.
//! Deny by default: a repository no rule names is refused.

use std::path::Path;

use serde::Deserialize;
use wildmatch::WildMatch;

use super::keyless::{KeylessSigner, SigstoreRoot};
use super::sign::PublicKey;
use crate::error::OciError;
use crate::files::read_regular_file;

/// The largest trust policy file read.
const MAX_POLICY_BYTES: u64 = 1024 * 1024;

/// Keys and keyless signers per repository pattern, repositories allowed
/// unsigned, and repositories whose signatures may have been made for
/// another repository. A pattern matches `REGISTRY/REPOSITORY`; `*` matches
/// any run of characters (`/` too), `?` one.
#[derive(Debug, Clone, Default)]
pub struct TrustPolicy {
    rules: Vec<(String, PublicKey)>,
    keyless: Vec<(String, KeylessSigner)>,
    unsigned: Vec<String>,
    any_reference: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    trust: Vec<RuleFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    repository: String,
    #[serde(default)]
    keys: Vec<String>,
    #[serde(default)]
    keyless: Vec<KeylessFile>,
    #[serde(default, rename = "trusted-root")]
    trusted_root: Option<String>,
    #[serde(default)]
    unsigned: bool,
    #[serde(default, rename = "any-reference")]
    any_reference: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeylessFile {
    identity: String,
    issuer: String,
}

impl TrustPolicy {
    /// Trusts nothing: every `oci://` plugin is refused.
    pub fn new() -> TrustPolicy {
        TrustPolicy::default()
    }

    /// Trusts `key` to sign plugins of the repositories `pattern` matches.
    pub fn trust(mut self, pattern: impl Into<String>, key: PublicKey) -> TrustPolicy {
        self.rules.push((pattern.into(), key));
        self
    }

    /// Trusts keyless (Sigstore) signatures by `signer` for the
    /// repositories `pattern` matches.
    pub fn trust_keyless(
        mut self,
        pattern: impl Into<String>,
        signer: KeylessSigner,
    ) -> TrustPolicy {
        self.keyless.push((pattern.into(), signer));
        self
    }

    /// Loads plugins of the repositories `pattern` matches without a valid
    /// signature (`--allow-unsigned`); a trusted key's signature is still
    /// checked when there is one.
    pub fn allow_unsigned(mut self, pattern: impl Into<String>) -> TrustPolicy {
        self.unsigned.push(pattern.into());
        self
    }

    /// Accepts, for the repositories `pattern` matches, a key-pair
    /// signature whose payload names another repository (or none): for a
    /// repository that holds copies of another's plugins, signatures
    /// included (`cosign copy`). By default such a signature is refused, so
    /// that one signed for `…/sandbox-tool` cannot vouch for `…/prod-tool`
    /// when both hold the same manifest.
    pub fn any_reference(mut self, pattern: impl Into<String>) -> TrustPolicy {
        self.any_reference.push(pattern.into());
        self
    }

    /// Reads a policy file (TOML) and adds its rules:
    ///
    /// ```toml
    /// [[trust]]
    /// repository = "ghcr.io/acme/*"
    /// keys = ["acme.pub"]          # relative to this file
    ///
    /// [[trust]]                   # keyless: Sigstore bundles
    /// repository = "ghcr.io/acme/*"
    /// keyless = [{ identity = "https://github.com/acme/tools/.github/workflows/release.yml@refs/heads/main", issuer = "https://token.actions.githubusercontent.com" }]
    /// trusted-root = "trusted_root.json"  # default: Sigstore's public-good root
    ///
    /// [[trust]]
    /// repository = "127.0.0.1:5000/scratch/*"
    /// unsigned = true
    ///
    /// [[trust]]                   # copies, signatures included, of another repository's plugins
    /// repository = "registry.internal/mirror/*"
    /// keys = ["acme.pub"]
    /// any-reference = true
    /// ```
    pub fn read(mut self, path: &Path) -> Result<TrustPolicy, OciError> {
        let file_error = |reason: String| OciError::File {
            path: path.to_owned(),
            reason,
        };
        let bytes =
            read_regular_file(path, MAX_POLICY_BYTES).map_err(|e| file_error(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| file_error("it is not UTF-8".into()))?;
        let file: PolicyFile =
            toml::from_str(&text).map_err(|e| file_error(format!("not a trust policy: {e}")))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for rule in file.trust {
            for key in &rule.keys {
                self.rules
                    .push((rule.repository.clone(), PublicKey::read(&base.join(key))?));
            }
            if !rule.keyless.is_empty() {
                let root = match &rule.trusted_root {
                    Some(file) => SigstoreRoot::read(&base.join(file))?,
                    None => SigstoreRoot::public_good()?,
                };
                for signer in rule.keyless {
                    let signer = KeylessSigner::new(signer.identity, signer.issuer, root.clone());
                    self.keyless.push((rule.repository.clone(), signer));
                }
            }
            if rule.any_reference {
                self.any_reference.push(rule.repository.clone());
            }
            if rule.unsigned {
                self.unsigned.push(rule.repository);
            }
        }
        Ok(self)
    }

    /// The keys trusted for `repository` (REGISTRY/REPOSITORY).
    pub(crate) fn keys(&self, repository: &str) -> Vec<&PublicKey> {
        self.rules
            .iter()
            .filter(|(pattern, _)| WildMatch::new(pattern).matches(repository))
            .map(|(_, key)| key)
            .collect()
    }

    /// The keyless signers trusted for `repository`.
    pub(crate) fn keyless(&self, repository: &str) -> Vec<&KeylessSigner> {
        self.keyless
            .iter()
            .filter(|(pattern, _)| WildMatch::new(pattern).matches(repository))
            .map(|(_, signer)| signer)
            .collect()
    }

    /// Whether `repository` may load without a valid signature.
    pub(crate) fn unsigned_allowed(&self, repository: &str) -> bool {
        self.unsigned
            .iter()
            .any(|pattern| WildMatch::new(pattern).matches(repository))
    }

    /// Whether `repository` accepts signatures made for another repository.
    pub(crate) fn any_reference_allowed(&self, repository: &str) -> bool {
        self.any_reference
            .iter()
            .any(|pattern| WildMatch::new(pattern).matches(repository))
    }
}
