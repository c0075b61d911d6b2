//! Example Toolhost plugin with filesystem tools: `read_file`, `write_file`
//! and `grep`.
//!
//! It uses plain `std::fs`: on `wasm32-wasip2` that reaches exactly the
//! directories the host granted (preopened) and nothing else. `write_file`
//! also asks for the `edit` permission first, so the user stays in control
//! even inside a granted directory.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use regex::Regex;
use toolhost_sdk::prelude::*;

/// Read a UTF-8 text file.
pub struct ReadFile;

/// The arguments of `read_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct ReadFileInput {
    /// The file to read.
    pub path: String,
}

impl Tool for ReadFile {
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a UTF-8 text file and return its contents.";
    type Input = ReadFileInput;
    type Output = NoOutput;

    fn execute(input: ReadFileInput, _cx: &Context) -> ToolResult<NoOutput> {
        let text = std::fs::read_to_string(&input.path)
            .map_err(|error| fs_error("read", &input.path, &error))?;
        if text.is_empty() {
            // Content must not be empty; say so instead.
            return Ok(Response::text(format!("{} is empty.", input.path)));
        }
        Ok(Response::text(text))
    }
}

/// Write a text file, after asking for permission.
pub struct WriteFile;

/// The arguments of `write_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct WriteFileInput {
    /// The file to write; missing parent directories are created.
    pub path: String,
    /// The complete new contents of the file.
    pub content: String,
}

impl Tool for WriteFile {
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str =
        "Write text to a file, replacing its contents. Asks the user for `edit` permission first.";
    type Input = WriteFileInput;
    type Output = NoOutput;

    fn execute(input: WriteFileInput, cx: &Context) -> ToolResult<NoOutput> {
        let path = input.path.as_str();
        // A denial becomes the model-visible `Permission denied: edit <path>`.
        cx.request_permission("edit", &[path], &[path], None)?;
        if let Some(parent) = Path::new(path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|error| {
                fs_error(
                    "create the directory",
                    &parent.display().to_string(),
                    &error,
                )
            })?;
        }
        std::fs::write(path, &input.content).map_err(|error| fs_error("write", path, &error))?;
        let bytes = input.content.len();
        Ok(Response::text(format!("Wrote {bytes} bytes to {path}."))
            .with_metadata(json!({ "path": path, "bytes": bytes })))
    }
}

/// Search files for lines matching a regular expression.
pub struct Grep;

/// The arguments of `grep`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct GrepInput {
    /// A regular expression in Rust `regex` syntax, matched against each line.
    pub pattern: String,
    /// A file, or a directory to search recursively.
    pub path: String,
}

/// The matching lines found by `grep`.
#[derive(Serialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct GrepOutput {
    /// Matching lines, by file path then line number.
    pub matches: Vec<GrepMatch>,
    /// True when the search stopped at the match limit.
    pub truncated: bool,
}

/// One matching line.
#[derive(Serialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct GrepMatch {
    /// The file, as reached from the given path.
    pub file: String,
    /// The 1-based line number.
    pub line: u64,
    /// The line, without its newline.
    pub text: String,
}

/// Enough for a model to narrow its search; more would only be truncated.
const MAX_MATCHES: usize = 1000;

impl Tool for Grep {
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Search a file, or a directory tree recursively, for lines \
         matching a regular expression. Skips files that are not UTF-8 text.";
    type Input = GrepInput;
    type Output = GrepOutput;

    fn execute(input: GrepInput, _cx: &Context) -> ToolResult<GrepOutput> {
        let regex = Regex::new(&input.pattern).map_err(|error| {
            format!(
                "invalid regular expression {:?}: {error}\n\
                 Fix the pattern (Rust regex syntax: no look-around or backreferences) and try again.",
                input.pattern
            )
        })?;
        let mut files = Vec::new();
        collect_files(PathBuf::from(&input.path), &mut files)?;

        let mut output = GrepOutput {
            matches: Vec::new(),
            truncated: false,
        };
        'files: for file in files {
            // Binary and unreadable files are skipped, as grep does.
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for (index, line) in text.lines().enumerate() {
                if !regex.is_match(line) {
                    continue;
                }
                if output.matches.len() == MAX_MATCHES {
                    output.truncated = true;
                    break 'files;
                }
                output.matches.push(GrepMatch {
                    file: file.display().to_string(),
                    line: index as u64 + 1,
                    text: line.to_owned(),
                });
            }
        }

        // The model reads grep's familiar `file:line:text`; programs get the output.
        let mut content = String::new();
        for m in &output.matches {
            let _ = writeln!(content, "{}:{}:{}", m.file, m.line, m.text);
        }
        if output.matches.is_empty() {
            content = format!("No lines match {:?} in {}.", input.pattern, input.path);
        } else if output.truncated {
            let _ = writeln!(
                content,
                "(stopped after {MAX_MATCHES} matches; narrow the pattern or path)"
            );
        }
        Ok(Response::new(output).with_text(content))
    }
}

/// Collect `path` if it is a file, or every file below it (sorted, so results
/// are stable) if it is a directory. Symbolic links are not followed.
fn collect_files(path: PathBuf, files: &mut Vec<PathBuf>) -> Result<(), ToolError> {
    let describe =
        |error: &io::Error, path: &Path| fs_error("search", &path.display().to_string(), error);
    let metadata = std::fs::symlink_metadata(&path).map_err(|error| describe(&error, &path))?;
    if metadata.is_file() {
        files.push(path);
    } else if metadata.is_dir() {
        let mut entries = std::fs::read_dir(&path)
            .and_then(|entries| {
                entries
                    .map(|entry| entry.map(|e| e.path()))
                    .collect::<io::Result<Vec<_>>>()
            })
            .map_err(|error| describe(&error, &path))?;
        entries.sort();
        for entry in entries {
            collect_files(entry, files)?;
        }
    }
    Ok(())
}

/// A model-visible error for a failed filesystem operation, saying what to do.
fn fs_error(action: &str, path: &str, error: &io::Error) -> ToolError {
    let hint = match error.kind() {
        io::ErrorKind::NotFound => {
            "it does not exist (or is outside the directories this plugin was granted); check the path"
        }
        io::ErrorKind::PermissionDenied => {
            "access is denied; it may be outside the directories this plugin was granted, or read-only"
        }
        io::ErrorKind::InvalidData => "it is not UTF-8 text",
        io::ErrorKind::IsADirectory => "it is a directory; give a file path",
        io::ErrorKind::NotADirectory => "a part of the path is not a directory",
        _ => "",
    };
    if hint.is_empty() {
        ToolError::new(format!("Cannot {action} {path}: {error}."))
    } else {
        ToolError::new(format!("Cannot {action} {path}: {hint} ({error})."))
    }
}

toolhost_sdk::plugin!([ReadFile, WriteFile, Grep]);
