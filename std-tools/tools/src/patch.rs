//! `apply_patch {patch}`: the `*** Begin Patch` format (add, update with
//! hunks, delete, move), applied to every file or to none.

use std::collections::BTreeSet;
use std::fs;

use toolhost_sdk::prelude::*;

use crate::root::{Root, Target, ask, create_parents, fs_error, save_for_file, temp_beside};
use crate::text::{TextFile, count};

/// The arguments of `apply_patch`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct ApplyPatchInput {
    /// The patch, from `*** Begin Patch` to `*** End Patch`.
    pub patch: String,
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
Paths are relative to the workspace root. Give about three lines of context around each change. Every file changes or none does: if a hunk does not match, nothing is written. CRLF line endings and byte-order marks are kept. Asks for `edit` permission (all the files at once) first.";
    type Input = ApplyPatchInput;
    type Output = NoOutput;

    fn execute(input: ApplyPatchInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let ops = parse(&input.patch)?;
        let changes = plan(&root, ops)?;
        let mut resources = BTreeSet::new();
        for change in &changes {
            resources.insert(change.target.rel.clone());
            if let Some(to) = &change.move_to {
                resources.insert(to.rel.clone());
            }
        }
        let resources: Vec<String> = resources.into_iter().collect();
        let save: BTreeSet<String> = resources.iter().flat_map(|r| save_for_file(r)).collect();
        let save: Vec<String> = save.into_iter().collect();
        let asked: Vec<&str> = resources.iter().map(String::as_str).collect();
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
            let line = match (&change.after, &change.move_to) {
                (None, _) => format!("D {}", change.target.rel),
                (Some(_), Some(to)) => format!("R {} -> {}", change.target.rel, to.rel),
                (Some(_), None) if change.before.is_none() => format!("A {}", change.target.rel),
                (Some(_), None) => format!("M {}", change.target.rel),
            };
            summary.push_str(&line);
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

/// One `@@` hunk of an update.
#[derive(Debug, Default)]
struct Chunk {
    /// The text after `@@`: a line just above the change.
    anchor: Option<String>,
    old: Vec<String>,
    new: Vec<String>,
    /// `*** End of File`: the change is at the end of the file.
    at_end: bool,
}

fn bad(message: String) -> ToolError {
    ToolError::new(format!(
        "{message}. The patch format is `*** Begin Patch`, then `*** Add File: PATH` (lines starting with `+`), `*** Update File: PATH` (optionally `*** Move to: PATH`, then `@@` hunks of ` `, `-` and `+` lines) or `*** Delete File: PATH`, then `*** End Patch`."
    ))
}

/// Parses a patch into its operations.
fn parse(patch: &str) -> Result<Vec<Op>, ToolError> {
    let patch = patch.replace("\r\n", "\n");
    let mut lines: Vec<&str> = patch.trim().split('\n').collect();
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
        i += 1;
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            let mut content = Vec::new();
            while i < lines.len() && !lines[i].starts_with("*** ") {
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
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            ops.push(Op::Delete {
                path: path.trim().to_owned(),
            });
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            let mut move_to = None;
            if let Some(to) = lines.get(i).and_then(|l| l.strip_prefix("*** Move to: ")) {
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
                match line.chars().next() {
                    Some('+') => chunk.new.push(line[1..].to_owned()),
                    Some('-') => chunk.old.push(line[1..].to_owned()),
                    Some(' ') => {
                        chunk.old.push(line[1..].to_owned());
                        chunk.new.push(line[1..].to_owned());
                    }
                    // A blank context line whose space was dropped.
                    None => {
                        chunk.old.push(String::new());
                        chunk.new.push(String::new());
                    }
                    Some(_) => {
                        return Err(bad(format!(
                            "line {} of the patch, in `*** Update File: {path}`, starts with neither ` `, `-`, `+` nor `@@`: {line:?}",
                            i + 1
                        )));
                    }
                }
            }
            if chunks.iter().all(|c| c.old.is_empty() && c.new.is_empty()) && move_to.is_none() {
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

fn is_op(line: &str) -> bool {
    ["*** Add File: ", "*** Delete File: ", "*** Update File: "]
        .iter()
        .any(|p| line.starts_with(p))
}

/// One file's change, computed before anything is written.
struct Change {
    target: Target,
    /// The file's bytes before, if it existed.
    before: Option<Vec<u8>>,
    /// Its bytes after; `None` deletes it.
    after: Option<Vec<u8>>,
    /// Where the new bytes go instead of `target` (the old file is removed).
    move_to: Option<Target>,
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
    for op in ops {
        match op {
            Op::Add { path, lines } => {
                let target = file_target(root, &path)?;
                claim(&target)?;
                if target.path.exists() {
                    return Err(format!("`*** Add File: {}`: the file exists; nothing was written. Use `*** Update File:` to change it.", target.rel).into());
                }
                let mut text = lines.join("\n");
                text.push('\n');
                changes.push(Change {
                    target,
                    before: None,
                    after: Some(text.into_bytes()),
                    move_to: None,
                });
            }
            Op::Delete { path } => {
                let target = file_target(root, &path)?;
                claim(&target)?;
                let before = read(&target, "Delete")?;
                changes.push(Change {
                    target,
                    before: Some(before),
                    after: None,
                    move_to: None,
                });
            }
            Op::Update {
                path,
                move_to,
                chunks,
            } => {
                let target = file_target(root, &path)?;
                claim(&target)?;
                let before = read(&target, "Update")?;
                let Some(file) = TextFile::decode(before.clone()) else {
                    return Err(format!(
                        "`*** Update File: {}`: the file is not UTF-8 text; nothing was written.",
                        target.rel
                    )
                    .into());
                };
                let text = apply_chunks(&file.text, &chunks, &target.rel)?;
                let move_to = match move_to {
                    Some(to) => {
                        let to = file_target(root, &to)?;
                        claim(&to)?;
                        if to.path.exists() {
                            return Err(format!(
                                "`*** Move to: {}`: the file exists; nothing was written.",
                                to.rel
                            )
                            .into());
                        }
                        Some(to)
                    }
                    None => None,
                };
                changes.push(Change {
                    target,
                    after: Some(file.encode(&text)),
                    before: Some(before),
                    move_to,
                });
            }
        }
    }
    Ok(changes)
}

fn file_target(root: &Root, path: &str) -> Result<Target, ToolError> {
    let target = root.resolve(Some(path))?;
    if target.rel == "." {
        return Err("a patch path names the workspace root; give file paths".into());
    }
    Ok(target)
}

fn read(target: &Target, op: &str) -> Result<Vec<u8>, ToolError> {
    match fs::metadata(&target.path) {
        Ok(m) if m.is_file() => {
            fs::read(&target.path).map_err(|e| fs_error("read", &target.rel, &e))
        }
        Ok(_) => Err(format!(
            "`*** {op} File: {}`: it is not a regular file; nothing was written.",
            target.rel
        )
        .into()),
        Err(e) => Err(ToolError::new(format!(
            "`*** {op} File: {}`: {}; nothing was written.",
            target.rel,
            fs_error("read", &target.rel, &e).message()
        ))),
    }
}

/// `text` with `chunks` applied in order.
fn apply_chunks(text: &str, chunks: &[Chunk], rel: &str) -> Result<String, ToolError> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut lines: Vec<String> = if text.is_empty() {
        Vec::new()
    } else {
        body.split('\n').map(str::to_owned).collect()
    };
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut cursor = 0;
    for (n, chunk) in chunks.iter().enumerate() {
        if let Some(anchor) = &chunk.anchor {
            let Some(at) = (cursor..lines.len()).find(|&i| lines[i].trim() == anchor.trim()) else {
                return Err(ToolError::new(format!(
                    "hunk {} of `{rel}`: its `@@ {anchor}` line was not found; nothing was written. Read the file and copy the line exactly.",
                    n + 1
                )));
            };
            cursor = at + 1;
        }
        if chunk.old.is_empty() {
            // Pure addition: after the anchor if there is one, else at the end.
            let at = if chunk.anchor.is_some() && !chunk.at_end {
                cursor
            } else {
                lines.len()
            };
            replacements.push((at, 0, chunk.new.clone()));
            continue;
        }
        let Some(at) = seek(&lines, &chunk.old, cursor, chunk.at_end) else {
            return Err(ToolError::new(format!(
                "hunk {} of `{rel}` does not match the file; nothing was written. These lines were not found{}:\n{}\nRead the file and make the context and `-` lines match it exactly.",
                n + 1,
                if cursor > 0 {
                    format!(" after line {cursor}")
                } else {
                    String::new()
                },
                chunk.old.join("\n")
            )));
        };
        replacements.push((at, chunk.old.len(), chunk.new.clone()));
        cursor = at + chunk.old.len();
    }
    for (at, len, new) in replacements.into_iter().rev() {
        lines.splice(at..at + len, new);
    }
    let mut out = lines.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// Where `old` starts in `lines` at or after `from`: exactly, else with
/// trailing whitespace ignored, else with both ends of each line trimmed.
/// `at_end` looks for it at the end of the file first.
fn seek(lines: &[String], old: &[String], from: usize, at_end: bool) -> Option<usize> {
    if old.len() > lines.len() {
        return None;
    }
    let compare: [fn(&str, &str) -> bool; 3] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
    ];
    for equal in compare {
        let matches_at = |i: usize| {
            lines[i..i + old.len()]
                .iter()
                .zip(old)
                .all(|(a, b)| equal(a, b))
        };
        let last = lines.len() - old.len();
        if at_end && last >= from && matches_at(last) {
            return Some(last);
        }
        if let Some(i) = (from..=last).find(|&i| matches_at(i)) {
            return Some(i);
        }
    }
    None
}

/// Writes every change: first each new file's bytes to a temporary file
/// beside it, then renames them into place and removes what the patch
/// deletes. A failure before the renames leaves every file untouched; one
/// during them puts back what was already changed.
fn commit(changes: &[Change]) -> Result<(), ToolError> {
    let mut staged: Vec<Option<std::path::PathBuf>> = Vec::new();
    for change in changes {
        let Some(after) = &change.after else {
            staged.push(None);
            continue;
        };
        let dest = change.move_to.as_ref().unwrap_or(&change.target);
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
    for (done, (change, temp)) in changes.iter().zip(&staged).enumerate() {
        let dest = change.move_to.as_ref().unwrap_or(&change.target);
        let result = match temp {
            Some(temp) => fs::rename(temp, &dest.path).and_then(|()| {
                if change.move_to.is_some() {
                    fs::remove_file(&change.target.path)
                } else {
                    Ok(())
                }
            }),
            None => fs::remove_file(&change.target.path),
        };
        if let Err(e) = result {
            undo(&changes[..done]);
            for temp in staged[done..].iter().flatten() {
                let _ = fs::remove_file(temp);
            }
            return Err(ToolError::new(format!(
                "{} The {} changes made before it were undone.",
                fs_error("change", &dest.rel, &e).message(),
                count(done)
            )));
        }
    }
    Ok(())
}

/// Puts back the files of `changes`, already applied.
fn undo(changes: &[Change]) {
    for change in changes.iter().rev() {
        if let Some(to) = &change.move_to {
            let _ = fs::remove_file(&to.path);
        }
        match &change.before {
            Some(before) => {
                let _ = fs::write(&change.target.path, before);
            }
            None => {
                let _ = fs::remove_file(&change.target.path);
            }
        }
    }
}
