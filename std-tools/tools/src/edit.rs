//! `edit {filePath, oldString, newString, replaceAll?}`: exact string
//! replacement, with named fallbacks for the usual slips of a model.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::ops::Range;

use toolhost_sdk::prelude::*;

use crate::root::{
    MAX_EDIT_BYTES, Root, Target, ask, create_parents, fs_error, read_to_change, save_for_file,
    write_atomic,
};
use crate::text::{TextFile, count, normalize};

/// The arguments of `edit`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
#[schemars(transform = crate::alias::file_path)]
#[serde(rename_all = "camelCase")]
pub struct EditInput {
    /// The file to edit, relative to the workspace root (or absolute under
    /// it).
    #[serde(alias = "path")]
    pub file_path: String,
    /// The exact text to replace. Empty creates the file (which must not
    /// exist) with `newString`.
    pub old_string: String,
    /// The text to put in its place; must differ from `oldString`.
    pub new_string: String,
    /// Replace every occurrence of `oldString`, not just one. Default: false.
    #[serde(default)]
    pub replace_all: bool,
}

/// Replace text in a file.
#[derive(Debug)]
pub struct Edit;

impl Tool for Edit {
    const NAME: &'static str = "edit";
    const DESCRIPTION: &'static str = "Replace text in a file of the workspace. `oldString` must occur exactly once unless `replaceAll` is set; otherwise the error says how many times it occurs, and more surrounding lines make it unique. Copy `oldString` from read's output without the `<line>: ` prefix. When the exact text is not found, matching that ignores a trimmed string's ends, indentation, or whitespace is tried, and the result names the one used. Line endings and a byte-order mark are kept. Asks for `edit` permission first.";
    type Input = EditInput;
    type Output = NoOutput;

    fn execute(input: EditInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let target = root.resolve(Some(&input.file_path))?;
        if input.old_string == input.new_string {
            return Err("oldString and newString are the same; nothing would change.".into());
        }
        if input.old_string.is_empty() {
            return create(&target, &input.new_string, cx);
        }
        let Some(file) = TextFile::decode(read_to_change(&target, "edit")?) else {
            return Err(format!(
                "`{}` is not UTF-8 text; edit changes text files only.",
                target.rel
            )
            .into());
        };
        let text = file.normalized();
        let old = normalize(&input.old_string);
        let new = normalize(&input.new_string);
        let found = find(&file, &text, &old, &new, input.replace_all, &target.rel)?;
        if found.bytes as u64 > MAX_EDIT_BYTES {
            return Err(format!(
                "The edit would make `{}` up to {} bytes, over the {} MiB limit of edit and apply_patch; replace less at once.",
                target.rel,
                count(found.bytes),
                MAX_EDIT_BYTES >> 20
            )
            .into());
        }
        ask(
            cx,
            "edit",
            &[target.rel.as_str()],
            &save_for_file(&target.rel),
            Some(json!({ "tool": "edit", "replacements": found.count })),
        )?;
        let edits = matches(&text, &old, found.fallback).map(|range| {
            let new = replacement(found.fallback, &new, &old, &text[range.clone()]);
            (range, new)
        });
        let bytes = file.splice(&text, edits, found.bytes);
        write_atomic(&target.path, &bytes).map_err(|e| fs_error("write", &target.rel, &e))?;
        let n = found.count;
        let mut message = format!(
            "Edited `{}`: {} replacement{}.",
            target.rel,
            count(n),
            if n == 1 { "" } else { "s" }
        );
        if let Some(fallback) = found.fallback {
            message.push_str(&format!(
                " oldString did not match exactly; it matched with the `{}` fallback ({}).",
                fallback.name(),
                fallback.explain()
            ));
        }
        Ok(Response::text(message).with_metadata(json!({
            "path": target.rel,
            "replacements": n,
            "fallback": found.fallback.map(Fallback::name),
        })))
    }
}

/// An empty `oldString`: create the file with `content`.
fn create(target: &Target, content: &str, cx: &Context) -> ToolResult<NoOutput> {
    if target.path.exists() {
        return Err(format!(
            "`{}` exists and oldString is empty; give the text to replace, or use write to replace the whole file.",
            target.rel
        )
        .into());
    }
    ask(
        cx,
        "edit",
        &[target.rel.as_str()],
        &save_for_file(&target.rel),
        Some(json!({ "tool": "edit", "created": true })),
    )?;
    create_parents(target)?;
    write_atomic(&target.path, content.as_bytes())
        .map_err(|e| fs_error("write", &target.rel, &e))?;
    Ok(Response::text(format!("Created `{}`.", target.rel))
        .with_metadata(json!({ "path": target.rel, "replacements": 0, "created": true })))
}

/// A way to match `oldString` when it is not in the file exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// `oldString` with whitespace and blank lines trimmed from its ends.
    Trimmed,
    /// Whole lines, equal once each block's common indentation is removed;
    /// `newString` is re-indented to the file's indentation.
    Indentation,
    /// Whole lines, equal once each line is trimmed at both ends.
    LineTrimmed,
    /// Whole lines, equal once every run of whitespace is one space.
    Whitespace,
}

impl Fallback {
    const ALL: [Fallback; 4] = [
        Fallback::Trimmed,
        Fallback::Indentation,
        Fallback::LineTrimmed,
        Fallback::Whitespace,
    ];

    /// The name the result gives it.
    pub fn name(self) -> &'static str {
        match self {
            Fallback::Trimmed => "trimmed",
            Fallback::Indentation => "indentation",
            Fallback::LineTrimmed => "line-trimmed",
            Fallback::Whitespace => "whitespace",
        }
    }

    fn explain(self) -> &'static str {
        match self {
            Fallback::Trimmed => "whitespace at its start and end ignored",
            Fallback::Indentation => {
                "its indentation differed; newString was re-indented to match the file"
            }
            Fallback::LineTrimmed => "leading and trailing whitespace of each line ignored",
            Fallback::Whitespace => "runs of whitespace compared as one space",
        }
    }
}

/// How `oldString` was found.
struct Found {
    /// The fallback that found it; `None` when it was found exactly.
    fallback: Option<Fallback>,
    /// How many times.
    count: usize,
    /// The most the file can be with every match replaced.
    bytes: usize,
}

/// Finds `old` in `text` (`file`'s normalized contents) exactly, or else
/// with the first fallback that finds it; it must be found once unless
/// `all`. Matches are counted, not kept: a file can hold millions.
fn find(
    file: &TextFile,
    text: &str,
    old: &str,
    new: &str,
    all: bool,
    rel: &str,
) -> Result<Found, ToolError> {
    let fallbacks = Fallback::ALL.into_iter().map(Some);
    for fallback in std::iter::once(None).chain(fallbacks) {
        let mut n = 0;
        let mut bytes = file.text.len();
        for range in matches(text, old, fallback) {
            n += 1;
            // At most: every new line ending may be two bytes.
            let new = replacement(fallback, new, old, &text[range.clone()]);
            let written = new.len() + memchr::memchr_iter(b'\n', new.as_bytes()).count();
            bytes = (bytes + written).saturating_sub(range.len());
        }
        if n == 0 {
            continue;
        }
        if n > 1 && !all {
            let how = fallback.map_or(String::new(), |f| {
                format!(" (matching with the `{}` fallback)", f.name())
            });
            return Err(ToolError::new(format!(
                "oldString occurs {} times in `{rel}`{how}; it must occur once. Include more surrounding lines to pick one, or set replaceAll to replace all {}.",
                count(n),
                count(n)
            )));
        }
        return Ok(Found {
            fallback,
            count: n,
            bytes,
        });
    }
    Err(ToolError::new(format!(
        "oldString was not found in `{rel}`, not even ignoring whitespace at its ends, indentation, or whitespace within lines. Read the file again and copy the text exactly, without the `<line>: ` prefixes of read's output."
    )))
}

/// The byte ranges where `fallback` (exactly when `None`) finds `old` in
/// `text`, in order, not overlapping.
fn matches<'a>(
    text: &'a str,
    old: &'a str,
    fallback: Option<Fallback>,
) -> Box<dyn Iterator<Item = Range<usize>> + 'a> {
    let exact = |old: &'a str| text.match_indices(old).map(|(at, m)| at..at + m.len());
    match fallback {
        None => Box::new(exact(old)),
        Some(Fallback::Trimmed) => {
            let trimmed = old.trim();
            if trimmed.is_empty() || trimmed == old {
                Box::new(std::iter::empty())
            } else {
                Box::new(exact(trimmed))
            }
        }
        Some(fallback) => Box::new(Blocks::new(text, old, fallback)),
    }
}

/// What replaces the match `matched` of `old` found by `fallback`.
fn replacement<'a>(
    fallback: Option<Fallback>,
    new: &'a str,
    old: &str,
    matched: &str,
) -> Cow<'a, str> {
    match fallback {
        Some(Fallback::Trimmed) => Cow::Borrowed(new.trim()),
        Some(Fallback::Indentation) => Cow::Owned(reindent(new, old, matched)),
        _ => Cow::Borrowed(new),
    }
}

/// The whole-line blocks of a text that equal the lines of `old` under a
/// line fallback: a window of as many lines as `old` has slides over the
/// text, so memory stays that of `old`.
struct Blocks<'a> {
    text: &'a str,
    fallback: Fallback,
    wanted: Vec<&'a str>,
    /// `wanted` without its common indentation (the indentation fallback).
    dedented: Vec<String>,
    /// Where the next line starts; `None` past the last.
    next: Option<usize>,
    window: VecDeque<Range<usize>>,
}

impl<'a> Blocks<'a> {
    fn new(text: &'a str, old: &'a str, fallback: Fallback) -> Blocks<'a> {
        let old = old.strip_suffix('\n').unwrap_or(old);
        let wanted: Vec<&str> = old.split('\n').collect();
        // Blank lines alone would match anywhere.
        let blank = wanted.iter().all(|l| l.trim().is_empty());
        Blocks {
            text,
            fallback,
            dedented: dedent(&wanted),
            wanted,
            next: (!blank).then_some(0),
            window: VecDeque::new(),
        }
    }

    fn equal(&self) -> bool {
        let block = self.window.iter().map(|r| &self.text[r.clone()]);
        match self.fallback {
            Fallback::Indentation => dedent(&block.collect::<Vec<_>>()) == self.dedented,
            Fallback::LineTrimmed => block.zip(&self.wanted).all(|(a, b)| a.trim() == b.trim()),
            Fallback::Whitespace => block
                .zip(&self.wanted)
                .all(|(a, b)| a.split_whitespace().eq(b.split_whitespace())),
            Fallback::Trimmed => false,
        }
    }
}

impl Iterator for Blocks<'_> {
    type Item = Range<usize>;

    fn next(&mut self) -> Option<Range<usize>> {
        loop {
            let start = self.next?;
            let end = memchr::memchr(b'\n', &self.text.as_bytes()[start..]).map(|i| start + i);
            self.next = end.map(|end| end + 1);
            self.window.push_back(start..end.unwrap_or(self.text.len()));
            if self.window.len() > self.wanted.len() {
                self.window.pop_front();
            }
            if self.window.len() == self.wanted.len() && self.equal() {
                let block = self.window[0].start..self.window[self.wanted.len() - 1].end;
                self.window.clear();
                return Some(block);
            }
        }
    }
}

/// The smallest indentation of the non-blank lines.
fn indent_of<'a>(lines: impl IntoIterator<Item = &'a str>) -> usize {
    lines
        .into_iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0)
}

/// The lines with their common indentation removed (blank lines empty).
fn dedent(lines: &[&str]) -> Vec<String> {
    let indent = indent_of(lines.iter().copied());
    lines
        .iter()
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                l.get(indent..)
                    .unwrap_or(l.trim_start())
                    .trim_end()
                    .to_owned()
            }
        })
        .collect()
}

/// `new`, whose indentation was relative to `old`'s, indented like
/// `matched` (the file's block).
fn reindent(new: &str, old: &str, matched: &str) -> String {
    let old_indent = indent_of(old.lines());
    let file_indent = indent_of(matched.lines());
    let prefix: String = matched
        .lines()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| l.get(..file_indent))
        .map(str::to_owned)
        .unwrap_or_default();
    new.split('\n')
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                let own = l.len() - l.trim_start().len();
                let keep = own.saturating_sub(old_indent);
                let extra = l.get(own - keep..own).unwrap_or("");
                format!("{prefix}{extra}{}", l.trim_start())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
