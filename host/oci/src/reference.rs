//! `oci://REGISTRY/REPOSITORY:TAG` and `oci://REGISTRY/REPOSITORY@sha256:HEX`:
//! parsed strictly, since a digest becomes a file name in the content store.

use std::fmt;

use crate::error::OciError;
use crate::model::plugin::OCI_SCHEME;

/// The longest reference accepted, as the distribution spec bounds names.
const MAX_REFERENCE_LEN: usize = 512;

/// Docker Hub's names; the first is the one cosign writes in signatures.
const DOCKER_HUB: [&str; 3] = ["index.docker.io", "docker.io", "registry-1.docker.io"];

/// The port a registry named without one is reached on (HTTPS).
const DEFAULT_PORT: &str = ":443";

/// A plugin in an OCI registry, named by tag or by digest (or both: the
/// digest wins and the tag is only shown).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OciReference {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl OciReference {
    /// Parses `oci://REGISTRY/REPOSITORY[:TAG][@sha256:HEX]`; a tag or a
    /// digest is required.
    pub fn parse(text: &str) -> Result<OciReference, OciError> {
        let invalid = |reason: &str| OciError::InvalidReference {
            reference: text.chars().take(MAX_REFERENCE_LEN).collect(),
            reason: reason.to_owned(),
        };
        if text.len() > MAX_REFERENCE_LEN {
            return Err(invalid("it is longer than 512 bytes"));
        }
        let rest = text
            .strip_prefix(OCI_SCHEME)
            .ok_or_else(|| invalid("it does not start with oci://"))?;
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => {
                if !is_digest(digest) {
                    return Err(invalid(
                        "its digest is not sha256: and 64 lowercase hex digits",
                    ));
                }
                (name, Some(digest.to_owned()))
            }
            None => (rest, None),
        };
        let (registry, path) = name
            .split_once('/')
            .ok_or_else(|| invalid("it names no repository after the registry"))?;
        if registry.is_empty()
            || !registry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        {
            return Err(invalid(
                "its registry is not a host name with an optional port",
            ));
        }
        // A colon after the last slash starts the tag.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag)),
            _ => (path, None),
        };
        if !is_repository(repository) {
            return Err(invalid(
                "its repository is not lowercase letters, digits and . _ - separated by /",
            ));
        }
        if let Some(tag) = tag
            && !is_tag(tag)
        {
            return Err(invalid(
                "its tag is not 1-128 letters, digits, _ . - (not starting with . or -)",
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(invalid("it names neither a tag nor a digest"));
        }
        Ok(OciReference {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest,
        })
    }

    /// The registry: host and optional port.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository inside the registry.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// `REGISTRY/REPOSITORY`: what trust rules and `--allow-unsigned` match.
    pub fn repository_path(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The repository as it compares with the one a signature names
    /// ([`canonical_repository`]).
    pub(crate) fn canonical_repository(&self) -> String {
        canonical(&self.registry, &self.repository)
    }

    /// The tag, if it names one.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The pinned digest, if it names one.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The same repository at `tag`, with no digest.
    pub(crate) fn at_tag(&self, tag: &str) -> OciReference {
        OciReference {
            tag: Some(tag.to_owned()),
            digest: None,
            ..self.clone()
        }
    }

    /// The distribution client's form, addressing `digest` if given.
    pub(crate) fn client(&self, digest: Option<&str>) -> oci_client::Reference {
        match digest.or(self.digest.as_deref()) {
            Some(digest) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.to_owned(),
            ),
            None => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                self.tag.clone().unwrap_or_default(),
            ),
        }
    }

    /// Whether the registry is on loopback, where plain HTTP is used (as
    /// Docker treats 127.0.0.0/8 as an insecure registry by default).
    pub(crate) fn on_loopback(&self) -> bool {
        let host = match self.registry.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
            _ => self.registry.as_str(),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{OCI_SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// A registry as it compares: lowercase, without the default port, and
/// Docker Hub by one name.
pub(crate) fn canonical_registry(registry: &str) -> String {
    let registry = registry.to_ascii_lowercase();
    let host = registry.strip_suffix(DEFAULT_PORT).unwrap_or(&registry);
    if DOCKER_HUB.contains(&host) {
        DOCKER_HUB[0].to_owned()
    } else {
        host.to_owned()
    }
}

/// The repository a Docker reference (`[REGISTRY/]REPOSITORY[:TAG][@DIGEST]`,
/// as a signature payload's `docker-reference` names it) is in, as
/// `REGISTRY/REPOSITORY`, read as Docker and cosign read it: the first part
/// is the registry only if it has a `.` or a `:` or is `localhost`, else
/// the repository is Docker Hub's, where a one-part name is under `library/`.
pub(crate) fn canonical_repository(reference: &str) -> String {
    let name = reference
        .split_once('@')
        .map_or(reference, |(name, _)| name);
    let name = match name.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => name,
        _ => name,
    };
    match name.split_once('/') {
        Some((registry, repository))
            if registry.contains(['.', ':']) || registry == "localhost" =>
        {
            canonical(registry, repository)
        }
        _ => canonical(DOCKER_HUB[0], name),
    }
}

fn canonical(registry: &str, repository: &str) -> String {
    let registry = canonical_registry(registry);
    if registry == DOCKER_HUB[0] && !repository.contains('/') {
        format!("{registry}/library/{repository}")
    } else {
        format!("{registry}/{repository}")
    }
}

/// `sha256:` and 64 lowercase hex digits: the only digests accepted, from
/// a user or a registry.
pub(crate) fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

fn is_repository(text: &str) -> bool {
    !text.is_empty()
        && text.split('/').all(|part| {
            !part.is_empty()
                && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && part.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                })
        })
}

fn is_tag(text: &str) -> bool {
    (1..=128).contains(&text.len())
        && text.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn r41_references_parse_tags_digests_and_ports() {
        let r = OciReference::parse("oci://127.0.0.1:5000/tools/echo:1.0").unwrap();
        assert_eq!(
            (r.registry(), r.repository(), r.tag(), r.digest()),
            ("127.0.0.1:5000", "tools/echo", Some("1.0"), None)
        );
        assert!(r.on_loopback());
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/tools/echo:1.0");
        let pinned = OciReference::parse(&format!("oci://ghcr.io/a/b@{DIGEST}")).unwrap();
        assert_eq!((pinned.tag(), pinned.digest()), (None, Some(DIGEST)));
        assert!(!pinned.on_loopback());
        assert_eq!(pinned.repository_path(), "ghcr.io/a/b");
    }

    #[test]
    fn r41_repositories_compare_as_cosign_names_them() {
        let prod = OciReference::parse("oci://ghcr.io/acme/prod-tool:1.0").unwrap();
        for same in [
            "ghcr.io/acme/prod-tool",
            "ghcr.io:443/acme/prod-tool",
            "GHCR.io/acme/prod-tool:2.0",
            &format!("ghcr.io/acme/prod-tool@{DIGEST}"),
            &format!("ghcr.io/acme/prod-tool:1.0@{DIGEST}"),
        ] {
            assert_eq!(
                canonical_repository(same),
                prod.canonical_repository(),
                "{same}"
            );
        }
        for other in [
            "ghcr.io/acme/sandbox-tool",
            "ghcr.io/acme/prod-tool/x",
            "ghcr.io:8443/acme/prod-tool",
            "evil.example/acme/prod-tool",
            "acme/prod-tool",
        ] {
            assert_ne!(
                canonical_repository(other),
                prod.canonical_repository(),
                "{other}"
            );
        }
        // Docker Hub, however written.
        let hub = OciReference::parse("oci://docker.io/ubuntu:24.04").unwrap();
        assert_eq!(hub.canonical_repository(), "index.docker.io/library/ubuntu");
        for same in [
            "ubuntu",
            "ubuntu:24.04",
            "library/ubuntu",
            "docker.io/library/ubuntu",
            "index.docker.io/library/ubuntu",
            "registry-1.docker.io/library/ubuntu",
        ] {
            assert_eq!(
                canonical_repository(same),
                hub.canonical_repository(),
                "{same}"
            );
        }
        // A registry with a port, no dot: still the registry.
        let local = OciReference::parse("oci://localhost:5000/tools/echo:1").unwrap();
        assert_eq!(
            canonical_repository("localhost:5000/tools/echo:1"),
            local.canonical_repository()
        );
        assert_eq!(
            canonical_repository("localhost/tools/echo"),
            "localhost/tools/echo"
        );
    }

    #[test]
    fn r41_references_refuse_what_could_escape_the_store() {
        for bad in [
            "ghcr.io/a/b:1",
            "oci://ghcr.io/a/b",
            "oci://ghcr.io:1",
            "oci://ghcr.io/A/b:1",
            "oci://ghcr.io/a/../b:1",
            "oci://ghcr.io/a/b@sha256:../../etc/passwd",
            "oci://ghcr.io/a/b@sha512:00",
            "oci://ghcr.io/a/b:-x",
            "oci://gh cr.io/a/b:1",
        ] {
            let err = OciReference::parse(bad).unwrap_err();
            assert!(
                matches!(&err, OciError::InvalidReference { reference, .. } if reference == bad),
                "{bad}: {err}"
            );
        }
    }
}
