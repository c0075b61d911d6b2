//! The TLS client configuration of a host: the Mozilla roots (webpki-roots)
//! plus any root the embedder adds for a private CA.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use crate::error::Error;

/// A client configuration trusting the webpki roots and the PEM
/// certificates in `extra_roots`.
pub fn client_config(extra_roots: &[impl AsRef<Path>]) -> Result<Arc<rustls::ClientConfig>, Error> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for file in extra_roots {
        let file = file.as_ref();
        let bad = |why: String| {
            Error::Config(format!(
                "cannot use {} as an HTTP root certificate: {why}; give a PEM file",
                file.display()
            ))
        };
        let certs = CertificateDer::pem_file_iter(file).map_err(|e| bad(e.to_string()))?;
        let mut added = 0;
        for cert in certs {
            roots
                .add(cert.map_err(|e| bad(e.to_string()))?)
                .map_err(|e| bad(e.to_string()))?;
            added += 1;
        }
        if added == 0 {
            return Err(bad("it holds no certificate".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
