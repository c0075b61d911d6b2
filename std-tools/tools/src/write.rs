//! `write {path, content}`: create or replace a file, atomically.

use std::fs;

use toolhost_sdk::prelude::*;

use crate::root::{Root, ask, create_parents, fs_error, save_for_file, write_atomic};
use crate::text::{TextFile, count, normalize};

/// The arguments of `write`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct WriteInput {
    /// The file to write, relative to the workspace root; missing parent
    /// directories are created.
    pub path: String,
    /// The complete new contents of the file.
    pub content: String,
}

/// Create or replace a file.
#[derive(Debug)]
pub struct Write;

impl Tool for Write {
    const NAME: &'static str = "write";
    const DESCRIPTION: &'static str = "Create a file in the workspace, or replace an existing file's contents, with `content`. Missing parent directories are created. The file is replaced atomically. An existing file that uses CRLF line endings or a byte-order mark keeps them. Prefer `edit` to change part of a file. Asks for `edit` permission first.";
    type Input = WriteInput;
    type Output = NoOutput;

    fn execute(input: WriteInput, cx: &Context) -> ToolResult<NoOutput> {
        let root = Root::of(cx)?;
        let target = root.resolve(Some(&input.path))?;
        if target.rel == "." {
            return Err("the path names the workspace root; give a file path".into());
        }
        let existing = match fs::metadata(&target.path) {
            Ok(m) if m.is_dir() => {
                return Err(format!("`{}` is a directory; give a file path.", target.rel).into());
            }
            Ok(_) => Some(fs::read(&target.path).map_err(|e| fs_error("read", &target.rel, &e))?),
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
        // An existing text file's line endings and mark are its own: content
        // written with `\n` keeps a CRLF file CRLF. New files and binary
        // files being replaced get the content exactly as given.
        let bytes = match existing.as_ref().and_then(|b| TextFile::decode(b.clone())) {
            Some(file) if (file.crlf || file.bom) && !input.content.contains("\r\n") => {
                file.encode(&normalize(&input.content))
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
