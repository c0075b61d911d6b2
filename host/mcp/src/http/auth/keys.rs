//! An issuer's signing keys: found through its metadata (RFC 8414, else
//! OpenID discovery), fetched within a size and a time, cached, and
//! fetched again for a key id the cache lacks — unless they were fetched
//! less than [`KEY_REFETCH_INTERVAL`] ago, so tokens with made-up key ids
//! cannot make the server hammer the issuer, while a real rotation is
//! picked up at once, or within that interval after a flood of them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use reqwest::Url;
use serde::Deserialize;
use tokio::sync::{Mutex, RwLock};
use tokio::time::Instant;

use super::AuthError;

/// The largest metadata or key-set document read from an issuer: real
/// ones are a few KiB; a hostile issuer cannot make us buffer more.
pub const MAX_AUTH_DOCUMENT_BYTES: usize = 256 << 10;

/// How long one fetch from an issuer may take, connection included.
pub const AUTH_FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The most keys kept of one issuer's set; the rest are ignored.
pub const MAX_ISSUER_KEYS: usize = 32;

/// An unknown key id fetches its issuer's keys again only when they were
/// last fetched at least this long ago (otherwise it is refused without
/// asking): made-up key ids cost the issuer one fetch per interval, and a
/// rotated key is accepted within it even during such a flood.
pub const KEY_REFETCH_INTERVAL: Duration = Duration::from_secs(5);

/// A verification key and the algorithm its set names for it, if any.
pub(crate) struct Key {
    pub(crate) decoding: DecodingKey,
    pub(crate) algorithm: Option<jsonwebtoken::Algorithm>,
}

/// One configured issuer and its cached keys.
pub(crate) struct Issuer {
    /// The issuer identifier, exactly as tokens' `iss` must carry it.
    pub(crate) id: String,
    http: reqwest::Client,
    keys: RwLock<HashMap<String, Arc<Key>>>,
    /// Held by the one request that fetches; when the keys were last
    /// fetched.
    refresh: Mutex<Option<Instant>>,
}

#[derive(Deserialize)]
struct Metadata {
    issuer: String,
    jwks_uri: String,
}

impl Issuer {
    pub(crate) fn new(id: String, http: reqwest::Client) -> Issuer {
        Issuer {
            id,
            http,
            keys: RwLock::default(),
            refresh: Mutex::default(),
        }
    }

    /// The key `kid` names (or the only key, for a token without one),
    /// fetching the set when the cache lacks it and may be refreshed.
    pub(crate) async fn key(&self, kid: Option<&str>) -> Result<Arc<Key>, AuthError> {
        if let Some(key) = self.cached(kid).await {
            return Ok(key);
        }
        let mut last = self.refresh.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(key) = self.cached(kid).await {
            return Ok(key);
        }
        if last.is_some_and(|at| at.elapsed() < KEY_REFETCH_INTERVAL) {
            return Err(AuthError::UnknownKey(kid.unwrap_or("(none)").into()));
        }
        *last = Some(Instant::now());
        let fetched = self.fetch_keys().await?;
        *self.keys.write().await = fetched;
        drop(last);
        self.cached(kid)
            .await
            .ok_or_else(|| AuthError::UnknownKey(kid.unwrap_or("(none)").into()))
    }

    async fn cached(&self, kid: Option<&str>) -> Option<Arc<Key>> {
        let keys = self.keys.read().await;
        match kid {
            Some(kid) => keys.get(kid).cloned(),
            None if keys.len() == 1 => keys.values().next().cloned(),
            None => None,
        }
    }

    /// The issuer's current key set, through its metadata.
    async fn fetch_keys(&self) -> Result<HashMap<String, Arc<Key>>, AuthError> {
        let metadata = self.metadata().await?;
        let jwks_uri = checked_url(&metadata.jwks_uri)?;
        let set: JwkSet = self.get_json(jwks_uri).await?;
        let mut keys = HashMap::new();
        for jwk in set.keys.iter().take(MAX_ISSUER_KEYS) {
            // Symmetric keys are never trusted: a public set holding one
            // would let anyone who read it sign.
            if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
                continue;
            }
            let Ok(decoding) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            let algorithm = jwk
                .common
                .key_algorithm
                .and_then(|a| jsonwebtoken::Algorithm::try_from(a).ok());
            let kid = jwk.common.key_id.clone().unwrap_or_default();
            keys.insert(
                kid,
                Arc::new(Key {
                    decoding,
                    algorithm,
                }),
            );
        }
        Ok(keys)
    }

    /// RFC 8414 metadata (the well-known path inserted before the issuer's
    /// path), else OpenID discovery (appended); its `issuer` must be ours.
    async fn metadata(&self) -> Result<Metadata, AuthError> {
        let issuer = checked_url(&self.id)?;
        let path = issuer.path().trim_end_matches('/');
        let mut oauth = issuer.clone();
        oauth.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
        let mut openid = issuer.clone();
        openid.set_path(&format!("{path}/.well-known/openid-configuration"));
        let metadata: Metadata = match self.get_json(oauth).await {
            Ok(m) => m,
            Err(_) => self.get_json(openid).await?,
        };
        if metadata.issuer != self.id {
            return Err(AuthError::Issuer(format!(
                "{}'s metadata names the issuer {:?}; it must be the same",
                self.id, metadata.issuer
            )));
        }
        Ok(metadata)
    }

    /// GETs a JSON document within the size and time bounds.
    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: Url) -> Result<T, AuthError> {
        let shown = url.to_string();
        let fail = |why: String| AuthError::Issuer(format!("cannot read {shown}: {why}"));
        let fetch = async {
            let mut response = self
                .http
                .get(url)
                .send()
                .await
                .map_err(|e| fail(e.to_string()))?;
            if !response.status().is_success() {
                return Err(fail(format!("HTTP {}", response.status())));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| fail(e.to_string()))? {
                if body.len() + chunk.len() > MAX_AUTH_DOCUMENT_BYTES {
                    return Err(fail(format!("larger than {MAX_AUTH_DOCUMENT_BYTES} bytes")));
                }
                body.extend_from_slice(&chunk);
            }
            serde_json::from_slice(&body).map_err(|e| fail(e.to_string()))
        };
        tokio::time::timeout(AUTH_FETCH_TIMEOUT, fetch)
            .await
            .map_err(|_| fail(format!("no answer within {AUTH_FETCH_TIMEOUT:?}")))?
    }
}

/// An issuer or key-set URL: HTTPS, or plain HTTP to a loopback host only.
pub(crate) fn checked_url(url: &str) -> Result<Url, AuthError> {
    let parsed = Url::parse(url).map_err(|e| AuthError::Issuer(format!("{url:?}: {e}")))?;
    let host = parsed.host_str().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if loopback => Ok(parsed),
        _ => Err(AuthError::Issuer(format!(
            "{url}: an issuer is reached over https (plain http only on loopback)"
        ))),
    }
}
