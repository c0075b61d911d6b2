//! A hostile registry on loopback for the tests: it answers as a test
//! tells it to, however wrong, and records what it was asked.

use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::manifest::OCI_MANIFEST;
use super::{
    Credentials, Distribution, TrustPolicy, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
    sha256_digest,
};

/// A hostile registry on loopback: answers `GET /v2/` with 200 and
/// every other request with `answer(path)` (a whole HTTP response; one
/// shorter than its `Content-Length` is left open and silent, as a
/// registry that stalls), recording each request's head.
pub(super) async fn hostile(
    answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (seen, answer) = (requests.clone(), Arc::new(answer));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (seen, answer) = (seen.clone(), answer.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    // A TLS hello (the HTTPS probe): a plain server hangs up.
                    if head.is_empty() && byte[0] == 0x16 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                seen.lock().unwrap().push(head);
                let response = if path == "/v2/" {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".to_vec()
                } else {
                    answer(&path)
                };
                let _ = stream.write_all(&response).await;
                if short(&response) {
                    // Silent until the client gives up and hangs up.
                    let _ = stream.read(&mut byte).await;
                    return;
                }
                let _ = stream.shutdown().await;
            });
        }
    });
    (address, requests)
}

/// Whether an HTTP response's body is shorter than its `Content-Length`.
fn short(response: &[u8]) -> bool {
    let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let body = response.len() - end - 4;
    String::from_utf8_lossy(&response[..end])
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .is_some_and(|length| body < length)
}

/// An HTTP 200 response with `body` (declared `length` bytes long) and
/// `headers` (each ending in CRLF).
pub(super) fn ok(body: &[u8], length: usize, headers: &str) -> Vec<u8> {
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n{headers}Connection: close\r\n\r\n"
    )
    .into_bytes();
    response.extend_from_slice(body);
    response
}

/// A hostile registry serving one wasm artifact at tag `1`: its
/// manifest (naming `layer`'s digest and size), an empty JSON config,
/// and `response` (a whole HTTP response) for the layer.
pub(super) async fn artifact(layer: &[u8], response: Vec<u8>) -> (String, Arc<Mutex<Vec<String>>>) {
    let config = b"{}";
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": sha256_digest(config), "size": config.len()},
        "layers": [{"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": sha256_digest(layer), "size": layer.len()}],
    }))
    .unwrap();
    let config_digest = sha256_digest(config);
    hostile(move |path| {
        if path.ends_with("/manifests/1") {
            let content_type = format!("Content-Type: {OCI_MANIFEST}\r\n");
            ok(&manifest, manifest.len(), &content_type)
        } else if path.ends_with(&config_digest) {
            ok(config, config.len(), "")
        } else if path.contains("/blobs/") {
            response.clone()
        } else {
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
        }
    })
    .await
}

/// A distribution with its own store, no credentials, every repository
/// allowed unsigned.
pub(super) fn unsigned(store: &Path) -> Distribution {
    // The OCI client needs a process-wide provider; this test process's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Distribution::new(store)
        .credentials(Credentials::none())
        .trust(TrustPolicy::new().allow_unsigned("*"))
}
