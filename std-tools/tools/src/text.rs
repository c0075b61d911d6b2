//! Text files as the editing tools see them: UTF-8, with a byte-order mark
//! set aside while editing and put back on writing, and each line keeping
//! its own ending.

use std::borrow::Cow;
use std::io::{self, Read};
use std::ops::Range;

/// The UTF-8 byte-order mark.
const BOM: &str = "\u{feff}";

/// How much of a file is sniffed to tell text from binary: as git and
/// ripgrep do, a NUL byte in the first 8 KiB means binary.
pub const SNIFF_BYTES: usize = 8 << 10;

/// Bytes read at once while counting a file's line endings.
const COUNT_WINDOW: usize = 64 << 10;

/// A text file's contents with its byte-order mark set aside.
#[derive(Debug, Clone)]
pub struct TextFile {
    /// The file began with a byte-order mark.
    pub bom: bool,
    /// The contents after the mark, each line ending as in the file.
    pub text: String,
    /// The ending of the lines an edit adds: the file's more common one.
    pub eol: &'static str,
}

impl TextFile {
    /// Decodes a file's bytes; `None` when they are not UTF-8 text.
    pub fn decode(bytes: Vec<u8>) -> Option<TextFile> {
        if is_binary(&bytes) {
            return None;
        }
        let mut text = String::from_utf8(bytes).ok()?;
        let bom = text.starts_with(BOM);
        if bom {
            text.drain(..BOM.len());
        }
        let mut endings = Endings::default();
        endings.count(text.as_bytes());
        Some(TextFile {
            bom,
            eol: endings.common(),
            text,
        })
    }

    /// The contents with `\r\n` made `\n`, as edits are matched.
    pub fn normalized(&self) -> Cow<'_, str> {
        if self.text.contains("\r\n") {
            Cow::Owned(normalize(&self.text))
        } else {
            Cow::Borrowed(&self.text)
        }
    }

    /// The file's bytes with `edits` applied: each range of `normalized`
    /// (this file's [`TextFile::normalized`] contents; in order, not
    /// overlapping) is replaced by its text (`\n`-separated). The new
    /// text's line endings are the replaced text's own, in order, and the
    /// file's common one for lines beyond them; everything else stays as
    /// it was. `size`: about the size of the result.
    pub fn splice<'a>(
        &self,
        normalized: &str,
        edits: impl Iterator<Item = (Range<usize>, Cow<'a, str>)>,
        size: usize,
    ) -> Vec<u8> {
        let raw = self.text.as_bytes();
        let mut out = Vec::with_capacity(size + BOM.len());
        if self.bom {
            out.extend_from_slice(BOM.as_bytes());
        }
        let mut map = Offsets {
            raw,
            normalized: normalized.as_bytes(),
            at: 0,
            raw_at: 0,
        };
        let mut copied = 0;
        for (range, new) in edits {
            let start = map.advance(range.start);
            out.extend_from_slice(&raw[copied..start]);
            copied = map.advance(range.end);
            let mut endings = endings_of(&raw[start..copied]);
            for (i, line) in new.split('\n').enumerate() {
                if i > 0 {
                    out.extend_from_slice(endings.next().unwrap_or(self.eol).as_bytes());
                }
                out.extend_from_slice(line.as_bytes());
            }
        }
        out.extend_from_slice(&raw[copied..]);
        out
    }

    /// `text` (the whole new contents) encoded as this file was: with its
    /// mark.
    pub fn encode(&self, text: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len() + BOM.len());
        if self.bom {
            out.extend_from_slice(BOM.as_bytes());
        }
        out.extend_from_slice(text.as_bytes());
        out
    }
}

/// Walks a file's contents and their normalized copy together, turning an
/// offset of the copy into the file's: each `\n` of the copy was `\n` or
/// `\r\n` in the file.
struct Offsets<'a> {
    raw: &'a [u8],
    normalized: &'a [u8],
    at: usize,
    raw_at: usize,
}

impl Offsets<'_> {
    /// The file's offset of the copy's offset `to` (not before the last).
    fn advance(&mut self, to: usize) -> usize {
        let mut crlf = 0;
        for i in memchr::memchr_iter(b'\n', &self.normalized[self.at..to]) {
            if self.raw[self.raw_at + i + crlf] == b'\r' {
                crlf += 1;
            }
        }
        self.raw_at += to - self.at + crlf;
        self.at = to;
        self.raw_at
    }
}

/// The line endings in `bytes`, in order.
fn endings_of(bytes: &[u8]) -> impl Iterator<Item = &'static str> {
    memchr::memchr_iter(b'\n', bytes).map(|i| {
        if i > 0 && bytes[i - 1] == b'\r' {
            "\r\n"
        } else {
            "\n"
        }
    })
}

/// Line endings counted so far.
#[derive(Debug, Default, Clone, Copy)]
struct Endings {
    lf: usize,
    crlf: usize,
    /// The last byte counted was `\r`.
    after_cr: bool,
}

impl Endings {
    /// Counts the endings in `bytes`, which follow those counted before.
    fn count(&mut self, bytes: &[u8]) {
        for i in memchr::memchr_iter(b'\n', bytes) {
            let cr = if i == 0 {
                self.after_cr
            } else {
                bytes[i - 1] == b'\r'
            };
            if cr {
                self.crlf += 1;
            } else {
                self.lf += 1;
            }
        }
        if let Some(&last) = bytes.last() {
            self.after_cr = last == b'\r';
        }
    }

    /// The more common ending: `\r\n` when there are at least as many of
    /// them as of `\n` alone (and some), else `\n`.
    fn common(&self) -> &'static str {
        if self.crlf > 0 && self.crlf >= self.lf {
            "\r\n"
        } else {
            "\n"
        }
    }
}

/// What `write` keeps of a text file it replaces.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// The file began with a byte-order mark.
    pub bom: bool,
    /// Its more common line ending.
    pub eol: &'static str,
}

/// The style of the file `reader` reads, in constant memory; `None` when
/// it is binary.
pub fn style(mut reader: impl Read) -> io::Result<Option<Style>> {
    let mut window = vec![0; COUNT_WINDOW];
    let mut endings = Endings::default();
    let mut first = true;
    let mut bom = false;
    loop {
        let n = read_full(&mut reader, &mut window)?;
        let bytes = &window[..n];
        if first {
            if is_binary(bytes) {
                return Ok(None);
            }
            bom = bytes.starts_with(BOM.as_bytes());
            first = false;
        }
        endings.count(bytes);
        if n < window.len() {
            return Ok(Some(Style {
                bom,
                eol: endings.common(),
            }));
        }
    }
}

/// Fills `buffer` from `reader` as far as it goes; how much was read.
fn read_full(reader: &mut impl Read, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match reader.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// `text` with `\r\n` line endings made `\n`.
pub fn normalize(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// `text` with a byte-order mark and `eol` line endings (its own `\n`
/// endings replaced).
pub fn styled(text: &str, style: Style) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + BOM.len());
    if style.bom {
        out.extend_from_slice(BOM.as_bytes());
    }
    if style.eol == "\n" {
        out.extend_from_slice(text.as_bytes());
    } else {
        out.extend_from_slice(text.replace('\n', style.eol).as_bytes());
    }
    out
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
        Some(_) => cut_line_of(line, max, line.chars().count()),
    }
}

/// The first `max` characters of `start` (the start of a line of `total`
/// characters, more than `max`), with a marker saying it was cut.
pub fn cut_line_of(start: &str, max: usize, total: usize) -> String {
    let at = start
        .char_indices()
        .nth(max)
        .map_or(start.len(), |(i, _)| i);
    format!(
        "{}… (line cut at {max} of {total} characters)",
        &start[..at]
    )
}

/// The characters in `bytes` of UTF-8: the bytes that start one.
pub fn chars_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b as i8) >= -0x40).count()
}

/// `n` with thousands separators: `4,213`.
pub fn count(n: impl std::fmt::Display) -> String {
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
