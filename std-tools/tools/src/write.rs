//! `write {filePath, content}`: create or replace a file, atomically.

use std::fs;

use toolhost_sdk::prelude::*;

use crate::root::{Root, ask, create_parents, fs_error, not_regular, save_for_file, write_atomic};
use crate::text::{count, normalize, style, styled};

/// The arguments of `write`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
#[schemars(transform = crate::alias::file_path)]
pub struct WriteInput {
    /// The file to write, relative to the workspace root (or absolute
    /// under it); missing parent directories are created.
    #[serde(rename = "filePath", alias = "path")]
    pub file_path: String,
    /// The complete new contents of the file.
    pub content: String,
}

/// Create or replace a file.
#[derive(Debug)]
pub struct Write;

impl Tool for Write {
    const NAME: &'static str = "write";
    const DESCRIPTION: &'static str = "Create a file in the workspace, or replace an existing file's contents, with `content`. Missing parent directories are created. The file is replaced atomically. An existing file whose lines mostly end in CRLF, or that begins with a byte-order mark, keeps them. Prefer `edit` to change part of a file. Asks for `edit` permission first.";
    type Input = WriteInput;
    type Output = NoOutput;

    fn execute(input: WriteInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let target = root.resolve(Some(&input.file_path))?;
        if target.rel == "." {
            return Err("the path names the workspace root; give a file path".into());
        }
        // An existing text file's mark and line endings are its own.
        let existing = match fs::metadata(&target.path) {
            Ok(m) if m.is_dir() => {
                return Err(format!("`{}` is a directory; give a file path.", target.rel).into());
            }
            Ok(m) if !m.is_file() => return Err(not_regular(&target.rel, "write replaces")),
            Ok(_) => Some(
                fs::File::open(&target.path)
                    .and_then(style)
                    .map_err(|e| fs_error("read", &target.rel, &e))?,
            ),
            Err(_) => None,
        };
        ask(
            cx,
            "edit",
            &[target.rel.as_str()],
            &save_for_file(&target.rel),
            Some(
                json!({ "tool": "write", "bytes": input.content.len(), "exists": existing.is_some() }),
            ),
        )?;
        // Content written with `\n` keeps a CRLF file CRLF. New files and
        // binary files being replaced get the content exactly as given.
        let bytes = match existing.flatten() {
            Some(style) if (style.eol != "\n" || style.bom) && !input.content.contains("\r\n") => {
                styled(&normalize(&input.content), style)
            }
            _ => input.content.clone().into_bytes(),
        };
        create_parents(&target)?;
        write_atomic(&target.path, &bytes).map_err(|e| fs_error("write", &target.rel, &e))?;
        let verb = if existing.is_some() {
            "Replaced"
        } else {
            "Created"
        };
        Ok(Response::text(format!(
            "{verb} `{}` ({} bytes).",
            target.rel,
            count(bytes.len())
        ))
        .with_metadata(json!({
            "path": target.rel,
            "bytes": bytes.len(),
            "created": existing.is_none(),
        })))
    }
}
