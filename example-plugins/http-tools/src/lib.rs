//! http-tools: calls HTTP APIs through `wasi:http`. The host lets a request
//! through only to origins its user granted (`--allow-http` or the
//! manifest's `[grants] http`), within the call's budgets.

use toolhost_sdk::prelude::*;

/// The arguments of `fetch_json`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct FetchInput {
    /// The URL to GET; its origin must be granted to this plugin.
    pub url: String,
}

/// What the server answered.
#[derive(Serialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct FetchOutput {
    /// The HTTP status code.
    pub status: u16,
    /// The response's content type, if it gave one.
    pub content_type: Option<String>,
    /// The body, parsed as JSON.
    pub json: Value,
}

/// GET a URL and parse the body as JSON.
pub struct FetchJson;

impl Tool for FetchJson {
    const NAME: &'static str = "fetch_json";
    const DESCRIPTION: &'static str = "GET a URL and return its status, content type and JSON body. Only origins the user granted can be reached.";
    type Input = FetchInput;
    type Output = FetchOutput;

    fn execute(input: FetchInput, cx: &Context) -> ToolResult<FetchOutput> {
        let response = cx
            .http_get(&input.url)
            .map_err(|e| format!("the request failed: {e}"))?;
        let content_type = response
            .headers
            .iter()
            .find(|(name, _)| name == "content-type")
            .map(|(_, value)| value.clone());
        let json = toolhost_sdk::serde_json::from_slice(&response.body).map_err(|e| {
            format!(
                "status {}: the body is not JSON ({e}); {} bytes",
                response.status,
                response.body.len()
            )
        })?;
        let text = format!("status {}", response.status);
        Ok(Response::new(FetchOutput {
            status: response.status,
            content_type,
            json,
        })
        .with_text(text))
    }
}

/// The arguments of `post_bytes`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct PostInput {
    /// The URL to POST to; its origin must be granted to this plugin.
    pub url: String,
    /// How many bytes of body to send.
    pub bytes: u32,
}

/// POST a body of `bytes` bytes: a guest still writing its body while the
/// host decides on its request.
pub struct PostBytes;

impl Tool for PostBytes {
    const NAME: &'static str = "post_bytes";
    const DESCRIPTION: &'static str =
        "POST a body of `bytes` bytes to a URL and return the answer's status.";
    type Input = PostInput;
    type Output = NoOutput;

    fn execute(input: PostInput, _cx: &Context) -> ToolResult<NoOutput> {
        use toolhost_sdk::wstd;
        let failed = |e: &dyn std::fmt::Debug| format!("POST {}: {e:?}", input.url);
        let status = wstd::runtime::block_on(async {
            let body = wstd::http::Body::from(vec![b'x'; input.bytes as usize]);
            let request = wstd::http::Request::post(&input.url)
                .body(body)
                .map_err(|e| failed(&e))?;
            let response = wstd::http::Client::new()
                .send(request)
                .await
                .map_err(|e| failed(&e))?;
            Ok::<_, String>(response.status().as_u16())
        })?;
        Ok(Response::text(format!("status {status}")))
    }
}

toolhost_sdk::plugin!([FetchJson, PostBytes]);
