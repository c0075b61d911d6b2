//! What a request really costs while the server holds it (R37): not only
//! its bytes, but the values they parse into and the call's input text
//! made from them. A body of small values (`[0,0,0,…]`) takes up to ~50
//! times its size once parsed, so the byte budget counts that, not the
//! wire size alone.

use std::fmt;

use serde::Deserializer as _;
use serde::de::{self, MapAccess, SeqAccess, Visitor};

/// The most one parsed JSON value takes besides the text it holds: a
/// `serde_json::Value` (32 bytes), its slot's share of a growing vector
/// (up to as much again) or of a map's entry (key, value and node).
pub(crate) const PARSED_VALUE_BYTES: usize = 96;

/// The bytes holding `body` costs at most: the body itself, its values
/// parsed, and the input text a call made from them (no longer than the
/// body). `None` when it is not JSON (the guard has refused it by then).
pub(crate) fn held_bytes(body: &[u8]) -> Option<usize> {
    let mut parser = serde_json::Deserializer::from_slice(body);
    let parsed = parser.deserialize_any(Counter).ok()?;
    Some(body.len() * 2 + parsed)
}

/// Sums what each value visited would take parsed.
struct Counter;

impl<'de> Visitor<'de> for Counter {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<usize, E> {
        Ok(PARSED_VALUE_BYTES)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<usize, E> {
        Ok(PARSED_VALUE_BYTES)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<usize, E> {
        Ok(PARSED_VALUE_BYTES)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<usize, E> {
        Ok(PARSED_VALUE_BYTES)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<usize, E> {
        Ok(PARSED_VALUE_BYTES + text.len())
    }

    fn visit_unit<E: de::Error>(self) -> Result<usize, E> {
        Ok(PARSED_VALUE_BYTES)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<usize, A::Error> {
        let mut total = PARSED_VALUE_BYTES;
        while let Some(item) = items.next_element_seed(Seed)? {
            total = total.saturating_add(item);
        }
        Ok(total)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<usize, A::Error> {
        let mut total = PARSED_VALUE_BYTES;
        while let Some(key) = entries.next_key_seed(Seed)? {
            let value = entries.next_value_seed(Seed)?;
            total = total.saturating_add(key).saturating_add(value);
        }
        Ok(total)
    }
}

/// Visits one nested value with a [`Counter`].
struct Seed;

impl<'de> de::DeserializeSeed<'de> for Seed {
    type Value = usize;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_any(Counter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r37_small_values_cost_far_more_than_their_bytes() {
        let zeros = format!("[{}0]", "0,".repeat(9_999));
        let held = held_bytes(zeros.as_bytes()).unwrap();
        assert!(held >= 10_000 * PARSED_VALUE_BYTES, "{held}");
        // A long string costs about its bytes, thrice (body, value, input).
        let text = format!(r#"{{"m":"{}"}}"#, "x".repeat(100_000));
        let held = held_bytes(text.as_bytes()).unwrap();
        assert!((300_000..301_000).contains(&held), "{held}");
        assert_eq!(held_bytes(b"{oops"), None);
    }

    #[test]
    fn r37_the_estimate_covers_what_parsing_really_allocates() {
        // serde_json's own Value tree for a dense body, measured by its
        // shape: 32 bytes a value plus the vector's capacity.
        let zeros = format!("[{}0]", "0,".repeat(99_999));
        let value: serde_json::Value = serde_json::from_str(&zeros).unwrap();
        let items = value.as_array().unwrap();
        let real = std::mem::size_of::<serde_json::Value>() * (items.capacity() + 1);
        let estimate = held_bytes(zeros.as_bytes()).unwrap() - 2 * zeros.len();
        assert!(estimate >= real, "estimate {estimate} < real {real}");
    }
}
