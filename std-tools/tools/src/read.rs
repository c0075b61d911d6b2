//! `read {filePath, offset?, limit?}`: a page of a text file with line
//! numbers, a directory's entries, or an image or PDF as media.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, BufRead, BufReader, Read as _};

use toolhost_sdk::prelude::*;

use crate::root::{Root, Target, ask, fs_error, save_for_dir, save_for_file};
use crate::text::{SNIFF_BYTES, chars_in, count, cut_line_of, is_binary, media_type};

/// Lines in one page, its continuation note included: opencode's page,
/// and the host's default line bound, so a page reaches the model whole.
pub const PAGE_LINES: usize = 2000;

/// Bytes in one page, its continuation note included: 50 KiB, the host's
/// default byte bound.
pub const PAGE_BYTES: usize = 50 << 10;

/// Characters of one line shown before it is cut: a minified file's one
/// line would otherwise fill the page.
pub const MAX_LINE_CHARS: usize = 2000;

/// Bytes of one line held while reading: [`MAX_LINE_CHARS`] characters
/// of up to 4 bytes each. The rest of a longer line is counted, not held,
/// so a file of one huge line is read in constant memory.
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4;

/// The largest image or PDF returned as media: the host's limit on one
/// media part.
pub const MAX_MEDIA_BYTES: u64 = 5 << 20;

/// Room kept in a page for its continuation note (two lines).
const NOTE_LINES: usize = 2;
const NOTE_BYTES: usize = 200;

/// The arguments of `read`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
#[schemars(transform = crate::alias::file_path)]
pub struct ReadInput {
    /// The file or directory to read, relative to the workspace root (or
    /// absolute under it).
    #[serde(rename = "filePath", alias = "path")]
    pub file_path: String,
    /// The line (or directory entry) to start from, 1-based. Default: 1.
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// The most lines (or entries) to return, at most 2000. Default: 2000.
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// Read a file or a directory.
#[derive(Debug)]
pub struct Read;

impl Tool for Read {
    const NAME: &'static str = "read";
    const DESCRIPTION: &'static str = "Read a file or directory in the workspace. Text comes back with each line prefixed by its number as `<line>: <content>`, at most 2000 lines or 50 KiB a page; call again with a larger offset to read on. Lines longer than 2000 characters are cut. A directory gives its entries, one per line, with a trailing `/` for subdirectories. PNG, JPEG, GIF, WebP and PDF files come back as attachments; other binary files are refused. Paths are relative to the workspace root.";
    type Input = ReadInput;
    type Output = NoOutput;

    fn execute(input: ReadInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let target = root.resolve(Some(&input.file_path))?;
        let metadata = fs::metadata(&target.path).map_err(|e| fs_error("read", &target.rel, &e))?;
        let offset = usize::try_from(input.offset.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
        let limit = usize::try_from(input.limit.unwrap_or(PAGE_LINES as u64))
            .unwrap_or(usize::MAX)
            .clamp(1, PAGE_LINES - NOTE_LINES);
        if metadata.is_dir() {
            ask(
                cx,
                "read",
                &[target.rel.as_str()],
                &save_for_dir(&target.rel),
                None,
            )?;
            return directory(&target, offset, limit);
        }
        ask(
            cx,
            "read",
            &[target.rel.as_str()],
            &save_for_file(&target.rel),
            None,
        )?;
        if !metadata.is_file() {
            return Err(format!("`{}` is not a regular file or directory.", target.rel).into());
        }
        let mut file =
            fs::File::open(&target.path).map_err(|e| fs_error("read", &target.rel, &e))?;
        let mut start = Vec::with_capacity(SNIFF_BYTES);
        (&mut file)
            .take(SNIFF_BYTES as u64)
            .read_to_end(&mut start)
            .map_err(|e| fs_error("read", &target.rel, &e))?;
        if let Some(mime) = media_type(&start) {
            return media(&target, mime, metadata.len());
        }
        if is_binary(&start) {
            return Err(format!(
                "`{}` is a binary file ({} bytes); read shows text, and PNG, JPEG, GIF, WebP and PDF files as attachments, nothing else.",
                target.rel,
                count(metadata.len())
            )
            .into());
        }
        if metadata.len() == 0 {
            return Ok(Response::text(format!("`{}` is empty.", target.rel)));
        }
        let reader = BufReader::with_capacity(64 << 10, start.chain(file));
        page(reader, &target, offset, limit).map_err(|e| fs_error("read", &target.rel, &e))?
    }
}

/// An image or PDF, whole, as media.
fn media(target: &Target, mime: &str, size: u64) -> ToolResult<NoOutput> {
    if size > MAX_MEDIA_BYTES {
        return Err(format!(
            "`{}` is {mime} of {} bytes, over the {} MiB limit for attachments.",
            target.rel,
            count(size),
            MAX_MEDIA_BYTES >> 20
        )
        .into());
    }
    let data = fs::read(&target.path).map_err(|e| fs_error("read", &target.rel, &e))?;
    let name = target
        .rel
        .rsplit('/')
        .next()
        .unwrap_or(&target.rel)
        .to_owned();
    let size = data.len();
    Ok(Response::text(format!(
        "`{}`: {mime}, {} bytes, attached.",
        target.rel,
        count(size)
    ))
    .with_media(Media::new(mime, data).with_name(name))
    .with_metadata(json!({ "path": target.rel, "mimeType": mime, "bytes": size })))
}

/// One page of a text file: lines `offset..` while they fit.
fn page(
    mut reader: impl BufRead,
    target: &Target,
    offset: usize,
    limit: usize,
) -> io::Result<ToolResult<NoOutput>> {
    let skipped = skip_lines(&mut reader, offset - 1)?;
    let past_end = |total: usize| {
        Err(format!(
            "offset {offset} is past the end of `{}`, which has {} lines.",
            target.rel,
            count(total)
        )
        .into())
    };
    if skipped < offset - 1 {
        return Ok(past_end(skipped));
    }
    let mut text = String::new();
    let mut shown = 0;
    let mut line = Vec::with_capacity(MAX_LINE_BYTES);
    let mut ended_early = false;
    while let Some(chars) = read_line(&mut reader, &mut line)? {
        let number = offset + shown;
        let content = String::from_utf8_lossy(&line);
        let formatted = if chars > MAX_LINE_CHARS {
            format!(
                "{number}: {}\n",
                cut_line_of(&content, MAX_LINE_CHARS, chars)
            )
        } else {
            format!("{number}: {content}\n")
        };
        if shown == limit || text.len() + formatted.len() > PAGE_BYTES - NOTE_BYTES {
            ended_early = true;
            break;
        }
        text.push_str(&formatted);
        shown += 1;
    }
    if shown == 0 && !ended_early {
        return Ok(past_end(skipped));
    }
    let last = offset + shown - 1;
    let total = if ended_early {
        // The line read but not shown, and every line after it.
        last + 1 + count_lines(&mut reader)?
    } else {
        last
    };
    if last < total {
        let why = if shown == limit {
            ""
        } else {
            " (the page is full at 50 KiB)"
        };
        let _ = write!(
            text,
            "\n(Showing lines {offset}-{last} of {}{why}. Use offset={} to continue.)",
            count(total),
            last + 1
        );
    } else {
        let _ = write!(text, "\n(End of file: {} lines.)", count(total));
    }
    Ok(Ok(Response::text(text).with_metadata(json!({
        "path": target.rel,
        "offset": offset,
        "lines": shown,
        "totalLines": total,
        "truncated": last < total,
    }))))
}

/// Skips `n` lines; how many there were to skip (a last line without a
/// newline counts).
fn skip_lines(reader: &mut impl BufRead, n: usize) -> io::Result<usize> {
    let mut skipped = 0;
    let mut open = false;
    while skipped < n {
        let buffer = reader.fill_buf()?;
        let Some(&end) = buffer.last() else {
            return Ok(skipped + usize::from(open));
        };
        let mut used = buffer.len();
        open = end != b'\n';
        for at in memchr::memchr_iter(b'\n', buffer) {
            skipped += 1;
            if skipped == n {
                used = at + 1;
                break;
            }
        }
        reader.consume(used);
    }
    Ok(skipped)
}

/// The lines left in `reader`, a last one without a newline included.
fn count_lines(reader: &mut impl BufRead) -> io::Result<usize> {
    let mut lines = 0;
    let mut last = b'\n';
    loop {
        let buffer = reader.fill_buf()?;
        let Some(&end) = buffer.last() else {
            break;
        };
        lines += memchr::memchr_iter(b'\n', buffer).count();
        last = end;
        let used = buffer.len();
        reader.consume(used);
    }
    Ok(lines + usize::from(last != b'\n'))
}

/// Reads one line into `line`, without its ending: the first
/// [`MAX_LINE_BYTES`] of it, the rest only counted. The characters of the
/// whole line; `None` at the end of the file.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Option<usize>> {
    line.clear();
    let mut chars = 0;
    let mut bytes = 0;
    let mut last = None;
    let mut any = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        any = true;
        let newline = memchr::memchr(b'\n', buffer);
        let piece = &buffer[..newline.unwrap_or(buffer.len())];
        let room = MAX_LINE_BYTES - line.len();
        line.extend_from_slice(&piece[..piece.len().min(room)]);
        chars += chars_in(piece);
        bytes += piece.len();
        last = piece.last().copied().or(last);
        let used = newline.map_or(buffer.len(), |at| at + 1);
        reader.consume(used);
        if newline.is_some() {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    // A `\r` before the `\n` is part of the ending.
    if last == Some(b'\r') {
        chars -= 1;
        if bytes <= MAX_LINE_BYTES {
            line.pop();
        }
    }
    Ok(Some(chars))
}

/// A directory's entries, sorted, a page of them.
fn directory(target: &Target, offset: usize, limit: usize) -> ToolResult<NoOutput> {
    let mut entries: Vec<String> = fs::read_dir(&target.path)
        .and_then(|entries| {
            entries
                .map(|entry| {
                    let entry = entry?;
                    let mut name = entry.file_name().to_string_lossy().into_owned();
                    if entry.file_type()?.is_dir() {
                        name.push('/');
                    }
                    Ok(name)
                })
                .collect::<io::Result<Vec<_>>>()
        })
        .map_err(|e| fs_error("list", &target.rel, &e))?;
    entries.sort();
    let total = entries.len();
    if total == 0 {
        return Ok(Response::text(format!(
            "`{}` is an empty directory.",
            target.rel
        )));
    }
    if offset > total {
        return Err(format!(
            "offset {offset} is past the end of `{}`, which has {} entries.",
            target.rel,
            count(total)
        )
        .into());
    }
    let shown: Vec<&String> = entries.iter().skip(offset - 1).take(limit).collect();
    let last = offset - 1 + shown.len();
    let mut text = String::new();
    for entry in &shown {
        text.push_str(entry);
        text.push('\n');
    }
    if last < total {
        let _ = write!(
            text,
            "\n(Showing entries {offset}-{last} of {}. Use offset={} to continue.)",
            count(total),
            last + 1
        );
    } else {
        let _ = write!(text, "\n({} entries.)", count(total));
    }
    Ok(Response::text(text).with_metadata(json!({
        "path": target.rel,
        "entries": total,
        "truncated": last < total,
    })))
}
