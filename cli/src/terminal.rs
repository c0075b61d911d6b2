//! Guest-controlled text made safe for a terminal (R30): control characters
//! become visible escapes such as `\u{1b}`, so a plugin cannot move the
//! cursor, erase lines, recolour, or reorder text with bidi controls.

use std::fmt::Write as _;

/// For one line: every control character is escaped, `\n`, `\r` and `\t`
/// included, so the text cannot start a line of its own.
pub(crate) fn line(text: &str) -> String {
    escape(text, |_| false)
}

/// For multi-line text: `\n` and `\t` are kept, every other control
/// character is escaped.
pub(crate) fn text(text: &str) -> String {
    escape(text, |c| c == '\n' || c == '\t')
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_control(c) && !keep(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// C0, DEL, C1, and the bidi marks, embeddings, overrides and isolates.
fn is_control(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_escapes_an_erase_line_sequence_visibly() {
        assert_eq!(line("\r\x1b[2Kok"), r"\u{d}\u{1b}[2Kok");
    }

    #[test]
    fn line_escapes_newlines_and_tabs() {
        assert_eq!(line("a\nb\tc"), r"a\u{a}b\u{9}c");
    }

    #[test]
    fn text_keeps_newlines_and_tabs_but_not_carriage_returns() {
        assert_eq!(text("a\nb\tc\r\n"), "a\nb\tc\\u{d}\n");
    }

    #[test]
    fn every_class_of_control_is_escaped() {
        let hostile =
            "\0\x07\x1f\x7f\u{80}\u{9b}\u{9f}\u{200e}\u{200f}\u{202a}\u{202e}\u{2066}\u{2069}";
        let escaped = line(hostile);
        assert_eq!(
            escaped,
            r"\u{0}\u{7}\u{1f}\u{7f}\u{80}\u{9b}\u{9f}\u{200e}\u{200f}\u{202a}\u{202e}\u{2066}\u{2069}"
        );
        assert_eq!(text(hostile), escaped);
    }

    #[test]
    fn ordinary_text_is_unchanged() {
        let plain = "héllo wörld → 日本語 \u{a0}\u{2065}\u{206a} {\"a\": 1}";
        assert_eq!(line(plain), plain);
        assert_eq!(text(plain), plain);
    }
}
