//! What a tool returns on success.

use serde::Serialize;
use serde_json::Value;

use crate::ToolError;
use crate::json::to_value;
use crate::tool::NoOutput;

/// The result type of [`Tool::execute`](crate::Tool::execute).
pub type ToolResult<O> = Result<Response<O>, ToolError>;

/// A successful tool result: the machine `output`, model-facing content and
/// optional metadata.
///
/// - A tool with an output type builds it with [`Response::new`] (or
///   `output.into()`); the host validates the output against the derived schema
///   and, when the response has no content, shows the output to the model.
/// - A tool whose output is [`NoOutput`] builds it from content with
///   [`Response::text`], [`Response::media`] or [`Response::parts`]. It **must**
///   give non-empty content; the host rejects an empty response as a defect.
///
/// ```
/// use toolhost_sdk::{Media, NoOutput, Response};
///
/// let typed: Response<u32> = Response::new(3).with_text("three words");
/// let plain: Response<NoOutput> = Response::text("done")
///     .with_media(Media::new("image/png", vec![0x89, b'P', b'N', b'G']).with_name("chart.png"))
///     .with_metadata(serde_json::json!({ "elapsed_ms": 12 }));
/// # let _ = (typed, plain);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Response<O> {
    pub(crate) output: Option<Output<O>>,
    pub(crate) content: Vec<Content>,
    pub(crate) metadata: Option<Value>,
}

/// The machine value of a response.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Output<O> {
    /// Serialized with the tool's output type, so it matches the derived schema.
    Typed(O),
    /// Passed through as given; see [`Response::raw_output`].
    Raw(Value),
}

impl<O> Response<O> {
    /// A response carrying `output`. Without added content the host derives the
    /// model-facing content from the output.
    pub fn new(output: O) -> Self {
        Self {
            output: Some(Output::Typed(output)),
            content: Vec::new(),
            metadata: None,
        }
    }

    /// A response whose output is the given JSON value, bypassing the tool's
    /// output type.
    ///
    /// This is an escape hatch for dynamic tools and for testing hosts: the
    /// value is *not* checked against the output schema here, so prefer
    /// [`Response::new`]. The host still validates it and turns a mismatch
    /// into a model-visible error.
    pub fn raw_output(output: Value) -> Self {
        Self {
            output: Some(Output::Raw(output)),
            content: Vec::new(),
            metadata: None,
        }
    }

    /// Append a text part to the model-facing content. The host measures text
    /// parts and truncates long ones (keeping the full text retrievable).
    #[must_use]
    pub fn with_text(self, text: impl Into<String>) -> Self {
        self.with_part(Content::Text(text.into()))
    }

    /// Append a media part (passed to the model untouched, up to a size limit).
    #[must_use]
    pub fn with_media(self, media: Media) -> Self {
        self.with_part(Content::Media(media))
    }

    /// Append a content part.
    #[must_use]
    pub fn with_part(mut self, part: impl Into<Content>) -> Self {
        self.content.push(part.into());
        self
    }

    /// Attach compact metadata for tool-specific UI.
    ///
    /// It should serialize to a JSON object of at most 16 KiB; the host drops
    /// anything else with a warning on the outcome, and the call still
    /// succeeds.
    ///
    /// # Panics
    ///
    /// If `metadata` cannot be serialized as JSON (a plugin bug).
    #[must_use]
    #[track_caller]
    pub fn with_metadata(mut self, metadata: impl Serialize) -> Self {
        self.metadata = Some(to_value(&metadata, "response metadata"));
        self
    }
}

impl Response<NoOutput> {
    /// A response with one text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::parts([Content::Text(text.into())])
    }

    /// A response with one media part.
    pub fn media(media: Media) -> Self {
        Self::parts([Content::Media(media)])
    }

    /// A response with the given content parts. The content must not be empty.
    pub fn parts(parts: impl IntoIterator<Item = Content>) -> Self {
        Self {
            output: None,
            content: parts.into_iter().collect(),
            metadata: None,
        }
    }
}

impl<O> From<O> for Response<O> {
    fn from(output: O) -> Self {
        Self::new(output)
    }
}

/// One part of the content a model sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Text. The host measures and bounds text parts.
    Text(String),
    /// Binary content such as an image.
    Media(Media),
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<Media> for Content {
    fn from(media: Media) -> Self {
        Self::Media(media)
    }
}

/// Binary content for the model, such as an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    /// The MIME type of `data`, for example `image/png`.
    pub mime_type: String,
    /// The raw bytes.
    pub data: Vec<u8>,
    /// An optional file name to show with the media.
    pub name: Option<String>,
}

impl Media {
    /// Media of type `mime_type` holding `data`, without a name.
    pub fn new(mime_type: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        Self {
            mime_type: mime_type.into(),
            data: data.into(),
            name: None,
        }
    }

    /// Set the file name shown with the media.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}
