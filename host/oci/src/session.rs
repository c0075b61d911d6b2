//! One operation's conversation with one registry: the client (HTTPS, or
//! plain HTTP for loopback and named registries), authentication only in
//! answer to the registry's own challenge, bounded manifest reads, blob
//! streams checked against their digests, pushes, and what a failed
//! request means (offline, not found, refused).

use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt as _;
use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, SizedStream,
};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, RegistryOperation};

use super::credentials::{HOSTS_VARIABLE, PASSWORD_VARIABLE, USERNAME_VARIABLE};
use super::manifest::{Descriptor, Manifest, OCI_MANIFEST, check_sha256, too_large};
use super::reference::OciReference;
use super::{
    Distribution, MAX_OCI_MANIFEST_BYTES, OCI_CONNECT_TIMEOUT, OCI_PULL_TIMEOUT, sha256_digest,
};
use crate::error::OciError;

/// Why a session is refused when the process has no rustls crypto provider.
const NO_CRYPTO_PROVIDER: &str = "no process-wide rustls crypto provider is installed, and the OCI client needs one; install one before pulling or pushing, e.g. `rustls::crypto::ring::default_provider().install_default()`";

/// One operation on one reference: its client, credentials and whether the
/// registry has been found unreachable.
pub(super) struct Session<'a> {
    pub(super) reference: &'a OciReference,
    client: Client,
    /// Manifests are read with our own client, so their size is bounded
    /// while they arrive (oci-client reads a whole body first).
    http: reqwest::Client,
    scheme: &'static str,
    auth: RegistryAuth,
    /// Once the registry has challenged a manifest request (401): its pull
    /// token, or `None` when it takes basic authentication. Until then
    /// manifests are asked for anonymously.
    token: Option<Option<String>>,
    /// Why the registry is unreachable, once found so.
    pub(super) offline: Option<String>,
    /// How long the registry may send nothing ([`super::OCI_READ_TIMEOUT`]).
    read_timeout: Duration,
}

/// How a registry request failed: unreachable (where a locked or pinned
/// digest may load from the store), not found (a missing signature tag is
/// no signature), or refused with an error.
pub(super) enum Failure {
    Unreachable(String),
    NotFound,
    Refused(OciError),
}

impl Failure {
    pub(super) fn into_error(self, reference: &OciReference) -> OciError {
        match self {
            Failure::Unreachable(reason) => OciError::Offline {
                reference: reference.to_string(),
                reason,
            },
            Failure::NotFound => OciError::Registry {
                reference: reference.to_string(),
                reason: "the registry has no such manifest or repository".into(),
                source: None,
            },
            Failure::Refused(e) => e,
        }
    }
}

impl Distribution {
    /// A session for `reference`'s registry: HTTPS, or plain HTTP when the
    /// registry is named by `plain_http`, or is on loopback and does not
    /// speak HTTPS (as Docker treats 127.0.0.0/8: HTTPS tried first).
    pub(super) async fn session<'a>(
        &self,
        reference: &'a OciReference,
    ) -> Result<Session<'a>, OciError> {
        // oci-client makes its own reqwest client, with rustls but no
        // crypto provider: it takes the process's, which is the
        // embedder's to install (a library installs no process-wide state).
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(OciError::Registry {
                reference: reference.to_string(),
                reason: NO_CRYPTO_PROVIDER.into(),
                source: None,
            });
        }
        let http = self.http_client(reference)?;
        let plain = self.plain_http.iter().any(|r| r == reference.registry())
            || (reference.on_loopback() && !speaks_https(&http, reference).await);
        let config = ClientConfig {
            protocol: if plain {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            extra_root_certificates: self
                .roots
                .iter()
                .map(|pem| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.clone(),
                })
                .collect(),
            platform_resolver: None,
            connect_timeout: Some(OCI_CONNECT_TIMEOUT),
            read_timeout: Some(self.read_timeout),
            ..ClientConfig::default()
        };
        Ok(Session {
            reference,
            client: Client::new(config),
            http,
            scheme: if plain { "http" } else { "https" },
            auth: self.credentials.auth(reference.registry()),
            token: None,
            offline: None,
            read_timeout: self.read_timeout,
        })
    }

    /// The client manifests are read with: the registry CAs trusted, no
    /// redirects followed.
    fn http_client(&self, reference: &OciReference) -> Result<reqwest::Client, OciError> {
        let mut http = reqwest::Client::builder()
            .connect_timeout(OCI_CONNECT_TIMEOUT)
            .read_timeout(self.read_timeout)
            .redirect(reqwest::redirect::Policy::none());
        for pem in &self.roots {
            let certificate =
                reqwest::Certificate::from_pem(pem).map_err(|e| OciError::Registry {
                    reference: reference.to_string(),
                    reason: format!("a --http-ca certificate is not PEM: {e}"),
                    source: Some(Box::new(e)),
                })?;
            http = http.add_root_certificate(certificate);
        }
        http.build().map_err(|e| OciError::Registry {
            reference: reference.to_string(),
            reason: error_chain(&e),
            source: Some(Box::new(e)),
        })
    }
}

impl Session<'_> {
    /// A refusal with no client error under it.
    pub(super) fn refused(&self, reason: String) -> OciError {
        OciError::Registry {
            reference: self.reference.to_string(),
            reason,
            source: None,
        }
    }

    /// A refusal caused by the client's error `e`, its chain the reason.
    fn refused_by(&self, e: impl std::error::Error + Send + Sync + 'static) -> OciError {
        OciError::Registry {
            reference: self.reference.to_string(),
            reason: error_chain(&e),
            source: Some(Box::new(e)),
        }
    }

    fn failure(&self, e: OciDistributionError) -> Failure {
        let missing = |code: &OciErrorCode| {
            matches!(
                code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NotFound | OciErrorCode::NameUnknown
            )
        };
        match e {
            OciDistributionError::RequestError(e) if unreachable(&e) => {
                Failure::Unreachable(error_chain(&e))
            }
            OciDistributionError::RegistryError { envelope, .. }
                if envelope.errors.iter().any(|e| missing(&e.code)) =>
            {
                Failure::NotFound
            }
            OciDistributionError::ServerError { code: 404, .. } => Failure::NotFound,
            OciDistributionError::UnauthorizedError { .. } => Failure::Refused(self.unauthorized()),
            other => Failure::Refused(self.refused_by(other)),
        }
    }

    /// A manifest request that failed: for want of the registry, or
    /// refused.
    fn request_failure(&self, e: reqwest::Error) -> Failure {
        if unreachable(&e) {
            Failure::Unreachable(error_chain(&e))
        } else {
            Failure::Refused(self.refused_by(e))
        }
    }

    /// The registry answered 401 to what credentials Toolhost had for it.
    fn unauthorized(&self) -> OciError {
        let registry = self.reference.registry();
        self.refused(format!(
            "it answered 401 Unauthorized: it wants credentials for {registry} that Toolhost was not given, or refused the ones given; log in (`docker login {registry}`) or set {USERNAME_VARIABLE}, {PASSWORD_VARIABLE} and {HOSTS_VARIABLE}={registry}"
        ))
    }

    /// The registry went silent for the read timeout while `descriptor`
    /// was arriving.
    fn silent(&self, what: &str, descriptor: &Descriptor) -> OciError {
        self.refused(format!(
            "it timed out: nothing arrived for {} (OCI_READ_TIMEOUT) while its {what} {} was being pulled, so the pull was abandoned; retry, and if it recurs check the registry and the network to it",
            humantime::format_duration(self.read_timeout),
            descriptor.digest
        ))
    }

    pub(super) async fn authenticate(&self, operation: RegistryOperation) -> Result<(), OciError> {
        self.client
            .auth(&self.reference.client(None), &self.auth, operation)
            .await
            .map(|_| ())
            .map_err(|e| self.failure(e).into_error(self.reference))
    }

    /// The digest the reference's tag names now, and the manifest's
    /// bytes (whose SHA-256 it is: a registry's digest header is not
    /// trusted).
    pub(super) async fn resolve(&mut self) -> Result<(String, Vec<u8>), Failure> {
        let bytes = self.manifest_bytes(self.reference, "manifest").await?;
        Ok((sha256_digest(&bytes), bytes))
    }

    /// Answers the registry's challenge, keeping its pull token, or `None`
    /// for basic authentication (oci-client reads the challenge of
    /// `GET /v2/`, asks the token service with the credentials, and keeps
    /// the token for blob pulls too).
    async fn challenged(&mut self) -> Result<(), Failure> {
        let token = self
            .client
            .auth(
                &self.reference.client(None),
                &self.auth,
                RegistryOperation::Pull,
            )
            .await
            .map_err(|e| self.failure(e))?;
        self.token = Some(token);
        Ok(())
    }

    /// A manifest request, with the token or the credentials once the
    /// registry has challenged.
    fn manifest_request(&self, url: &str) -> reqwest::RequestBuilder {
        let request = self
            .http
            .get(url)
            .header(http::header::ACCEPT, OCI_MANIFEST);
        match (&self.token, &self.auth) {
            (Some(Some(token)), _) => request.bearer_auth(token),
            (Some(None), RegistryAuth::Basic(user, password)) => {
                request.basic_auth(user, Some(password))
            }
            _ => request,
        }
    }

    /// The manifest `reference` names, read with a bound: refused as soon
    /// as it passes [`MAX_OCI_MANIFEST_BYTES`].
    pub(super) async fn manifest_bytes(
        &mut self,
        reference: &OciReference,
        what: &'static str,
    ) -> Result<Vec<u8>, Failure> {
        let url = format!(
            "{}://{}/v2/{}/manifests/{}",
            self.scheme,
            reference.registry(),
            reference.repository(),
            reference.digest().or(reference.tag()).unwrap_or_default()
        );
        let response = self.get_manifest(&url).await?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(Failure::NotFound);
        }
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(Failure::Refused(self.unauthorized()));
        }
        if !status.is_success() {
            return Err(Failure::Refused(
                self.refused(format!("GET of the {what} answered {status}")),
            ));
        }
        let digest = reference.digest().unwrap_or("(by tag)");
        self.read_manifest(response, digest, what).await
    }

    /// The answer to a GET of the manifest at `url`, asked again with
    /// credentials if the registry challenged it.
    async fn get_manifest(&mut self, url: &str) -> Result<reqwest::Response, Failure> {
        let mut response = self
            .manifest_request(url)
            .send()
            .await
            .map_err(|e| self.request_failure(e))?;
        // Credentials go only in answer to this registry's own challenge,
        // never unasked: a registry that does not ask gets none.
        if response.status() == reqwest::StatusCode::UNAUTHORIZED && self.token.is_none() {
            self.challenged().await?;
            if matches!(
                (&self.token, &self.auth),
                (Some(Some(_)), _) | (_, RegistryAuth::Basic(..))
            ) {
                response = self
                    .manifest_request(url)
                    .send()
                    .await
                    .map_err(|e| self.request_failure(e))?;
            }
        }
        Ok(response)
    }

    /// A manifest response's body, refused as soon as it passes
    /// [`MAX_OCI_MANIFEST_BYTES`].
    async fn read_manifest(
        &self,
        mut response: reqwest::Response,
        digest: &str,
        what: &'static str,
    ) -> Result<Vec<u8>, Failure> {
        let too_large = || {
            Failure::Refused(too_large(
                self.reference,
                digest,
                what,
                MAX_OCI_MANIFEST_BYTES,
            ))
        };
        if response
            .content_length()
            .is_some_and(|n| n > MAX_OCI_MANIFEST_BYTES)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.request_failure(e))?
        {
            if (bytes.len() + chunk.len()) as u64 > MAX_OCI_MANIFEST_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    /// Streams the blob `descriptor` into `out`, refusing it as soon as it
    /// passes its declared size or `max`, and checking its digest.
    pub(super) async fn pull(
        &mut self,
        descriptor: &Descriptor,
        max: u64,
        what: &'static str,
        out: &mut impl std::io::Write,
    ) -> Result<(), OciError> {
        let reference = self.reference;
        let limit = descriptor.size.min(max);
        let mut stream = self.blob_stream(descriptor, limit, what).await?;
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        let mut total = 0u64;
        let store_error = |e: std::io::Error| OciError::Store {
            path: PathBuf::from(&descriptor.digest),
            reason: e.to_string(),
            source: Some(Box::new(e)),
        };
        while let Some(chunk) = stream.stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                // oci-client's own digest check ends the stream with an
                // error (whatever the length, and against the registry's
                // digest header when it names another); ours below decides,
                // naming both digests.
                Err(e) if is_digest_failure(&e) => break,
                Err(e) if timed_out(&e) => return Err(self.silent(what, descriptor)),
                Err(e) => return Err(self.refused(format!("reading its {what}: {e}"))),
            };
            total += chunk.len() as u64;
            if total > limit {
                return Err(too_large(reference, &descriptor.digest, what, limit));
            }
            context.update(&chunk);
            out.write_all(&chunk).map_err(store_error)?;
        }
        let actual = format!("sha256:{}", hex::encode(context.finish()));
        check_sha256(reference, what, &descriptor.digest, actual)?;
        out.flush().map_err(store_error)
    }

    /// The blob `descriptor`'s stream (with the credentials, if any),
    /// refused when the registry is offline or declares it past `limit`.
    async fn blob_stream(
        &self,
        descriptor: &Descriptor,
        limit: u64,
        what: &'static str,
    ) -> Result<SizedStream, OciError> {
        let reference = self.reference;
        if let Some(why) = &self.offline {
            return Err(OciError::Offline {
                reference: reference.to_string(),
                reason: why.clone(),
            });
        }
        self.client
            .store_auth_if_needed(reference.registry(), &self.auth)
            .await;
        let stream = self
            .client
            .pull_blob_stream(&reference.client(None), &descriptor.client())
            .await
            .map_err(|e| self.failure(e).into_error(reference))?;
        if stream.content_length.is_some_and(|n| n > limit) {
            return Err(too_large(reference, &descriptor.digest, what, limit));
        }
        Ok(stream)
    }

    pub(super) async fn push_blob(
        &self,
        descriptor: &Descriptor,
        bytes: Vec<u8>,
    ) -> Result<(), OciError> {
        let image = self.reference.client(None);
        if self
            .client
            .blob_exists(&image, &descriptor.digest)
            .await
            .unwrap_or(false)
        {
            return Ok(());
        }
        self.client
            .push_blob(&image, bytes, &descriptor.digest)
            .await
            .map(|_| ())
            .map_err(|e| self.failure(e).into_error(self.reference))
    }

    /// Pushes `manifest` to `reference` (a tag); its digest.
    pub(super) async fn push_manifest(
        &self,
        reference: &OciReference,
        manifest: &Manifest,
    ) -> Result<String, OciError> {
        let bytes = serde_json::to_vec(manifest).map_err(|e| OciError::Registry {
            reference: self.reference.to_string(),
            reason: e.to_string(),
            source: Some(Box::new(e)),
        })?;
        let digest = sha256_digest(&bytes);
        self.client
            .push_manifest_raw(
                &reference.client(None),
                bytes,
                http::HeaderValue::from_static(OCI_MANIFEST),
            )
            .await
            .map_err(|e| self.failure(e).into_error(self.reference))?;
        Ok(digest)
    }
}

/// Whether a loopback registry answers the distribution API's base check
/// (`GET /v2/`) over HTTPS, or does not answer it over plain HTTP either
/// (then HTTPS, whose error says more, and an unreachable registry stays
/// unreachable).
async fn speaks_https(http: &reqwest::Client, reference: &OciReference) -> bool {
    let base = |scheme: &str| format!("{scheme}://{}/v2/", reference.registry());
    if http.get(base("https")).send().await.is_ok() {
        return true;
    }
    let answered = |status: reqwest::StatusCode| {
        status.is_success() || status == reqwest::StatusCode::UNAUTHORIZED
    };
    !matches!(http.get(base("http")).send().await, Ok(r) if answered(r.status()))
}

/// Runs a pull or push within [`OCI_PULL_TIMEOUT`].
pub(super) async fn bounded<T>(
    reference: &OciReference,
    work: impl Future<Output = Result<T, OciError>>,
) -> Result<T, OciError> {
    tokio::time::timeout(OCI_PULL_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| {
            Err(OciError::TimedOut {
                reference: reference.to_string(),
                limit: OCI_PULL_TIMEOUT,
            })
        })
}

/// Whether a request failed for want of a registry (no connection, no
/// answer in time), not for a TLS failure (an untrusted certificate is the
/// registry refused, not offline).
fn unreachable(e: &reqwest::Error) -> bool {
    if !(e.is_connect() || e.is_timeout()) {
        return false;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = source {
        if tls_failure(cause) {
            return false;
        }
        source = cause.source();
    }
    true
}

/// Whether `e` is a TLS error, itself or inside (nested) I/O errors.
fn tls_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    if e.is::<rustls::Error>() {
        return true;
    }
    e.downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
        .is_some_and(|inner| tls_failure(inner))
}

/// Whether a blob stream ended with oci-client's digest check failing.
fn is_digest_failure(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<oci_client::errors::DigestError>())
}

/// Whether `e` is a read that timed out, itself or inside (nested) I/O
/// errors (oci-client wraps reqwest's body errors in one).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(e) = e.downcast_ref::<reqwest::Error>() {
        return e.is_timeout();
    }
    e.downcast_ref::<std::io::Error>().is_some_and(|io| {
        io.kind() == std::io::ErrorKind::TimedOut
            || io.get_ref().is_some_and(|inner| timed_out(inner))
    })
}

/// An error and its sources on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::test_registry::{artifact, hostile, ok, unsigned};
    use super::*;
    use crate::Credentials;

    #[tokio::test]
    async fn r41_a_manifest_past_its_bound_is_refused_while_it_arrives() {
        // No Content-Length: the body runs until the connection closes.
        let (address, _) = hostile(|_| {
            let mut response = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
            response.resize(response.len() + (MAX_OCI_MANIFEST_BYTES as usize) * 2, b' ');
            response
        })
        .await;
        let store = tempfile::tempdir().unwrap();
        let distribution = unsigned(store.path());
        let reference = format!("oci://{address}/big/manifest:1");
        let err = distribution.fetch(&reference, 1 << 20).await.unwrap_err();
        assert!(
            matches!(&err, OciError::TooLarge { what: "manifest", limit, .. } if *limit == MAX_OCI_MANIFEST_BYTES),
            "{err}"
        );
        assert!(err.to_string().starts_with(&reference), "{err}");
        let kept = std::fs::read_dir(store.path().join("blobs/sha256"))
            .map(|entries| entries.count())
            .unwrap_or(0);
        assert_eq!(kept, 0, "nothing of it is kept");
    }

    #[tokio::test]
    async fn r41_an_untrusted_certificate_is_a_refusal_not_an_offline_registry() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Not TLS: the handshake fails, as with an untrusted certificate.
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let _ = std::io::Write::write_all(&mut stream, b"HTTP/1.1 400 no\r\n\r\n");
            }
        });
        let tls = toolhost_core::tls::client_config(&[] as &[&std::path::Path]).unwrap();
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured((*tls).clone())
            .build()
            .unwrap();
        let e = client
            .get(format!("https://127.0.0.1:{port}/v2/"))
            .send()
            .await
            .unwrap_err();
        assert!(!unreachable(&e), "{}", error_chain(&e));
        // A closed port is unreachable.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let e = client
            .get(format!("https://127.0.0.1:{port}/v2/"))
            .send()
            .await
            .unwrap_err();
        assert!(unreachable(&e), "{}", error_chain(&e));
    }

    #[tokio::test]
    async fn r41_a_layer_of_other_bytes_is_a_digest_mismatch_naming_both_digests() {
        let layer = [7u8; 64];
        let forged = b"not the layer".to_vec();
        let same_length = [8u8; 64];
        for (served, headers) in [
            // Shorter than declared: oci-client's own check ended the stream.
            (forged, String::new()),
            // The registry's digest header vouching for the forged bytes.
            (
                same_length.to_vec(),
                format!("Docker-Content-Digest: {}\r\n", sha256_digest(&same_length)),
            ),
        ] {
            let response = ok(&served, served.len(), &headers);
            let (address, _) = artifact(&layer, response).await;
            let store = tempfile::tempdir().unwrap();
            let reference = format!("oci://{address}/forged/layer:1");
            let err = unsigned(store.path())
                .fetch(&reference, 1 << 20)
                .await
                .unwrap_err();
            match &err {
                OciError::DigestMismatch {
                    reference: named,
                    what: "layer",
                    expected,
                    actual,
                } => {
                    assert_eq!(named, &reference);
                    assert_eq!(expected, &sha256_digest(&layer));
                    assert_eq!(actual, &sha256_digest(&served));
                }
                other => panic!("not a digest mismatch: {other}"),
            }
            let layer_file = store
                .path()
                .join("blobs/sha256")
                .join(&sha256_digest(&layer)["sha256:".len()..]);
            assert!(!layer_file.exists(), "the forged layer is not kept");
        }
    }

    #[tokio::test]
    async fn r41_a_registry_silent_mid_layer_is_reported_as_timed_out() {
        let layer = [7u8; 4096];
        // Half the layer, then nothing, the connection left open.
        let (address, _) = artifact(&layer, ok(&layer[..2048], layer.len(), "")).await;
        let store = tempfile::tempdir().unwrap();
        let reference = format!("oci://{address}/silent/layer:1");
        let limit = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let err = unsigned(store.path())
            .read_timeout(limit)
            .fetch(&reference, 1 << 20)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10), "{err}");
        let text = err.to_string();
        assert!(
            matches!(&err, OciError::Registry { reference: named, .. } if named == &reference),
            "{text}"
        );
        for part in [
            "timed out",
            "300ms",
            "OCI_READ_TIMEOUT",
            &sha256_digest(&layer),
            "retry",
        ] {
            assert!(text.contains(part), "{part} not in: {text}");
        }
        assert!(!text.contains("decoding"), "{text}");
    }

    #[tokio::test]
    async fn r41_credentials_are_sent_only_after_the_registry_challenges() {
        let layer = [7u8; 64];
        let (address, requests) = artifact(&layer, ok(&layer, layer.len(), "")).await;
        let store = tempfile::tempdir().unwrap();
        // Credentials for this very registry, which never asks for them.
        let credentials = Credentials::none().with(&address, "alice".into(), "s3cret".into());
        unsigned(store.path())
            .credentials(credentials)
            .fetch(&format!("oci://{address}/open/registry:1"), 1 << 20)
            .await
            .unwrap();
        let requests = requests.lock().unwrap();
        assert!(requests.len() >= 3, "{requests:?}");
        let sent: Vec<&String> = requests
            .iter()
            .filter(|r| r.to_ascii_lowercase().contains("\nauthorization:"))
            .collect();
        assert!(sent.is_empty(), "credentials sent unasked: {sent:?}");
    }
}
