//! Text files as the editing tools see them: UTF-8 with its byte-order
//! mark and line endings set aside while editing and put back on writing.

/// The UTF-8 byte-order mark.
const BOM: &str = "\u{feff}";

/// How much of a file is sniffed to tell text from binary: as git and
/// ripgrep do, a NUL byte in the first 8 KiB means binary.
pub const SNIFF_BYTES: usize = 8 << 10;

/// A text file's contents with its byte-order mark removed and its line
/// endings made `\n`, and how to restore both.
#[derive(Debug, Clone)]
pub struct TextFile {
    /// The file began with a byte-order mark.
    pub bom: bool,
    /// The file's first line ending was `\r\n`: every `\n` is written back
    /// as `\r\n`.
    pub crlf: bool,
    /// The contents, `\n`-separated, without the mark.
    pub text: String,
}

impl TextFile {
    /// Decodes a file's bytes; `None` when they are not UTF-8 text.
    pub fn decode(bytes: Vec<u8>) -> Option<TextFile> {
        if is_binary(&bytes) {
            return None;
        }
        let text = String::from_utf8(bytes).ok()?;
        let (bom, text) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest.to_owned()),
            None => (false, text),
        };
        let crlf = text
            .find('\n')
            .is_some_and(|i| i > 0 && text.as_bytes()[i - 1] == b'\r');
        let text = if crlf {
            text.replace("\r\n", "\n")
        } else {
            text
        };
        Some(TextFile { bom, crlf, text })
    }

    /// `text` (with `\n` line endings) encoded as this file was.
    pub fn encode(&self, text: &str) -> Vec<u8> {
        let mut out = String::with_capacity(text.len() + 3);
        if self.bom {
            out.push_str(BOM);
        }
        if self.crlf {
            out.push_str(&normalize(text).replace('\n', "\r\n"));
        } else {
            out.push_str(text);
        }
        out.into_bytes()
    }
}

/// `text` with `\r\n` line endings made `\n`.
pub fn normalize(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// Whether `bytes` (a file's start) look binary: a NUL byte in the first
/// [`SNIFF_BYTES`], or bytes there that are not UTF-8 (a character cut at
/// the end of the sample is fine).
pub fn is_binary(bytes: &[u8]) -> bool {
    let sample = &bytes[..bytes.len().min(SNIFF_BYTES)];
    if memchr::memchr(0, sample).is_some() {
        return true;
    }
    match std::str::from_utf8(sample) {
        Ok(_) => false,
        Err(e) => e.error_len().is_some(),
    }
}

/// The media type of a file the model can see as media, from its first
/// bytes: PNG, JPEG, GIF, WebP or PDF.
pub fn media_type(start: &[u8]) -> Option<&'static str> {
    if start.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if start.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if start.starts_with(b"GIF87a") || start.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if start.len() >= 12 && &start[..4] == b"RIFF" && &start[8..12] == b"WEBP" {
        Some("image/webp")
    } else if start.starts_with(b"%PDF-") {
        Some("application/pdf")
    } else {
        None
    }
}

/// `line` cut after `max` characters, with a marker saying so.
pub fn cut_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        None => line.to_owned(),
        Some((at, _)) => {
            let total = line.chars().count();
            format!("{}… (line cut at {max} of {total} characters)", &line[..at])
        }
    }
}

/// `n` with thousands separators: `4,213`.
pub fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
