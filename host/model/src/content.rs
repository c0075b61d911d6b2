//! What a tool returns: content for the model, a machine output, metadata,
//! or a model-visible failure.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One part of the content a model sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Text; the host measures and bounds it.
    Text {
        /// The text.
        text: String,
    },
    /// Binary media, passed through untouched.
    Media {
        /// MIME type of `data`.
        mime_type: String,
        /// The bytes.
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
        /// Optional file name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text { text: text.into() }
    }
}

/// Media bytes travel as base64 in JSON views (events, `--json`).
mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(data))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// What a tool returned on success, before settlement normalizes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolResponse {
    /// The machine value; required when the tool has an output schema.
    pub output: Option<Value>,
    /// Model-facing content; derived from `output` when absent.
    pub content: Option<Vec<ContentPart>>,
    /// Compact JSON object for tool-specific UI.
    pub metadata: Option<Value>,
}

/// An expected, model-visible failure of a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    /// What went wrong, for the model.
    pub message: String,
    /// Optional JSON object for tool-specific UI.
    pub metadata: Option<Value>,
}

impl ToolFailure {
    /// A failure with just a message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolFailure {
            message: message.into(),
            metadata: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_round_trips_through_base64() {
        let part = ContentPart::Media {
            mime_type: "image/png".into(),
            data: (0u8..=255).collect(),
            name: None,
        };
        let json = serde_json::to_string(&part).unwrap();
        assert_eq!(serde_json::from_str::<ContentPart>(&json).unwrap(), part);
    }
}
