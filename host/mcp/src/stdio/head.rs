//! What a JSON-RPC message is, read from its bytes as they stream past: its
//! top-level `id` and whether it has a `method`. Enough to answer a message
//! too large to parse, in constant memory and whichever order its members
//! come in (the TypeScript SDK writes the id last).

use rmcp::model::RequestId;

/// The most bytes of an `id` value kept; real ids are short.
const MAX_ID_BYTES: usize = 256;

/// Member names longer than this are neither `id` nor `method`.
const MAX_KEY_BYTES: usize = 8;

/// What the message was, as far as its bytes tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Head {
    /// A request: it has a method and an id; it awaits a reply.
    Request(RequestId),
    /// A response (an id, no method): the answer to one of our requests.
    Response(RequestId),
    /// A notification, or not a JSON-RPC object at all.
    Other,
}

/// Where the scanner is in the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Before the opening `{`.
    Start,
    /// Where a member name may start.
    Key,
    /// Inside a member name.
    InKey,
    /// After a name, before its `:`.
    Colon,
    /// Inside a member's value (tracked by depth and strings).
    Value,
    /// The message is not an object, or the object has ended.
    Done,
}

/// A streaming scanner over one line.
#[derive(Debug)]
pub(super) struct HeadScanner {
    place: Place,
    /// Nesting inside the current value.
    depth: u32,
    in_string: bool,
    escaped: bool,
    key: Vec<u8>,
    /// The member whose value is being read is `id`.
    reading_id: bool,
    id: Vec<u8>,
    id_complete: bool,
    method: bool,
}

impl Default for HeadScanner {
    fn default() -> Self {
        HeadScanner {
            place: Place::Start,
            depth: 0,
            in_string: false,
            escaped: false,
            key: Vec::new(),
            reading_id: false,
            id: Vec::new(),
            id_complete: false,
            method: false,
        }
    }
}

impl HeadScanner {
    /// Reads the next bytes of the line.
    pub(super) fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.place == Place::Done {
                return;
            }
            self.byte(b);
        }
    }

    /// Forgets the line without reading what it was: ready for the next.
    pub(super) fn reset(&mut self) {
        *self = HeadScanner::default();
    }

    /// What the line was; the scanner is ready for the next one.
    pub(super) fn finish(&mut self) -> Head {
        let scanned = std::mem::take(self);
        let id = scanned
            .id_complete
            .then(|| serde_json::from_slice::<RequestId>(scanned.id.trim_ascii()).ok())
            .flatten();
        match (id, scanned.method) {
            (Some(id), true) => Head::Request(id),
            (Some(id), false) => Head::Response(id),
            (None, _) => Head::Other,
        }
    }

    fn byte(&mut self, b: u8) {
        match self.place {
            Place::Start => match b {
                b'{' => self.place = Place::Key,
                b if b.is_ascii_whitespace() => {}
                _ => self.place = Place::Done,
            },
            Place::Key => match b {
                b'"' => {
                    self.key.clear();
                    self.place = Place::InKey;
                }
                b'}' => self.place = Place::Done,
                _ => {}
            },
            Place::InKey => self.key_byte(b),
            Place::Colon => {
                if b == b':' {
                    self.reading_id = self.key == b"id";
                    self.method |= self.key == b"method";
                    self.place = Place::Value;
                }
            }
            Place::Value => self.value_byte(b),
            Place::Done => {}
        }
    }

    fn key_byte(&mut self, b: u8) {
        if self.escaped {
            self.escaped = false;
        } else if b == b'\\' {
            self.escaped = true;
        } else if b == b'"' {
            self.place = Place::Colon;
            return;
        }
        if self.key.len() <= MAX_KEY_BYTES {
            self.key.push(b);
        }
    }

    fn value_byte(&mut self, b: u8) {
        let ends_member = !self.in_string && self.depth == 0 && (b == b',' || b == b'}');
        if ends_member {
            if self.reading_id {
                self.id_complete = self.id.len() <= MAX_ID_BYTES;
                self.reading_id = false;
            }
            self.place = if b == b',' { Place::Key } else { Place::Done };
            return;
        }
        if self.reading_id && self.id.len() <= MAX_ID_BYTES {
            self.id.push(b);
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rmcp::model::NumberOrString;
    use serde_json::{Value, json};

    fn scan_in_chunks(text: &[u8], chunk: usize) -> Head {
        let mut scanner = HeadScanner::default();
        for piece in text.chunks(chunk.max(1)) {
            scanner.feed(piece);
        }
        scanner.finish()
    }

    #[test]
    fn requests_responses_and_notifications_are_told_apart() {
        let request = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"id":1}}"#;
        assert_eq!(
            scan_in_chunks(request, 3),
            Head::Request(NumberOrString::Number(7))
        );
        let last = br#"{"method":"x","params":{"a":"}\"id\":2,"},"jsonrpc":"2.0","id":"abc"}"#;
        assert_eq!(
            scan_in_chunks(last, 1),
            Head::Request(NumberOrString::String("abc".into()))
        );
        let response = br#"{"jsonrpc":"2.0","id":3,"result":{"method":"no"}}"#;
        assert_eq!(
            scan_in_chunks(response, 5),
            Head::Response(NumberOrString::Number(3))
        );
        let notification = br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#;
        assert_eq!(scan_in_chunks(notification, 4), Head::Other);
        assert_eq!(scan_in_chunks(b"[1,2]", 1), Head::Other);
        assert_eq!(scan_in_chunks(b"not json", 2), Head::Other);
    }

    #[test]
    fn a_scanner_reused_after_finish_starts_fresh() {
        let mut scanner = HeadScanner::default();
        scanner.feed(br#"{"id":1,"method":"a"}"#);
        assert_eq!(scanner.finish(), Head::Request(NumberOrString::Number(1)));
        scanner.feed(br#"{"method":"b"}"#);
        assert_eq!(scanner.finish(), Head::Other);
    }

    fn member() -> impl Strategy<Value = (String, Value)> {
        let value = prop_oneof![
            any::<i64>().prop_map(Value::from),
            ".*".prop_map(Value::from),
            proptest::collection::vec(".*", 0..4).prop_map(|v| json!({ "id": v, "x": "}{" })),
        ];
        ("[a-z\"\\\\]{1,6}", value)
    }

    proptest! {
        #[test]
        fn the_top_level_id_is_found_wherever_it_is_and_however_the_bytes_arrive(
            members in proptest::collection::vec(member(), 0..5),
            at in 0usize..6,
            id in any::<i64>(),
            chunk in 1usize..64,
        ) {
            let mut object = serde_json::Map::new();
            for (k, v) in members {
                if k != "id" && k != "method" {
                    object.insert(k, v);
                }
            }
            let mut entries: Vec<(String, Value)> = object.into_iter().collect();
            let at = at.min(entries.len());
            entries.insert(at, ("id".into(), json!(id)));
            entries.push(("method".into(), json!("tools/call")));
            let text = format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|(k, v)| format!("{}:{v}", Value::from(k.as_str())))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            prop_assert_eq!(
                scan_in_chunks(text.as_bytes(), chunk),
                Head::Request(NumberOrString::Number(id))
            );
        }
    }
}
