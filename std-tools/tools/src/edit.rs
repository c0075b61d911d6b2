//! `edit {path, oldString, newString, replaceAll?}`: exact string
//! replacement, with named fallbacks for the usual slips of a model.

use std::fs;
use std::ops::Range;

use toolhost_sdk::prelude::*;

use crate::root::{Root, Target, ask, create_parents, fs_error, save_for_file, write_atomic};
use crate::text::{TextFile, count, normalize};

/// The arguments of `edit`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
#[serde(rename_all = "camelCase")]
pub struct EditInput {
    /// The file to edit, relative to the workspace root.
    pub path: String,
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
    const DESCRIPTION: &'static str = "Replace text in a file of the workspace. `oldString` must occur exactly once unless `replaceAll` is set; otherwise the error says how many times it occurs, and more surrounding lines make it unique. Copy `oldString` from read's output without the `<line>: ` prefix. When the exact text is not found, matching that ignores a trimmed string's ends, indentation, or whitespace is tried, and the result names the one used. CRLF line endings and a byte-order mark are kept. Asks for `edit` permission first.";
    type Input = EditInput;
    type Output = NoOutput;

    fn execute(input: EditInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let target = root.resolve(Some(&input.path))?;
        if input.old_string == input.new_string {
            return Err("oldString and newString are the same; nothing would change.".into());
        }
        if input.old_string.is_empty() {
            return create(&target, &input.new_string, cx);
        }
        let bytes = fs::read(&target.path).map_err(|e| fs_error("edit", &target.rel, &e))?;
        let Some(file) = TextFile::decode(bytes) else {
            return Err(format!(
                "`{}` is not UTF-8 text; edit changes text files only.",
                target.rel
            )
            .into());
        };
        let old = normalize(&input.old_string);
        let new = normalize(&input.new_string);
        let found = find(&file.text, &old, &new, input.replace_all, &target.rel)?;
        ask(
            cx,
            "edit",
            &[target.rel.as_str()],
            &save_for_file(&target.rel),
            Some(json!({ "tool": "edit", "replacements": found.ranges.len() })),
        )?;
        let mut text = String::with_capacity(file.text.len() + new.len());
        let mut at = 0;
        for (range, replacement) in found.ranges.iter().zip(&found.replacements) {
            text.push_str(&file.text[at..range.start]);
            text.push_str(replacement);
            at = range.end;
        }
        text.push_str(&file.text[at..]);
        write_atomic(&target.path, &file.encode(&text))
            .map_err(|e| fs_error("write", &target.rel, &e))?;
        let n = found.ranges.len();
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

/// Where to replace, and with what.
struct Found {
    ranges: Vec<Range<usize>>,
    replacements: Vec<String>,
    fallback: Option<Fallback>,
}

/// Finds `old` in `text` exactly, or else with the first fallback that
/// finds it; it must be found once unless `all`.
fn find(text: &str, old: &str, new: &str, all: bool, rel: &str) -> Result<Found, ToolError> {
    let exact: Vec<Range<usize>> = text
        .match_indices(old)
        .map(|(at, m)| at..at + m.len())
        .collect();
    if !exact.is_empty() {
        return choose(exact, None, all, rel, |_| new.to_owned());
    }
    for fallback in Fallback::ALL {
        let found = match fallback {
            Fallback::Trimmed => {
                let trimmed = old.trim();
                if trimmed.is_empty() || trimmed == old {
                    continue;
                }
                let ranges: Vec<_> = text
                    .match_indices(trimmed)
                    .map(|(at, m)| at..at + m.len())
                    .collect();
                (ranges, new.trim().to_owned())
            }
            _ => (line_matches(text, old, fallback), String::new()),
        };
        let (ranges, trimmed_new) = found;
        if ranges.is_empty() {
            continue;
        }
        return choose(ranges, Some(fallback), all, rel, |range| match fallback {
            Fallback::Trimmed => trimmed_new.clone(),
            Fallback::Indentation => reindent(new, old, &text[range.clone()]),
            _ => new.to_owned(),
        });
    }
    Err(ToolError::new(format!(
        "oldString was not found in `{rel}`, not even ignoring whitespace at its ends, indentation, or whitespace within lines. Read the file again and copy the text exactly, without the `<line>: ` prefixes of read's output."
    )))
}

fn choose(
    ranges: Vec<Range<usize>>,
    fallback: Option<Fallback>,
    all: bool,
    rel: &str,
    replacement: impl Fn(&Range<usize>) -> String,
) -> Result<Found, ToolError> {
    if ranges.len() > 1 && !all {
        let how = fallback.map_or(String::new(), |f| {
            format!(" (matching with the `{}` fallback)", f.name())
        });
        return Err(ToolError::new(format!(
            "oldString occurs {} times in `{rel}`{how}; it must occur once. Include more surrounding lines to pick one, or set replaceAll to replace all {}.",
            count(ranges.len()),
            count(ranges.len())
        )));
    }
    let replacements = ranges.iter().map(replacement).collect();
    Ok(Found {
        ranges,
        replacements,
        fallback,
    })
}

/// The byte ranges of whole-line blocks of `text` that equal the lines of
/// `old` under `fallback`, not overlapping.
fn line_matches(text: &str, old: &str, fallback: Fallback) -> Vec<Range<usize>> {
    let old = old.strip_suffix('\n').unwrap_or(old);
    let wanted: Vec<&str> = old.split('\n').collect();
    if wanted.iter().all(|l| l.trim().is_empty()) {
        return Vec::new();
    }
    let mut lines: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    for (at, _) in text.match_indices('\n') {
        lines.push(start..at);
        start = at + 1;
    }
    lines.push(start..text.len());
    let line = |i: usize| &text[lines[i].clone()];
    let mut found = Vec::new();
    let mut i = 0;
    while i + wanted.len() <= lines.len() {
        let block: Vec<&str> = (i..i + wanted.len()).map(line).collect();
        let equal = match fallback {
            Fallback::Indentation => dedent(&block) == dedent(&wanted),
            Fallback::LineTrimmed => block.iter().zip(&wanted).all(|(a, b)| a.trim() == b.trim()),
            Fallback::Whitespace => block
                .iter()
                .zip(&wanted)
                .all(|(a, b)| collapse(a) == collapse(b)),
            Fallback::Trimmed => false,
        };
        if equal {
            found.push(lines[i].start..lines[i + wanted.len() - 1].end);
            i += wanted.len();
        } else {
            i += 1;
        }
    }
    found
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

fn collapse(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
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
