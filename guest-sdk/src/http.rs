//! Outbound HTTP for tools, through `wasi:http`: the host lets a request
//! through only to origins its user granted, within the call's budgets.
//! `Context::http_get` covers the common case; for anything else use the
//! re-exported [`wstd`] client.

use crate::Context;

pub use wstd;

/// A response: status, headers (lower-case names) and the whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code, e.g. 200.
    pub status: u16,
    /// The headers, in order; values that are not UTF-8 are left out.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a request failed: refused by the host (no grant, a private address,
/// a budget) or failed on the network. The text says which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError(pub String);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

impl Context {
    /// `GET url`, waiting for the whole body.
    ///
    /// ```no_run
    /// # use toolhost_sdk::Context;
    /// # fn run(cx: &Context) -> Result<(), toolhost_sdk::HttpError> {
    /// let response = cx.http_get("https://api.github.com/zen")?;
    /// assert_eq!(response.status, 200);
    /// # Ok(())
    /// # }
    /// ```
    pub fn http_get(&self, url: &str) -> Result<HttpResponse, HttpError> {
        let failed = |e: &dyn std::fmt::Debug| HttpError(format!("GET {url}: {e:?}"));
        wstd::runtime::block_on(async {
            let request = wstd::http::Request::get(url)
                .body(wstd::http::Body::empty())
                .map_err(|e| failed(&e))?;
            let mut response = wstd::http::Client::new()
                .send(request)
                .await
                .map_err(|e| failed(&e))?;
            let headers = response
                .headers()
                .iter()
                .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
                .collect();
            let body = response
                .body_mut()
                .contents()
                .await
                .map_err(|e| failed(&e))?
                .to_vec();
            Ok(HttpResponse {
                status: response.status().as_u16(),
                headers,
                body,
            })
        })
    }
}
