//! Registry credentials: `TOOLHOST_REGISTRY_*` variables scoped to the
//! registries they name, else the registry's entry in Docker's
//! `config.json`. No credential helper is run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use super::reference::canonical_registry;
use crate::error::OciError;
use crate::files::read_regular_file;

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
pub(super) const USERNAME_VARIABLE: &str = "TOOLHOST_REGISTRY_USERNAME";
pub(super) const PASSWORD_VARIABLE: &str = "TOOLHOST_REGISTRY_PASSWORD";
pub(super) const HOSTS_VARIABLE: &str = "TOOLHOST_REGISTRY_HOSTS";

/// Said once per process, however often the environment is read.
static UNSCOPED_WARNING: std::sync::Once = std::sync::Once::new();

/// The largest Docker config file read.
pub(super) const MAX_DOCKER_CONFIG_BYTES: u64 = 1 << 20;

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

    pub(super) fn auth(&self, registry: &str) -> RegistryAuth {
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
