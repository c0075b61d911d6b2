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
        let why = |reason: &dyn std::fmt::Display| {
            format!(
                "cannot use {} as an HTTP root certificate: {reason}; give a PEM file",
                file.display()
            )
        };
        let bad = |e: rustls::pki_types::pem::Error| Error::config_caused(why(&e), e);
        let certs = CertificateDer::pem_file_iter(file).map_err(bad)?;
        let mut added = 0;
        for cert in certs {
            roots
                .add(cert.map_err(bad)?)
                .map_err(|e| Error::config_caused(why(&e), e))?;
            added += 1;
        }
        if added == 0 {
            return Err(Error::config(why(&"it holds no certificate")));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config_caused(format!("TLS: {e}"), e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_file_that_cannot_be_read_keeps_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let Err(e) = client_config(&[&missing]) else {
            panic!("a missing root file was accepted");
        };
        assert!(e.to_string().contains("give a PEM file"), "{e}");
        let source = std::error::Error::source(&e).expect("the cause is kept");
        assert!(source.is::<rustls::pki_types::pem::Error>(), "{source:?}");
    }
}
