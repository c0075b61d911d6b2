//! `webfetch {url, format?, timeout?}`: GET a page over `wasi:http` (only
//! origins the user granted), as text, Markdown or the HTML itself.

use toolhost_sdk::prelude::*;
use toolhost_sdk::wstd;
use toolhost_sdk::wstd::future::FutureExt as _;

use crate::text::count;

/// The largest response body used: opencode's limit. The host bounds a
/// call's HTTP bytes and time as well (its budgets).
pub const MAX_FETCH_BYTES: usize = 5 << 20;

/// Seconds a fetch may take unless the call says otherwise: opencode's
/// default.
pub const DEFAULT_TIMEOUT_SECS: f64 = 30.0;

/// The most seconds a call may give a fetch: opencode's limit. The call's
/// own deadline bounds it as well.
pub const MAX_TIMEOUT_SECS: f64 = 120.0;

/// The formats `webfetch` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The page's text, without markup.
    Text,
    /// The page converted to Markdown.
    Markdown,
    /// The HTML as served.
    Html,
}

/// The arguments of `webfetch`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct WebFetchInput {
    /// The `http://` or `https://` URL to fetch.
    pub url: String,
    /// What to return: `text`, `markdown` or `html`. Default: `markdown`.
    pub format: Option<Format>,
    /// Seconds to wait for the whole response, at most 120. Default: 30.
    pub timeout: Option<f64>,
}

/// Fetch a web page.
#[derive(Debug)]
pub struct WebFetch;

impl Tool for WebFetch {
    const NAME: &'static str = "webfetch";
    const DESCRIPTION: &'static str = "Fetch a URL and return its content as Markdown (default), plain text or HTML. Only origins the user granted can be reached; responses over 5 MiB are refused. `timeout` is in seconds (default 30, at most 120). Asks for `webfetch` permission first.";
    type Input = WebFetchInput;
    type Output = NoOutput;

    fn execute(input: WebFetchInput, cx: &Context) -> ToolResult<NoOutput> {
        let url = input.url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("`{url}` is not an http:// or https:// URL.").into());
        }
        let format = input.format.unwrap_or(Format::Markdown);
        let timeout = input.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if timeout <= 0.0 {
            return Err(format!(
                "timeout {timeout} is not a positive number of seconds; give at most {MAX_TIMEOUT_SECS}, or leave it out for {DEFAULT_TIMEOUT_SECS}."
            )
            .into());
        }
        let timeout = timeout.min(MAX_TIMEOUT_SECS);
        cx.request_permission("webfetch", &[url], &[url], None)?;
        let response = get(url, timeout)?;
        if response.body.len() > MAX_FETCH_BYTES {
            return Err(format!(
                "{url} answered {} bytes, over the {} MiB limit.",
                count(response.body.len()),
                MAX_FETCH_BYTES >> 20
            )
            .into());
        }
        let content_type = response
            .headers
            .iter()
            .find(|(name, _)| name == "content-type")
            .map_or("", |(_, v)| v.as_str())
            .to_owned();
        if !(200..300).contains(&response.status) {
            return Err(format!("{url} answered status {}.", response.status).into());
        }
        let body = String::from_utf8_lossy(&response.body).into_owned();
        let html = content_type.contains("html") || body.trim_start().starts_with('<');
        let text = match format {
            Format::Html => body,
            Format::Markdown if html => htmd::HtmlToMarkdown::builder()
                .skip_tags(vec!["head", "script", "style", "noscript", "template"])
                .build()
                .convert(&body)
                .map_err(|e| {
                    ToolError::new(format!("cannot convert {url}'s HTML to Markdown: {e}"))
                })?,
            Format::Text if html => strip_tags(&body),
            _ => body,
        };
        let text = if text.trim().is_empty() {
            format!("{url} answered an empty page ({content_type}).")
        } else {
            text
        };
        Ok(Response::text(text).with_metadata(json!({
            "url": url,
            "status": response.status,
            "contentType": content_type,
            "bytes": response.body.len(),
        })))
    }
}

/// A response: status, headers (lower-case names) and body.
struct Fetched {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// `GET url`, giving up after `timeout` seconds (the request and the
/// whole body).
fn get(url: &str, timeout: f64) -> Result<Fetched, ToolError> {
    let failed = |e: &dyn std::fmt::Debug| ToolError::new(format!("fetching {url} failed: {e:?}"));
    let fetch = async {
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
        Ok(Fetched {
            status: response.status().as_u16(),
            headers,
            body,
        })
    };
    // The timer belongs to the runtime: made inside it.
    let limit = async {
        fetch
            .timeout(wstd::time::Duration::from_secs_f64(timeout))
            .await
    };
    wstd::runtime::block_on(limit).unwrap_or_else(|_| {
            Err(ToolError::new(format!(
                "fetching {url} timed out after {timeout} s; try again with a larger timeout (at most {MAX_TIMEOUT_SECS} s)."
            )))
        })
}

/// The text of an HTML page: markup, scripts and styles removed, the
/// common entities decoded, blank runs collapsed.
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        let lower: String = after
            .chars()
            .take(8)
            .collect::<String>()
            .to_ascii_lowercase();
        let skip_to = if lower.starts_with("<script") {
            find_ci(after, "</script>")
        } else if lower.starts_with("<style") {
            find_ci(after, "</style>")
        } else if after.starts_with("<!--") {
            after.find("-->").map(|i| i + 3)
        } else {
            None
        };
        let end = skip_to
            .or_else(|| after.find('>').map(|i| i + 1))
            .unwrap_or(after.len());
        let tag = &after[..end];
        if [
            "<br", "<p", "</p", "<div", "</div", "<li", "<h", "</h", "<tr",
        ]
        .iter()
        .any(|t| tag.to_ascii_lowercase().starts_with(t))
        {
            out.push('\n');
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    let decoded = out
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    let mut text = String::with_capacity(decoded.len());
    let mut blank = 0;
    for line in decoded.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        text.push_str(&line);
        text.push('\n');
    }
    text.trim().to_owned()
}

/// Where `needle` (ASCII) ends in `haystack`, ignoring ASCII case.
fn find_ci(haystack: &str, needle: &str) -> Option<usize> {
    haystack
        .to_ascii_lowercase()
        .find(needle)
        .map(|i| i + needle.len())
}
