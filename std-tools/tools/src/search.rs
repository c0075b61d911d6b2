//! `glob`, `grep` and `list`: walking the root the way ripgrep does
//! (`.gitignore`, `.ignore` and hidden files respected), with results a
//! model can use and an exact count of what was left out.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read as _};
use std::path::Path;
use std::time::SystemTime;

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use ignore::{DirEntry, WalkBuilder};
use regex::bytes::{Regex, RegexBuilder};
use toolhost_sdk::prelude::*;

use crate::root::{Root, Target, ask, fs_error};
use crate::text::{count, cut_line, is_binary};

/// Results returned unless the call sets `limit`: opencode's default.
pub const DEFAULT_LIMIT: usize = 100;

/// The largest `limit` a call may set: more lines than the host shows a
/// model by default (2,000), so a larger page would only be cut.
pub const MAX_LIMIT: usize = 2000;

/// Files `list` shows: opencode's tree limit.
pub const LIST_LIMIT: usize = 100;

/// The largest file `grep` searches: larger files are counted as skipped,
/// so one huge log cannot take the call's time (files are searched line by
/// line, so memory does not grow with a file's size).
pub const MAX_GREP_FILE_BYTES: u64 = 64 << 20;

/// Bytes of a file `grep` reads at once and holds: most source files fit,
/// in one read. A line longer than this is held whole, up to the file
/// limit.
const READ_WINDOW: usize = 256 << 10;

/// The most one read of the host returns (wasmtime-wasi's
/// `MAX_READ_SIZE_ALLOC`): a read asking for no more than this comes back
/// short only at the end of a regular file.
const HOST_READ_MAX: usize = 64 << 10;

/// Characters of a matching line shown before it is cut.
const MAX_MATCH_LINE_CHARS: usize = 2000;

/// What `list` leaves out besides `.gitignore`d files: build output,
/// dependencies, caches and version-control directories.
pub const LIST_IGNORES: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "target",
    "dist",
    "build",
    "out",
    "vendor",
    "bin",
    "obj",
    ".idea",
    ".vscode",
    ".zig-cache",
    "zig-out",
    "coverage",
    "tmp",
    "temp",
    ".cache",
    "cache",
    "logs",
    ".venv",
    "venv",
    "env",
    "__pycache__",
    ".next",
    ".nuxt",
    ".turbo",
];

/// A walk of `dir`: `.gitignore` (also outside a git repository),
/// `.ignore` and global git excludes respected; hidden entries skipped
/// unless `hidden`; `.git` itself always skipped; in name order, so
/// results are stable.
fn walk(dir: &Path, hidden: bool) -> ignore::Walk {
    WalkBuilder::new(dir)
        .hidden(!hidden)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build()
}

/// A directory to search: `path` resolved, or the root.
fn search_dir(root: &Root, path: Option<&str>) -> Result<Target, ToolError> {
    let target = root.resolve(path)?;
    let metadata = fs::metadata(&target.path).map_err(|e| fs_error("search", &target.rel, &e))?;
    if !metadata.is_dir() {
        return Err(format!(
            "`{}` is not a directory; give a directory to search.",
            target.rel
        )
        .into());
    }
    Ok(target)
}

/// A glob as ripgrep's `--glob` reads one: `*` stays within a path
/// segment, `**` crosses them, `{a,b}` alternates.
fn glob(pattern: &str) -> Result<GlobMatcher, ToolError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolError::new(format!("invalid glob pattern `{pattern}`: {e}")))
}

/// Whether `rel` (relative to the searched directory) matches `matcher`:
/// a pattern without `/` matches a file's name at any depth, as in
/// `.gitignore` and ripgrep.
fn matches(matcher: &GlobMatcher, pattern: &str, rel: &Path) -> bool {
    if pattern.contains('/') {
        matcher.is_match(rel)
    } else {
        rel.file_name().is_some_and(|n| matcher.is_match(n))
    }
}

/// `entry`'s path relative to `dir`.
fn under<'a>(entry: &'a DirEntry, dir: &Path) -> &'a Path {
    entry.path().strip_prefix(dir).unwrap_or(entry.path())
}

/// A limit from the call, within 1..=[`MAX_LIMIT`].
fn limit(given: Option<u64>) -> usize {
    given.map_or(DEFAULT_LIMIT, |l| {
        usize::try_from(l).unwrap_or(MAX_LIMIT).clamp(1, MAX_LIMIT)
    })
}

/// The arguments of `glob`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct GlobInput {
    /// The glob to match file paths against, e.g. `**/*.rs` or
    /// `src/**/*.{ts,tsx}`. A pattern without `/` matches file names at
    /// any depth.
    pub pattern: String,
    /// The directory to search, relative to the workspace root. Default:
    /// the root.
    pub path: Option<String>,
    /// Include hidden files and directories (names starting with `.`).
    /// Default: false.
    #[serde(default)]
    pub hidden: bool,
    /// The most paths to return, at most 2000. Default: 100.
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// Find files by name pattern.
#[derive(Debug)]
pub struct GlobTool;

impl Tool for GlobTool {
    const NAME: &'static str = "glob";
    const DESCRIPTION: &'static str = "Find files in the workspace whose paths match a glob such as `**/*.rs` or `src/**/*.{ts,tsx}`, newest first, at most 100 unless `limit` says otherwise. Files ignored by .gitignore and hidden files are skipped unless `hidden` is set. Paths are relative to the workspace root. When more files match than are shown, the result says how many.";
    type Input = GlobInput;
    type Output = NoOutput;

    fn execute(input: GlobInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let dir = search_dir(&root, input.path.as_deref())?;
        let matcher = glob(&input.pattern)?;
        ask(
            cx,
            "glob",
            &[input.pattern.as_str()],
            &["*".to_owned()],
            Some(json!({ "path": dir.rel })),
        )?;
        let limit = limit(input.limit);
        let mut found: Vec<(SystemTime, String)> = Vec::new();
        for entry in walk(&dir.path, input.hidden).flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if !matches(&matcher, &input.pattern, under(&entry, &dir.path)) {
                continue;
            }
            let modified = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((modified, root.relative(entry.path())));
        }
        let total = found.len();
        if total == 0 {
            return Ok(Response::text(format!(
                "No files match `{}` in `{}`.",
                input.pattern, dir.rel
            ))
            .with_metadata(json!({ "count": 0, "truncated": false })));
        }
        // Newest first; equal times by path, so the order is stable.
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut text = String::new();
        for (_, path) in found.iter().take(limit) {
            text.push_str(path);
            text.push('\n');
        }
        let shown = total.min(limit);
        if shown < total {
            let _ = write!(
                text,
                "\n({} of {} matching files shown, newest first; narrow the pattern or path, or raise limit.)",
                count(shown),
                count(total)
            );
        }
        Ok(Response::text(text).with_metadata(json!({
            "count": total,
            "shown": shown,
            "truncated": shown < total,
        })))
    }
}

/// The arguments of `grep`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
#[serde(rename_all = "camelCase")]
pub struct GrepInput {
    /// The regular expression to search for (Rust regex syntax, as
    /// ripgrep's), or the literal text if `literal` is set.
    pub pattern: String,
    /// The directory to search, relative to the workspace root. Default:
    /// the root.
    pub path: Option<String>,
    /// Only search files whose names match this glob, e.g. `*.rs` or
    /// `*.{ts,tsx}`.
    pub include: Option<String>,
    /// Treat `pattern` as literal text, not a regular expression.
    /// Default: false.
    #[serde(default)]
    pub literal: bool,
    /// Match case exactly. Default: true.
    pub case_sensitive: Option<bool>,
    /// The most matching lines to return, at most 2000. Default: 100.
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// Search file contents.
#[derive(Debug)]
pub struct Grep;

impl Tool for Grep {
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Search the contents of the workspace's files for a regular expression (or literal text with `literal`), giving each matching line with its path and line number, at most 100 lines unless `limit` says otherwise. `include` keeps only files whose names match a glob such as `*.rs`. Files ignored by .gitignore, hidden files and binary files are skipped. When more lines match than are shown, the result says how many.";
    type Input = GrepInput;
    type Output = NoOutput;

    fn execute(input: GrepInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let dir = search_dir(&root, input.path.as_deref())?;
        let source = if input.literal {
            regex::escape(&input.pattern)
        } else {
            input.pattern.clone()
        };
        let regex = RegexBuilder::new(&source)
            .case_insensitive(!input.case_sensitive.unwrap_or(true))
            .multi_line(true)
            .build()
            .map_err(|e| {
                ToolError::new(format!(
                    "invalid regular expression `{}`: {e}. Fix it (Rust regex syntax: no look-around or backreferences), or set literal to search for the text itself.",
                    input.pattern
                ))
            })?;
        let include = input.include.as_deref().map(include_set).transpose()?;
        ask(
            cx,
            "grep",
            &[input.pattern.as_str()],
            &["*".to_owned()],
            Some(json!({ "path": dir.rel, "include": input.include })),
        )?;
        let limit = limit(input.limit);
        let mut shown: Vec<(String, Vec<(usize, String)>)> = Vec::new();
        let mut total = 0;
        let mut files = 0;
        let mut skipped_large = 0;
        let mut buffer = vec![0; READ_WINDOW];
        let mut room = limit;
        for entry in walk(&dir.path, false).flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if let Some(include) = &include
                && !entry
                    .path()
                    .file_name()
                    .is_some_and(|n| include.is_match(n))
            {
                continue;
            }
            let Ok(searched) = search_file(entry.path(), &mut buffer, &regex, &mut room) else {
                continue;
            };
            match searched {
                Searched::TooLarge => skipped_large += 1,
                Searched::Binary => {}
                Searched::Text { matching, lines } => {
                    total += matching;
                    if matching > 0 {
                        files += 1;
                    }
                    if !lines.is_empty() {
                        shown.push((root.relative(entry.path()), lines));
                    }
                }
            }
        }
        if total == 0 {
            let mut text = format!("No lines match `{}` in `{}`.", input.pattern, dir.rel);
            if skipped_large > 0 {
                let _ = write!(
                    text,
                    " {} files over {} MiB were not searched.",
                    count(skipped_large),
                    MAX_GREP_FILE_BYTES >> 20
                );
            }
            return Ok(
                Response::text(text).with_metadata(json!({ "matches": 0, "truncated": false }))
            );
        }
        let shown_lines = total.min(limit);
        let mut text = if shown_lines < total {
            format!(
                "{} of {} matching lines shown (in {} files); narrow the pattern, path or include, or raise limit.\n",
                count(shown_lines),
                count(total),
                count(files)
            )
        } else {
            format!(
                "Found {} matching lines in {} files.\n",
                count(total),
                count(files)
            )
        };
        if skipped_large > 0 {
            let _ = writeln!(
                text,
                "{} files over {} MiB were not searched.",
                count(skipped_large),
                MAX_GREP_FILE_BYTES >> 20
            );
        }
        for (path, lines) in &shown {
            let _ = write!(text, "\n{path}:\n");
            for (number, line) in lines {
                let _ = writeln!(text, "  Line {number}: {line}");
            }
        }
        Ok(Response::text(text).with_metadata(json!({
            "matches": total,
            "files": files,
            "shown": shown_lines,
            "truncated": shown_lines < total,
            "skippedLargeFiles": skipped_large,
        })))
    }
}

/// What searching one file came to.
enum Searched {
    /// Larger than [`MAX_GREP_FILE_BYTES`]: not searched.
    TooLarge,
    /// Binary: not searched.
    Binary,
    /// How many of its lines match, and the first of them (numbered) while
    /// the call's limit had room.
    Text {
        matching: usize,
        lines: Vec<(usize, String)>,
    },
}

/// Searches the file at `path` line by line, in `buffer` (reused for every
/// file): a window at a time, more only to hold a line longer than the
/// window. A file that fits the window takes one read and no stat (each
/// filesystem call is a trip to the host); a larger one's size is checked
/// before it is searched. `room`: how many more matching lines are shown.
fn search_file(
    path: &Path,
    buffer: &mut Vec<u8>,
    regex: &Regex,
    room: &mut usize,
) -> io::Result<Searched> {
    if buffer.len() > READ_WINDOW {
        buffer.truncate(READ_WINDOW);
        buffer.shrink_to_fit();
    }
    let mut file = fs::File::open(path)?;
    let (mut filled, mut end_of_file) = fill(&mut file, buffer, 0)?;
    // The most a line can need: the whole file.
    let mut most = buffer.len();
    if !end_of_file {
        let size = file.metadata()?.len();
        if size > MAX_GREP_FILE_BYTES {
            return Ok(Searched::TooLarge);
        }
        most = usize::try_from(size).map_or(usize::MAX, |s| s + 1);
    }
    if is_binary(&buffer[..filled]) {
        return Ok(Searched::Binary);
    }
    let mut matching = 0;
    let mut lines = Vec::new();
    let mut first_line = 1;
    loop {
        let whole = match memchr::memrchr(b'\n', &buffer[..filled]) {
            _ if end_of_file => filled,
            Some(at) => at + 1,
            // One line longer than the buffer: hold more of it.
            None if buffer.len() < most => {
                let grown = (buffer.len() * 2).min(most);
                buffer.resize(grown, 0);
                (filled, end_of_file) = fill(&mut file, buffer, filled)?;
                continue;
            }
            // The file grew while it was read: its line ends here.
            None => filled,
        };
        let chunk = &buffer[..whole];
        search_lines(chunk, first_line, regex, room, &mut matching, &mut lines);
        if end_of_file {
            break;
        }
        first_line += memchr::memchr_iter(b'\n', chunk).count();
        buffer.copy_within(whole..filled, 0);
        (filled, end_of_file) = fill(&mut file, buffer, filled - whole)?;
    }
    Ok(Searched::Text { matching, lines })
}

/// Fills `buffer` from `filled` on; how far it is filled, and whether the
/// file ended. Each read asks for at most [`HOST_READ_MAX`] bytes, so one
/// that comes back short is at the end of the (regular) file.
fn fill(file: &mut fs::File, buffer: &mut [u8], mut filled: usize) -> io::Result<(usize, bool)> {
    while filled < buffer.len() {
        let want = (buffer.len() - filled).min(HOST_READ_MAX);
        let n = file.read(&mut buffer[filled..filled + want])?;
        filled += n;
        if n < want {
            return Ok((filled, true));
        }
    }
    Ok((filled, false))
}

/// Counts the lines of `chunk` (whole lines, the first numbered
/// `first_line`) that `regex` matches into `matching`, and keeps the first
/// `room` of them in `lines`.
fn search_lines(
    chunk: &[u8],
    first_line: usize,
    regex: &Regex,
    room: &mut usize,
    matching: &mut usize,
    lines: &mut Vec<(usize, String)>,
) {
    // The last line's ending is left out: `$` would match after it.
    let bytes = chunk.strip_suffix(b"\n").unwrap_or(chunk);
    let mut line_number = first_line;
    let mut counted_to = 0;
    let mut next_line_start = 0;
    for m in regex.find_iter(bytes) {
        if m.start() < next_line_start {
            continue; // another match on a line already counted
        }
        line_number += memchr::memchr_iter(b'\n', &bytes[counted_to..m.start()]).count();
        let start = memchr::memrchr(b'\n', &bytes[..m.start()]).map_or(0, |i| i + 1);
        let end = memchr::memchr(b'\n', &bytes[m.start()..]).map_or(bytes.len(), |i| m.start() + i);
        counted_to = m.start();
        next_line_start = end + 1;
        *matching += 1;
        if *room > 0 {
            *room -= 1;
            let line = String::from_utf8_lossy(&bytes[start..end]);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            lines.push((line_number, cut_line(line, MAX_MATCH_LINE_CHARS)));
        }
    }
}

/// `include`'s glob, matched against file names.
fn include_set(pattern: &str) -> Result<GlobSet, ToolError> {
    let glob = Glob::new(pattern)
        .map_err(|e| ToolError::new(format!("invalid include glob `{pattern}`: {e}")))?;
    GlobSetBuilder::new()
        .add(glob)
        .build()
        .map_err(|e| ToolError::new(format!("invalid include glob `{pattern}`: {e}")))
}

/// The arguments of `list`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct ListInput {
    /// The directory to list, relative to the workspace root. Default: the
    /// root.
    pub path: Option<String>,
    /// More globs to leave out, e.g. `*.log` or `fixtures/**`.
    #[serde(default)]
    pub ignore: Vec<String>,
}

/// Show a directory tree.
#[derive(Debug)]
pub struct List;

impl Tool for List {
    const NAME: &'static str = "list";
    const DESCRIPTION: &'static str = "Show the files under a directory of the workspace as a tree, at most 100 files. Files ignored by .gitignore, hidden files, and the usual build, dependency and cache directories (.git, node_modules, target, dist, build, __pycache__, .venv, ...) are left out, and so is whatever matches the globs in `ignore`. Prefer glob and grep when you know what you are looking for.";
    type Input = ListInput;
    type Output = NoOutput;

    fn execute(input: ListInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let dir = search_dir(&root, input.path.as_deref())?;
        let mut ignores = GlobSetBuilder::new();
        for pattern in LIST_IGNORES
            .iter()
            .copied()
            .chain(input.ignore.iter().map(String::as_str))
        {
            let glob = GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| ToolError::new(format!("invalid ignore glob `{pattern}`: {e}")))?;
            ignores.add(glob);
        }
        let ignores = ignores
            .build()
            .map_err(|e| ToolError::new(format!("invalid ignore globs: {e}")))?;
        ask(
            cx,
            "list",
            &[dir.rel.as_str()],
            &crate::root::save_for_dir(&dir.rel),
            None,
        )?;
        let base = dir.path.clone();
        let walker = WalkBuilder::new(&dir.path)
            .hidden(true)
            .require_git(false)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(move |e| {
                let rel = e.path().strip_prefix(&base).unwrap_or(e.path());
                rel.as_os_str().is_empty()
                    || !(ignores.is_match(rel)
                        || e.file_name().to_str().is_some_and(|n| ignores.is_match(n)))
            })
            .build();
        let mut files: Vec<String> = Vec::new();
        let mut total = 0;
        for entry in walker.flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            total += 1;
            if files.len() < LIST_LIMIT {
                let rel = under(&entry, &dir.path);
                files.push(rel.to_string_lossy().into_owned());
            }
        }
        let mut text = format!("{}/\n", if dir.rel == "." { "." } else { &dir.rel });
        tree(&files, &mut text);
        if total > files.len() {
            let _ = write!(
                text,
                "\n({} of {} files shown; list a subdirectory, or use glob.)",
                count(files.len()),
                count(total)
            );
        } else if total == 0 {
            text.push_str("  (no files)\n");
        }
        Ok(Response::text(text).with_metadata(json!({
            "count": total,
            "shown": files.len(),
            "truncated": total > files.len(),
        })))
    }
}

/// `files` (sorted, `/`-separated) as an indented tree: each directory
/// once, with a trailing `/`.
fn tree(files: &[String], out: &mut String) {
    let mut open: Vec<&str> = Vec::new();
    for file in files {
        let parts: Vec<&str> = file.split('/').collect();
        let (name, dirs) = parts.split_last().expect("split gives one part at least");
        let common = open.iter().zip(dirs).take_while(|(a, b)| a == b).count();
        open.truncate(common);
        for dir in &dirs[common..] {
            let _ = writeln!(out, "{}{dir}/", "  ".repeat(open.len() + 1));
            open.push(dir);
        }
        let _ = writeln!(out, "{}{name}", "  ".repeat(open.len() + 1));
    }
}
