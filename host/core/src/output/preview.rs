//! The preview that reaches the model in place of an oversized text: head,
//! a marker saying what was omitted and where it is kept, tail (R16).

use crate::model::budget::OutputBounds;

/// Bytes of the byte limit kept free for the omission marker.
pub const MARKER_ROOM: usize = 256;

/// Lines of the line limit kept free for the omission marker.
pub const MARKER_LINES: usize = 2;

/// Counts lines: line breaks, plus one for a final line without a break.
pub fn count_lines(text: &str) -> usize {
    let breaks = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    breaks + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// Whether `text` is within `bounds`.
pub fn within(text: &str, bounds: &OutputBounds) -> bool {
    text.len() <= bounds.max_bytes && count_lines(text) <= bounds.max_lines
}

/// The omission marker that replaces the middle of a bounded text.
pub fn marker(omitted_bytes: usize, omitted_lines: usize, reference: &str) -> String {
    format!(
        "[... {omitted_lines} lines ({omitted_bytes} bytes) omitted; full output retained as {reference} ...]\n"
    )
}

/// The marker that stands for the text parts after a cut, retained
/// together (joined by newlines).
pub fn parts_marker(parts: usize, bytes: usize, reference: &str) -> String {
    format!(
        "[... {parts} more text parts ({bytes} bytes) omitted; full text retained as {reference} ...]\n"
    )
}

/// Replaces an over-limit `text` by head + marker + tail, split evenly,
/// cutting at line boundaries (or UTF-8 boundaries inside one huge line).
/// The caller has already retained the full text as `reference`.
pub fn preview(text: &str, bounds: &OutputBounds, reference: &str) -> String {
    let bytes = bounds.max_bytes.saturating_sub(MARKER_ROOM) / 2;
    let lines = bounds.max_lines.saturating_sub(MARKER_LINES) / 2;
    let head_end = head_cut(text, bytes, lines);
    let tail_start = tail_cut(text, bytes, lines).max(head_end);
    let (head, omitted, tail) = (
        &text[..head_end],
        &text[head_end..tail_start],
        &text[tail_start..],
    );
    let omitted_lines = memchr::memchr_iter(b'\n', omitted.as_bytes()).count();
    let sep = if head.is_empty() || head.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    let marker = marker(omitted.len(), omitted_lines, reference);
    let mut out = String::with_capacity(head.len() + sep.len() + marker.len() + tail.len());
    out.push_str(head);
    out.push_str(sep);
    out.push_str(&marker);
    out.push_str(tail);
    out
}

/// End of the longest prefix of whole lines within the limits; inside a
/// first line that is too long, the last UTF-8 boundary within `max_bytes`.
fn head_cut(text: &str, max_bytes: usize, max_lines: usize) -> usize {
    let mut end = 0;
    for (n, nl) in memchr::memchr_iter(b'\n', text.as_bytes()).enumerate() {
        if n >= max_lines || nl + 1 > max_bytes {
            break;
        }
        end = nl + 1;
    }
    if end == 0 && max_lines > 0 {
        end = floor_boundary(text, max_bytes.min(text.len()));
    }
    end
}

/// Start of the longest suffix of whole lines within the limits; inside a
/// last line that is too long, the first UTF-8 boundary within `max_bytes`
/// of the end.
fn tail_cut(text: &str, max_bytes: usize, max_lines: usize) -> usize {
    let len = text.len();
    // A trailing newline ends the last line rather than starting a new one.
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut start = len;
    let mut taken = 0;
    for nl in memchr::memrchr_iter(b'\n', body.as_bytes()) {
        let candidate = nl + 1;
        if taken + 1 > max_lines || len - candidate > max_bytes {
            break;
        }
        start = candidate;
        taken += 1;
    }
    // The first line counts too when the whole text fits.
    if start != len && taken < max_lines && len <= max_bytes {
        start = 0;
    }
    if start == len && max_lines > 0 {
        start = ceil_boundary(text, len.saturating_sub(max_bytes));
    }
    start
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Text of short lines with multi-byte characters, sometimes one huge
    /// line.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::collection::vec("[a-zé€😀 ]{0,40}", 0..400).prop_map(|l| l.join("\n")),
            "[a-z€😀]{1,3000}",
        ]
    }

    proptest! {
        #[test]
        fn r28_preview_stays_within_bounds_and_cuts_only_at_boundaries(
            text in text(),
            max_lines in 3usize..100,
            max_bytes in 300usize..4000,
        ) {
            let bounds = OutputBounds { max_lines, max_bytes, ..OutputBounds::default() };
            prop_assume!(!within(&text, &bounds));
            let reference = "toolhost-output:0123456789abcdef0123456789abcdef";
            let p = preview(&text, &bounds, reference);
            prop_assert!(p.len() <= max_bytes, "{} > {max_bytes}", p.len());
            prop_assert!(count_lines(&p) <= max_lines);
            // The head is whole lines of the text, or a cut inside its first
            // line (then followed by a line break of the marker's own); the
            // tail is a suffix. Cuts fall on char boundaries: a `String`
            // could not hold anything else.
            let head = &p[..p.find("[... ").unwrap()];
            let whole_lines = head.is_empty() || (head.ends_with('\n') && text.starts_with(head));
            let first_line_cut = head
                .strip_suffix('\n')
                .is_some_and(|h| !h.contains('\n') && text.starts_with(h));
            prop_assert!(whole_lines || first_line_cut, "head {head:?}");
            let tail = &p[p.find(" ...]\n").unwrap() + 6..];
            prop_assert!(text.ends_with(tail));
        }
    }

    fn bounds(max_lines: usize, max_bytes: usize) -> OutputBounds {
        OutputBounds {
            max_lines,
            max_bytes,
            ..OutputBounds::default()
        }
    }

    #[test]
    fn r16_preview_keeps_whole_head_and_tail_lines_within_limits() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let b = bounds(100, 4_000);
        let p = preview(&text, &b, "toolhost-output:ab");
        assert!(p.len() <= b.max_bytes, "{}", p.len());
        assert!(count_lines(&p) <= b.max_lines);
        assert!(p.starts_with("line 0\nline 1\n"));
        assert!(p.ends_with("line 9999\n"));
        let (head, rest) = p.split_once("[... ").unwrap();
        let tail = rest.split_once("...]\n").unwrap().1;
        assert_eq!(count_lines(head), 49);
        assert_eq!(count_lines(tail), 49);
        let omitted = text.len() - head.len() - tail.len();
        let expected = marker(omitted, 10_000 - 98, "toolhost-output:ab");
        assert!(p.contains(&expected), "{p}");
    }

    #[test]
    fn r16_single_huge_line_is_cut_at_utf8_boundaries() {
        let text = "é".repeat(100_000);
        let b = bounds(2_000, 1_000);
        let p = preview(&text, &b, "toolhost-output:cd");
        assert!(p.len() <= b.max_bytes);
        let (head, rest) = p.split_once("\n[... ").unwrap();
        let tail = rest.split_once("...]\n").unwrap().1;
        assert!(head.chars().all(|c| c == 'é') && !head.is_empty());
        assert!(tail.chars().all(|c| c == 'é') && !tail.is_empty());
    }

    #[test]
    fn count_lines_counts_a_final_unterminated_line() {
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("a"), 1);
        assert_eq!(count_lines("a\n"), 1);
        assert_eq!(count_lines("a\nb"), 2);
    }
}
