//! Guest text the host keeps or shows: cut to a bound, with a marker that
//! says how much there was (R28).

/// The longest tool-failure or activation message kept from a guest; the
/// rest is cut, with a marker. Long enough for any honest explanation.
pub const MAX_MESSAGE_BYTES: usize = 4 << 10;

/// `text` cut to at most `max` bytes at a UTF-8 boundary, followed by a
/// marker with the full length when anything was cut.
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("… (cut; {total} bytes in all)"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r28_truncate_cuts_at_a_char_boundary_and_says_how_much() {
        assert_eq!(truncate("short".into(), 10), "short");
        let cut = truncate("é".repeat(10), 5);
        assert_eq!(cut, "éé… (cut; 20 bytes in all)");
    }
}
