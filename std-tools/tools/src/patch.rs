//! `apply_patch {patchText}`: the `*** Begin Patch` format (add, update
//! with hunks, delete, move), applied to every file or to none.

use std::collections::{BTreeSet, VecDeque};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use toolhost_sdk::prelude::*;

use crate::root::{
    Root, Target, ask, create_parents, fs_error, not_regular, read_to_change, save_for_file,
    temp_beside,
};
use crate::text::{TextFile, count};

/// The most file contents one patch holds at once, before and after, all
/// its files together: three files at the edit limit, well inside a call's
/// default 256 MiB of memory.
pub const MAX_PATCH_BYTES: u64 = 96 << 20;

/// The arguments of `apply_patch`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
#[schemars(transform = crate::alias::patch_text)]
pub struct ApplyPatchInput {
    /// The patch, from `*** Begin Patch` to `*** End Patch`.
    #[serde(rename = "patchText", alias = "patch")]
    pub patch_text: String,
}

/// Apply a multi-file patch.
#[derive(Debug)]
pub struct ApplyPatch;

impl Tool for ApplyPatch {
    const NAME: &'static str = "apply_patch";
    const DESCRIPTION: &'static str = "Change files of the workspace with a patch:\n\
*** Begin Patch\n\
*** Add File: path/new.txt\n\
+each line of the new file\n\
*** Update File: path/old.txt\n\
*** Move to: path/renamed.txt   (optional)\n\
@@ a line just above the change (optional)\n \
unchanged context line\n\
-removed line\n\
+added line\n\
*** Delete File: path/gone.txt\n\
*** End Patch\n\
Paths are relative to the workspace root. Give about three lines of context around each change. Every file changes or none does: if a hunk does not match, nothing is written. A move onto an existing file replaces it. Line endings and byte-order marks are kept. Asks for `edit` permission (all the files at once) first.";
    type Input = ApplyPatchInput;
    type Output = NoOutput;

    fn execute(input: ApplyPatchInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let ops = parse(&input.patch_text)?;
        let changes = plan(&root, ops)?;
        let resources: BTreeSet<&str> = changes.iter().flat_map(Change::paths).collect();
        let save: BTreeSet<String> = resources.iter().flat_map(|r| save_for_file(r)).collect();
        let save: Vec<String> = save.into_iter().collect();
        let asked: Vec<&str> = resources.iter().copied().collect();
        ask(
            cx,
            "edit",
            &asked,
            &save,
            Some(json!({ "tool": "apply_patch", "files": resources.len() })),
        )?;
        commit(&changes)?;
        let mut summary = format!("Applied the patch to {} files:\n", count(changes.len()));
        for change in &changes {
            summary.push_str(&change.summary());
            summary.push('\n');
        }
        Ok(Response::text(summary).with_metadata(json!({ "files": resources })))
    }
}

/// One file operation of a patch, as written.
#[derive(Debug)]
enum Op {
    Add {
        path: String,
        lines: Vec<String>,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

/// One line of a hunk.
#[derive(Debug)]
enum Step {
    /// ` `: a line the file has, kept as it is.
    Keep(String),
    /// `-`: a line the file has, removed.
    Remove(String),
    /// `+`: a line added.
    Add(String),
}

/// One `@@` hunk of an update.
#[derive(Debug, Default)]
struct Chunk {
    /// The text after `@@`: a line just above the change.
    anchor: Option<String>,
    steps: Vec<Step>,
    /// `*** End of File`: the change is at the end of the file.
    at_end: bool,
}

impl Chunk {
    /// The lines the hunk expects in the file, in order.
    fn old(&self) -> impl Iterator<Item = &str> {
        self.steps.iter().filter_map(|step| match step {
            Step::Keep(line) | Step::Remove(line) => Some(line.as_str()),
            Step::Add(_) => None,
        })
    }

    /// The lines the hunk adds, in order.
    fn added(&self) -> impl Iterator<Item = &str> {
        self.steps.iter().filter_map(|step| match step {
            Step::Add(line) => Some(line.as_str()),
            Step::Keep(_) | Step::Remove(_) => None,
        })
    }
}

fn bad(message: String) -> ToolError {
    ToolError::new(format!(
        "{message}. The patch format is `*** Begin Patch`, then `*** Add File: PATH` (lines starting with `+`), `*** Update File: PATH` (optionally `*** Move to: PATH`, then `@@` hunks of ` `, `-` and `+` lines) or `*** Delete File: PATH`, then `*** End Patch`."
    ))
}

/// Parses a patch into its operations. As Codex and opencode do, it takes
/// a patch wrapped in a shell heredoc, and file headers indented (except
/// inside an update's hunks, where an indented line is context).
fn parse(patch: &str) -> Result<Vec<Op>, ToolError> {
    let patch = patch.replace("\r\n", "\n");
    let mut lines: Vec<&str> = strip_heredoc(patch.trim()).trim().split('\n').collect();
    if lines.first().map(|l| l.trim()) != Some("*** Begin Patch") {
        return Err(bad("the patch does not start with `*** Begin Patch`".into()));
    }
    if lines.last().map(|l| l.trim()) != Some("*** End Patch") {
        return Err(bad("the patch does not end with `*** End Patch`".into()));
    }
    lines.remove(0);
    lines.pop();
    let mut ops = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let header = line.trim_start();
        i += 1;
        if let Some(path) = header.strip_prefix("*** Add File: ") {
            let mut content = Vec::new();
            while i < lines.len() && !lines[i].trim_start().starts_with("*** ") {
                let Some(text) = lines[i].strip_prefix('+') else {
                    return Err(bad(format!(
                        "line {} of the patch, in `*** Add File: {path}`, does not start with `+`",
                        i + 2
                    )));
                };
                content.push(text.to_owned());
                i += 1;
            }
            ops.push(Op::Add {
                path: path.trim().to_owned(),
                lines: content,
            });
        } else if let Some(path) = header.strip_prefix("*** Delete File: ") {
            ops.push(Op::Delete {
                path: path.trim().to_owned(),
            });
        } else if let Some(path) = header.strip_prefix("*** Update File: ") {
            let mut move_to = None;
            if let Some(to) = lines
                .get(i)
                .and_then(|l| l.trim_start().strip_prefix("*** Move to: "))
            {
                move_to = Some(to.trim().to_owned());
                i += 1;
            }
            let mut chunks: Vec<Chunk> = Vec::new();
            while i < lines.len() && !is_op(lines[i]) {
                let line = lines[i];
                i += 1;
                if line.trim() == "*** End of File" {
                    if chunks.is_empty() {
                        chunks.push(Chunk::default());
                    }
                    chunks.last_mut().expect("pushed above").at_end = true;
                    continue;
                }
                if let Some(anchor) = line.strip_prefix("@@") {
                    let anchor = anchor.trim();
                    chunks.push(Chunk {
                        anchor: (!anchor.is_empty()).then(|| anchor.to_owned()),
                        ..Chunk::default()
                    });
                    continue;
                }
                if chunks.is_empty() {
                    chunks.push(Chunk::default());
                }
                let chunk = chunks.last_mut().expect("pushed above");
                let step = match line.chars().next() {
                    Some('+') => Step::Add(line[1..].to_owned()),
                    Some('-') => Step::Remove(line[1..].to_owned()),
                    Some(' ') => Step::Keep(line[1..].to_owned()),
                    // A blank context line whose space was dropped.
                    None => Step::Keep(String::new()),
                    Some(_) => {
                        return Err(bad(format!(
                            "line {} of the patch, in `*** Update File: {path}`, starts with neither ` `, `-`, `+` nor `@@`: {line:?}",
                            i + 1
                        )));
                    }
                };
                chunk.steps.push(step);
            }
            if chunks.iter().all(|c| c.steps.is_empty()) && move_to.is_none() {
                return Err(bad(format!("`*** Update File: {path}` has no hunks")));
            }
            ops.push(Op::Update {
                path: path.trim().to_owned(),
                move_to,
                chunks,
            });
        } else if line.trim().is_empty() {
            continue;
        } else {
            return Err(bad(format!(
                "line {} of the patch is not a file operation: {line:?}",
                i + 1
            )));
        }
    }
    if ops.is_empty() {
        return Err(bad("the patch changes no file".into()));
    }
    Ok(ops)
}

/// The body of a patch wrapped in a shell heredoc, as models write one for
/// a shell (`cat <<'EOF'`, `apply_patch <<"EOF"`, `<<EOF`, then the patch,
/// then `EOF`); any other text as it is.
fn strip_heredoc(patch: &str) -> &str {
    let Some((first, rest)) = patch.split_once('\n') else {
        return patch;
    };
    let Some((command, marker)) = first.split_once("<<") else {
        return patch;
    };
    if !matches!(command.trim(), "" | "cat" | "apply_patch" | "applypatch") {
        return patch;
    }
    let marker = marker.trim().trim_start_matches('-');
    let word = ['\'', '"']
        .iter()
        .find_map(|q| marker.strip_prefix(*q)?.strip_suffix(*q))
        .unwrap_or(marker);
    if word.is_empty() || !word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return patch;
    }
    match rest.rsplit_once('\n') {
        Some((body, last)) if last.trim() == word => body,
        _ => patch,
    }
}

/// Whether `line` starts a file operation (not indented: inside a hunk an
/// indented line is context).
fn is_op(line: &str) -> bool {
    ["*** Add File: ", "*** Delete File: ", "*** Update File: "]
        .iter()
        .any(|p| line.starts_with(p))
}

/// One file's change, computed before anything is written.
enum Change {
    Add {
        target: Target,
        after: Vec<u8>,
    },
    Update {
        target: Target,
        before: Vec<u8>,
        after: Vec<u8>,
    },
    /// The new contents go to `to` (replacing what it held, if anything);
    /// `from` is removed (the link itself, when it is one).
    Move {
        from: Target,
        to: Target,
        after: Vec<u8>,
        replaced: Option<Vec<u8>>,
    },
    /// The file is removed (the link itself, when it is one).
    Delete {
        target: Target,
    },
}

impl Change {
    /// The paths it changes, relative to the root.
    fn paths(&self) -> Vec<&str> {
        match self {
            Change::Add { target, .. }
            | Change::Update { target, .. }
            | Change::Delete { target } => vec![&target.rel],
            Change::Move { from, to, .. } => vec![&from.rel, &to.rel],
        }
    }

    /// Its line in the result.
    fn summary(&self) -> String {
        match self {
            Change::Add { target, .. } => format!("A {}", target.rel),
            Change::Update { target, .. } => format!("M {}", target.rel),
            Change::Move { from, to, .. } => format!("R {} -> {}", from.rel, to.rel),
            Change::Delete { target } => format!("D {}", target.rel),
        }
    }

    /// Where its new contents go, and what they are.
    fn written(&self) -> Option<(&Target, &[u8])> {
        match self {
            Change::Add { target, after } | Change::Update { target, after, .. } => {
                Some((target, after))
            }
            Change::Move { to, after, .. } => Some((to, after)),
            Change::Delete { .. } => None,
        }
    }

    /// The bytes of file contents it holds.
    fn held(&self) -> usize {
        match self {
            Change::Add { after, .. } => after.len(),
            Change::Update { before, after, .. } => before.len() + after.len(),
            Change::Move {
                after, replaced, ..
            } => after.len() + replaced.as_ref().map_or(0, Vec::len),
            Change::Delete { .. } => 0,
        }
    }
}

/// `message` about the operation `op` on `rel`.
fn in_op(op: &str, rel: &str, message: &ToolError) -> ToolError {
    ToolError::new(format!(
        "`*** {op}: {rel}`: {} Nothing was written.",
        message.message()
    ))
}

/// Resolves every path and computes every file's new contents; fails,
/// writing nothing, if any operation cannot apply.
fn plan(root: &Root, ops: Vec<Op>) -> Result<Vec<Change>, ToolError> {
    let mut seen = BTreeSet::new();
    let mut claim = |target: &Target| -> Result<(), ToolError> {
        if seen.insert(target.rel.clone()) {
            Ok(())
        } else {
            Err(ToolError::new(format!(
                "the patch changes `{}` twice; nothing was written. Give each file one operation.",
                target.rel
            )))
        }
    };
    let mut changes = Vec::new();
    let mut held = 0;
    for op in ops {
        let change = match op {
            Op::Add { path, lines } => {
                let target = file_target(root, &path, false)?;
                claim(&target)?;
                if target.path.exists() {
                    return Err(format!("`*** Add File: {}`: the file exists; nothing was written. Use `*** Update File:` to change it.", target.rel).into());
                }
                let mut text = lines.join("\n");
                text.push('\n');
                Change::Add {
                    target,
                    after: text.into_bytes(),
                }
            }
            Op::Delete { path } => {
                let target = file_target(root, &path, true)?;
                claim(&target)?;
                match fs::symlink_metadata(&target.path) {
                    Ok(m) if m.is_file() || m.is_symlink() => {}
                    Ok(m) if m.is_dir() => {
                        return Err(format!(
                            "`*** Delete File: {}`: it is a directory; apply_patch deletes files only. Nothing was written.",
                            target.rel
                        )
                        .into());
                    }
                    Ok(_) => {
                        let refusal = not_regular(&target.rel, "apply_patch deletes");
                        return Err(in_op("Delete File", &target.rel, &refusal));
                    }
                    Err(e) => {
                        let error = fs_error("delete", &target.rel, &e);
                        return Err(in_op("Delete File", &target.rel, &error));
                    }
                }
                Change::Delete { target }
            }
            Op::Update {
                path,
                move_to,
                chunks,
            } => {
                let source = file_target(root, &path, false)?;
                // A move removes the path itself (a link, not its target).
                let from = match move_to {
                    Some(_) => file_target(root, &path, true)?,
                    None => source.clone(),
                };
                claim(&from)?;
                let bytes = read_to_change(&source, "apply_patch")
                    .map_err(|e| in_op("Update File", &source.rel, &e))?;
                let Some(file) = TextFile::decode(bytes) else {
                    return Err(format!(
                        "`*** Update File: {}`: the file is not UTF-8 text; nothing was written.",
                        source.rel
                    )
                    .into());
                };
                let after = file.encode(&apply_chunks(&file, &chunks, &source.rel)?);
                match move_to {
                    None => Change::Update {
                        target: source,
                        before: file.encode(&file.text),
                        after,
                    },
                    Some(to) => {
                        let to = file_target(root, &to, false)?;
                        claim(&to)?;
                        let replaced = match fs::symlink_metadata(&to.path) {
                            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                            _ => Some(
                                read_to_change(&to, "apply_patch")
                                    .map_err(|e| in_op("Move to", &to.rel, &e))?,
                            ),
                        };
                        Change::Move {
                            from,
                            to,
                            after,
                            replaced,
                        }
                    }
                }
            }
        };
        held += change.held();
        if held as u64 > MAX_PATCH_BYTES {
            return Err(format!(
                "the patch holds more than {} MiB of file contents (before and after, all its files together); nothing was written. Split it into smaller patches.",
                MAX_PATCH_BYTES >> 20
            )
            .into());
        }
        changes.push(change);
    }
    Ok(changes)
}

/// `path` resolved inside the root, through symbolic links; with `entry`,
/// not through a link it ends with (what a delete or a move removes).
fn file_target(root: &Root, path: &str, entry: bool) -> Result<Target, ToolError> {
    let target = if entry {
        root.resolve_entry(path)?
    } else {
        root.resolve(Some(path))?
    };
    if target.rel == "." {
        return Err("a patch path names the workspace root; give file paths".into());
    }
    Ok(target)
}

/// A line of a file: where it starts, its text, and its ending as in the
/// file (`\n`, `\r\n`, or none at the end).
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    start: usize,
    text: &'a str,
    end: &'a str,
}

impl Line<'_> {
    /// Where the line after it starts.
    fn next(&self) -> usize {
        self.start + self.text.len() + self.end.len()
    }
}

/// The lines of `text` from byte `at`, the start of one.
fn lines_from(text: &str, mut at: usize) -> impl Iterator<Item = Line<'_>> {
    std::iter::from_fn(move || {
        let rest = text.get(at..).filter(|r| !r.is_empty())?;
        let (len, end) = match memchr::memchr(b'\n', rest.as_bytes()) {
            Some(i) if rest[..i].ends_with('\r') => (i - 1, "\r\n"),
            Some(i) => (i, "\n"),
            None => (rest.len(), ""),
        };
        let line = Line {
            start: at,
            text: &rest[..len],
            end,
        };
        at = line.next();
        Some(line)
    })
}

/// `file` with `chunks` applied in order. Lines a hunk keeps or leaves
/// alone keep their own endings; a line it adds takes the ending of the
/// line it replaces, or else the file's common one.
fn apply_chunks(file: &TextFile, chunks: &[Chunk], rel: &str) -> Result<String, ToolError> {
    let text = file.text.as_str();
    let eol = file.eol;
    let mut out = String::with_capacity(text.len());
    // The text before `at` (`line` lines) is done.
    let mut at = 0;
    let mut line = 0;
    // Lines added at the end of the file, after everything else.
    let mut appended: Vec<&str> = Vec::new();
    for (n, chunk) in chunks.iter().enumerate() {
        let (mut from, mut from_line) = (at, line);
        if let Some(anchor) = &chunk.anchor {
            let found = lines_from(text, at)
                .enumerate()
                .find(|(_, l)| l.text.trim() == anchor.trim());
            let Some((i, l)) = found else {
                return Err(ToolError::new(format!(
                    "hunk {} of `{rel}`: its `@@ {anchor}` line was not found; nothing was written. Read the file and copy the line exactly.",
                    n + 1
                )));
            };
            (from, from_line) = (l.next(), line + i + 1);
        }
        let old: Vec<&str> = chunk.old().collect();
        if old.is_empty() {
            // Pure addition: after the anchor if there is one, else at the end.
            if chunk.anchor.is_some() && !chunk.at_end {
                out.push_str(&text[at..from]);
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push_str(eol);
                }
                for added in chunk.added() {
                    out.push_str(added);
                    out.push_str(eol);
                }
                (at, line) = (from, from_line);
            } else {
                appended.extend(chunk.added());
            }
            continue;
        }
        let Some((start, start_line)) = seek(text, &old, from, from_line, chunk.at_end) else {
            return Err(ToolError::new(format!(
                "hunk {} of `{rel}` does not match the file; nothing was written. These lines were not found{}:\n{}\nRead the file and make the context and `-` lines match it exactly.",
                n + 1,
                if from_line > 0 {
                    format!(" after line {from_line}")
                } else {
                    String::new()
                },
                old.join("\n")
            )));
        };
        out.push_str(&text[at..start]);
        let mut matched = lines_from(text, start);
        at = start;
        // The endings of the lines removed since the last kept one go, in
        // order, to the lines added in their place.
        let mut freed = VecDeque::new();
        for step in &chunk.steps {
            match step {
                Step::Keep(_) => {
                    let kept = matched.next().expect("seek found every line");
                    out.push_str(kept.text);
                    out.push_str(if kept.end.is_empty() { eol } else { kept.end });
                    at = kept.next();
                    freed.clear();
                }
                Step::Remove(_) => {
                    let removed = matched.next().expect("seek found every line");
                    freed.push_back(removed.end);
                    at = removed.next();
                }
                Step::Add(added) => {
                    out.push_str(added);
                    out.push_str(freed.pop_front().filter(|e| !e.is_empty()).unwrap_or(eol));
                }
            }
        }
        line = start_line + old.len();
    }
    out.push_str(&text[at..]);
    // Every line ends, the last one too.
    if !out.is_empty() && !out.ends_with('\n') {
        out.push_str(eol);
    }
    for added in appended {
        out.push_str(added);
        out.push_str(eol);
    }
    Ok(out)
}

/// Where `old` starts in `text` at or after byte `from` (the start of line
/// `from_line`), as a byte and a line: exactly, else with trailing
/// whitespace ignored, else with both ends of each line trimmed. `at_end`
/// looks for it at the end of the file first.
fn seek(
    text: &str,
    old: &[&str],
    from: usize,
    from_line: usize,
    at_end: bool,
) -> Option<(usize, usize)> {
    let compare: [fn(&str, &str) -> bool; 3] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
    ];
    let tail = at_end
        .then(|| last_lines(text, old.len()))
        .flatten()
        .filter(|&(_, line)| line >= from_line);
    for equal in compare {
        let matches_at = |start: usize| {
            let mut lines = lines_from(text, start);
            old.iter()
                .all(|o| lines.next().is_some_and(|l| equal(l.text, o)))
        };
        if let Some((start, line)) = tail
            && matches_at(start)
        {
            return Some((start, line));
        }
        if let Some((i, l)) = lines_from(text, from)
            .enumerate()
            .find(|(_, l)| matches_at(l.start))
        {
            return Some((l.start, from_line + i));
        }
    }
    None
}

/// Where the last `k` (at least one) lines of `text` start, as a byte and
/// a line.
fn last_lines(text: &str, k: usize) -> Option<(usize, usize)> {
    let body = text.strip_suffix('\n').unwrap_or(text).as_bytes();
    let total = if text.is_empty() {
        0
    } else {
        memchr::memchr_iter(b'\n', body).count() + 1
    };
    if k > total {
        return None;
    }
    if k == total {
        return Some((0, 0));
    }
    let separator = memchr::memrchr_iter(b'\n', body).nth(k - 1)?;
    Some((separator + 1, total - k))
}

/// What puts back one step of a commit.
enum Undo<'a> {
    /// Remove a file the patch created.
    Remove(&'a Path),
    /// Write back what a file held.
    Write(&'a Path, &'a [u8]),
    /// Rename a file set aside back to its place.
    Rename { aside: PathBuf, to: &'a Path },
}

impl Undo<'_> {
    fn run(&self) {
        // Best effort: the error that stopped the commit is the one shown.
        let _ = match self {
            Undo::Remove(path) => fs::remove_file(path),
            Undo::Write(path, bytes) => fs::write(path, bytes),
            Undo::Rename { aside, to } => fs::rename(aside, to),
        };
    }
}

/// Writes every change: first each new file's bytes to a temporary file
/// beside it, then renames them into place, and sets aside what the patch
/// deletes or moves away (renamed to a hidden name, the link itself for a
/// link), removed once every change is made. A failure before the renames
/// leaves every file untouched; one during them puts back what was
/// already changed.
fn commit(changes: &[Change]) -> Result<(), ToolError> {
    let mut staged: Vec<Option<PathBuf>> = Vec::new();
    for change in changes {
        let Some((dest, after)) = change.written() else {
            staged.push(None);
            continue;
        };
        let staging = (|| {
            create_parents(dest)?;
            let temp = temp_beside(&dest.path);
            fs::write(&temp, after)
                .and_then(|()| fs::File::open(&temp)?.sync_all())
                .map_err(|e| {
                    let _ = fs::remove_file(&temp);
                    fs_error("write", &dest.rel, &e)
                })?;
            Ok::<_, ToolError>(temp)
        })();
        match staging {
            Ok(temp) => staged.push(Some(temp)),
            Err(e) => {
                for temp in staged.into_iter().flatten() {
                    let _ = fs::remove_file(temp);
                }
                return Err(ToolError::new(format!(
                    "{} Nothing was changed.",
                    e.message()
                )));
            }
        }
    }
    let mut undo: Vec<Undo> = Vec::new();
    for (done, (change, temp)) in changes.iter().zip(&staged).enumerate() {
        if let Err((rel, e)) = apply(change, temp.as_deref(), &mut undo) {
            for step in undo.iter().rev() {
                step.run();
            }
            for temp in staged[done..].iter().flatten() {
                let _ = fs::remove_file(temp);
            }
            return Err(ToolError::new(format!(
                "{} The {} changes made before it were undone.",
                fs_error("change", rel, &e).message(),
                count(done)
            )));
        }
    }
    // Every change is made: what was set aside goes. One left behind (it
    // could not be removed) is a hidden file beside where it was.
    for step in undo {
        if let Undo::Rename { aside, .. } = step {
            let _ = fs::remove_file(aside);
        }
    }
    Ok(())
}

/// Makes one change, its new contents staged at `temp`, recording in
/// `undo` how to put back each step made; on failure, the path it failed
/// on and why.
fn apply<'a>(
    change: &'a Change,
    temp: Option<&Path>,
    undo: &mut Vec<Undo<'a>>,
) -> Result<(), (&'a str, io::Error)> {
    let place = |temp: Option<&Path>, target: &'a Target| {
        let temp = temp.expect("a change that writes was staged");
        fs::rename(temp, &target.path).map_err(|e| (target.rel.as_str(), e))
    };
    let set_aside = |target: &'a Target| {
        let aside = temp_beside(&target.path);
        fs::rename(&target.path, &aside).map_err(|e| (target.rel.as_str(), e))?;
        Ok(Undo::Rename {
            aside,
            to: &target.path,
        })
    };
    match change {
        Change::Add { target, .. } => {
            place(temp, target)?;
            undo.push(Undo::Remove(&target.path));
        }
        Change::Update { target, before, .. } => {
            place(temp, target)?;
            undo.push(Undo::Write(&target.path, before));
        }
        Change::Move {
            from, to, replaced, ..
        } => {
            place(temp, to)?;
            undo.push(match replaced {
                Some(before) => Undo::Write(&to.path, before),
                None => Undo::Remove(&to.path),
            });
            undo.push(set_aside(from)?);
        }
        Change::Delete { target } => undo.push(set_aside(target)?),
    }
    Ok(())
}
