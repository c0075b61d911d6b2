//! Example Toolhost plugin with one tool, `generate`, that produces large
//! deterministic text. It shows progress reporting and content-only tools
//! (no output schema), and exercises the host's output bounding.
//!
//! # The text
//!
//! Line `n` (1-based) is the first `len - 1` bytes of `"<n> "` followed by
//! `abcdefghijklmnopqrstuvwxyz` repeated, then a newline, so every line is
//! exactly `len` bytes of ASCII.
//!
//! - Without `lines`: lines of 64 bytes; the last one is cut so the text is
//!   exactly `bytes` long (it may lack its newline).
//! - With `lines`: exactly `lines` newline-terminated lines. Each is
//!   `bytes / lines` long, and the first `bytes % lines` lines are one byte
//!   longer, so the total is exactly `bytes`.

use std::fmt::Write as _;

use toolhost_sdk::prelude::*;

/// The largest text `generate` produces.
const MAX_BYTES: u64 = 256 * MIB;
const MIB: u64 = 1024 * 1024;
/// Line length without `lines`, newline included.
const DEFAULT_LINE: u64 = 64;
const FILL: &str = "abcdefghijklmnopqrstuvwxyz";

/// Generate deterministic text of an exact size.
pub struct Generate;

/// The arguments of `generate`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "toolhost_sdk::serde")]
#[schemars(crate = "toolhost_sdk::schemars")]
pub struct GenerateInput {
    /// The exact size of the text in bytes (1 to 268435456).
    #[schemars(range(min = 1, max = 268_435_456))]
    pub bytes: u64,
    /// If given, the exact number of newline-terminated lines; needs at least
    /// one byte per line.
    #[schemars(range(min = 1))]
    pub lines: Option<u64>,
}

impl Tool for Generate {
    const NAME: &'static str = "generate";
    const DESCRIPTION: &'static str = "Generate deterministic ASCII text of exactly `bytes` bytes, \
         optionally in exactly `lines` newline-terminated lines.";
    type Input = GenerateInput;
    type Output = NoOutput;

    fn execute(input: GenerateInput, cx: &Context) -> ToolResult<NoOutput> {
        let GenerateInput { bytes, lines } = input;
        if bytes > MAX_BYTES {
            return Err(format!("bytes is {bytes}; at most {MAX_BYTES} is supported").into());
        }
        let mut text = Text::new(bytes, cx);
        let line_count = match lines {
            None => {
                let mut n = 0;
                while text.remaining() > 0 {
                    n += 1;
                    text.line(n, DEFAULT_LINE.min(text.remaining()), DEFAULT_LINE);
                }
                n
            }
            Some(0) => return Err("lines must be at least 1".into()),
            Some(lines) if lines > bytes => {
                return Err(format!(
                    "{lines} lines need at least {lines} bytes (one newline each), \
                     but bytes is {bytes}; raise bytes or lower lines"
                )
                .into());
            }
            Some(lines) => {
                let (base, longer) = (bytes / lines, bytes % lines);
                for n in 1..=lines {
                    let len = base + u64::from(n <= longer);
                    text.line(n, len, len);
                }
                lines
            }
        };
        let text = text.finish();
        Ok(Response::text(text).with_metadata(json!({ "bytes": bytes, "lines": line_count })))
    }
}

/// The text being built, reporting progress every MiB.
struct Text<'a> {
    buf: String,
    total: u64,
    next_report: u64,
    cx: &'a Context,
}

impl<'a> Text<'a> {
    fn new(total: u64, cx: &'a Context) -> Self {
        let capacity = usize::try_from(total).expect("bytes is at most MAX_BYTES");
        Self {
            buf: String::with_capacity(capacity),
            total,
            next_report: MIB,
            cx,
        }
    }

    fn remaining(&self) -> u64 {
        self.total - self.buf.len() as u64
    }

    /// Append `keep` bytes of line `n`, whose full length (newline included)
    /// is `len`.
    fn line(&mut self, n: u64, keep: u64, len: u64) {
        let start = self.buf.len();
        let body = len as usize - 1;
        write!(self.buf, "{n} ").expect("writing to a String cannot fail");
        // Fill in chunks, so a single huge line still reports progress.
        while self.buf.len() - start < body {
            let chunk = (body - (self.buf.len() - start)).min(FILL.len());
            self.buf.push_str(&FILL[..chunk]);
            self.report();
        }
        self.buf.truncate(start + body);
        self.buf.push('\n');
        self.buf.truncate(start + keep as usize);
        self.report();
    }

    fn report(&mut self) {
        let done = self.buf.len() as u64;
        if done >= self.next_report {
            self.update(done);
            self.next_report = (done / MIB + 1) * MIB;
        }
    }

    /// `progress`, `total` and `message` are the conventional fields hosts
    /// show (an MCP server turns them into a progress notification).
    fn update(&self, done: u64) {
        self.cx.progress(json!({
            "bytes_done": done,
            "bytes_total": self.total,
            "progress": done,
            "total": self.total,
            "message": format!("{done} of {} bytes", self.total),
        }));
    }

    fn finish(self) -> String {
        // Always at least one update, even for small texts.
        self.update(self.buf.len() as u64);
        self.buf
    }
}

toolhost_sdk::plugin!([Generate]);
