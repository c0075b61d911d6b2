//! A request path as grants and rules see it and as it is sent (R36): its
//! unreserved percent-escapes decoded, the rest upper-cased, and its dot
//! segments removed (RFC 3986 §6.2.2 and §5.2.4). Otherwise `/public/../x`
//! (or `%2e%2e`) would match a grant for `/public/*` and reach `/x` on any
//! server that normalises. What cannot be normalised safely is refused:
//! an encoded `/` or `\`, a raw `\`, or a broken escape, which servers
//! read in different ways.

use std::fmt;

/// Why a path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathRefused {
    /// `%2F` or `%5C`: a separator some servers decode and some do not.
    EncodedSeparator,
    /// A raw `\`, which some servers read as `/`.
    Backslash,
    /// `%` not followed by two hex digits.
    BrokenEscape,
}

impl fmt::Display for PathRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathRefused::EncodedSeparator => "an encoded `/` or `\\`",
            PathRefused::Backslash => "a `\\`",
            PathRefused::BrokenEscape => "a `%` not followed by two hex digits",
        })
    }
}

/// `path` normalised: escapes of unreserved characters decoded, other
/// escapes upper-cased, dot segments removed.
pub(crate) fn normalized(path: &str) -> Result<String, PathRefused> {
    Ok(without_dot_segments(&decoded_unreserved(path)?))
}

/// RFC 3986 §6.2.2.1-2: `%41` becomes `A`, `%2e` becomes `.`; `%3f` stays
/// an escape, as `%3F`.
fn decoded_unreserved(path: &str) -> Result<String, PathRefused> {
    if path.contains('\\') {
        return Err(PathRefused::Backslash);
    }
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            // Only ASCII is special here: copy the character whole.
            let end = next_boundary(path, i);
            out.push_str(&path[i..end]);
            i = end;
            continue;
        }
        let hex = path.get(i + 1..i + 3).ok_or(PathRefused::BrokenEscape)?;
        let byte = u8::from_str_radix(hex, 16).map_err(|_| PathRefused::BrokenEscape)?;
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(PathRefused::BrokenEscape);
        }
        match byte {
            b'/' | b'\\' => return Err(PathRefused::EncodedSeparator),
            b if is_unreserved(b) => out.push(char::from(b)),
            b => out.push_str(&format!("%{b:02X}")),
        }
        i += 3;
    }
    Ok(out)
}

fn next_boundary(text: &str, from: usize) -> usize {
    let mut end = from + 1;
    while !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

/// RFC 3986 §5.2.4 for an absolute path (or an empty one): `.` segments
/// dropped, `..` removing the segment before it, never above the root; a
/// path ending in a dot segment keeps its trailing `/`.
fn without_dot_segments(path: &str) -> String {
    let Some(rest) = path.strip_prefix('/') else {
        return if path.is_empty() {
            "/".to_owned()
        } else {
            // http::Uri only gives absolute paths; treat others as under `/`.
            without_dot_segments(&format!("/{path}"))
        };
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    let mut kept: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, segment) in segments.into_iter().enumerate() {
        match segment {
            "." => {}
            ".." => {
                kept.pop();
            }
            other => kept.push(other),
        }
        if i == last && matches!(segment, "." | "..") {
            kept.push("");
        }
    }
    format!("/{}", kept.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r36_dot_segments_are_removed_before_grants_see_a_path() {
        for (given, expected) in [
            ("/public/../secret", "/secret"),
            ("/public/%2e%2e/secret", "/secret"),
            ("/public/%2E%2e/secret", "/secret"),
            ("/public/.%2e/secret", "/secret"),
            ("/public/./a", "/public/a"),
            ("/a/b/..", "/a/"),
            ("/a/b/.", "/a/b/"),
            ("/../../etc", "/etc"),
            ("/..", "/"),
            ("/", "/"),
            ("", "/"),
            ("/a//b", "/a//b"),
            ("/%7Euser/%41b", "/~user/Ab"),
            ("/q%3fx/%e2%82%ac", "/q%3Fx/%E2%82%AC"),
            ("/..a/b..", "/..a/b.."),
            ("/ünï", "/ünï"),
        ] {
            assert_eq!(normalized(given).as_deref(), Ok(expected), "{given}");
        }
    }

    #[test]
    fn r36_what_cannot_be_normalised_safely_is_refused() {
        for (given, why) in [
            ("/public/..%2fsecret", PathRefused::EncodedSeparator),
            ("/public/..%2Fsecret", PathRefused::EncodedSeparator),
            ("/public/..%5csecret", PathRefused::EncodedSeparator),
            ("/public/..\\secret", PathRefused::Backslash),
            ("/a%", PathRefused::BrokenEscape),
            ("/a%4", PathRefused::BrokenEscape),
            ("/a%zz", PathRefused::BrokenEscape),
            ("/a%+1", PathRefused::BrokenEscape),
        ] {
            assert_eq!(normalized(given), Err(why), "{given}");
        }
    }
}
