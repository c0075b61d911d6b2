//! The flags every command takes to pull `oci://` plugins (R41): trust,
//! `--allow-unsigned`, `--locked`, plain HTTP. Apart from `oci.rs`'s
//! commands, which load plugins through `common.rs`, so that neither
//! imports the other both ways.

use std::path::{Path, PathBuf};

use clap::Args;
use toolhost::oci::{Distribution, LOCK_FILE, Lock, PublicKey, TrustPolicy};

use crate::{Failure, usage};

/// How `oci://` plugins are pulled and whom they must be signed by.
#[derive(Args, Clone, Default)]
pub(crate) struct OciArgs {
    /// Trust policy file (TOML `[[trust]]` rules: repository pattern, keys,
    /// unsigned) for `oci://` plugins.
    #[arg(long = "trust", value_name = "FILE")]
    trust: Vec<PathBuf>,
    /// Trust a public key (PEM, P-256, as `cosign.pub`) to sign the plugins
    /// of repositories matching REPO (REGISTRY/REPOSITORY, `*` globs).
    #[arg(long = "trust-key", value_name = "REPO=KEY.pub")]
    trust_keys: Vec<String>,
    /// Load `oci://` plugins of repositories matching REPO without a valid
    /// signature (refused by default).
    #[arg(long = "allow-unsigned", value_name = "REPO")]
    allow_unsigned: Vec<String>,
    /// Refuse an `oci://` tag that is not in ./toolhost.lock or that now
    /// names another digest; when the registry is unreachable, load the
    /// locked digest from the content store.
    #[arg(long)]
    locked: bool,
    /// Reach this registry (HOST:PORT) over plain HTTP; loopback
    /// registries always are.
    #[arg(long = "plain-http", value_name = "REGISTRY")]
    plain_http: Vec<String>,
}

impl OciArgs {
    /// The distribution these flags describe: its content store under
    /// `state/oci`, TLS roots from `--http-ca`.
    pub(crate) fn distribution(
        &self,
        state: &Path,
        roots: &[PathBuf],
    ) -> Result<Distribution, Failure> {
        let mut policy = TrustPolicy::new();
        for file in &self.trust {
            policy = policy.read(file).map_err(|e| usage(e.into()))?;
        }
        for spec in &self.trust_keys {
            let Some((pattern, key)) = spec.split_once('=') else {
                return Err(usage(anyhow::anyhow!(
                    "`--trust-key {spec}` is not REPO=KEY.pub; write for example `--trust-key 'ghcr.io/acme/*=acme.pub'`"
                )));
            };
            let key = PublicKey::read(Path::new(key)).map_err(|e| usage(e.into()))?;
            policy = policy.trust(pattern, key);
        }
        for pattern in &self.allow_unsigned {
            policy = policy.allow_unsigned(pattern);
        }
        let mut distribution = Distribution::new(state.join("oci")).trust(policy);
        for registry in &self.plain_http {
            distribution = distribution.plain_http(registry);
        }
        for pem in roots {
            distribution = distribution
                .root_certificates(pem)
                .map_err(|e| usage(e.into()))?;
        }
        if self.locked {
            let path = PathBuf::from(LOCK_FILE);
            let lock = Lock::read(&path).map_err(|e| usage(e.into()))?;
            distribution = distribution.locked(path, lock);
        }
        Ok(distribution)
    }
}
