//! Every write of the CLI to stdout and stderr goes through here. A reader
//! that goes away (`toolhost list P | head -1`) is not a failure: the CLI
//! ends quietly. What goes to stderr is escaped, since it can carry guest
//! text (R30).

use std::io::{ErrorKind, Write};

use crate::{exit, terminal};

/// Writes `bytes` to stdout as they are, and flushes them.
pub(crate) fn write(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => reader_gone(),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to stdout")),
    }
}

/// Writes `text` and a newline to stdout.
pub(crate) fn line(text: &str) -> anyhow::Result<()> {
    write(format!("{text}\n").as_bytes())
}

/// Writes `text` (escaped, newlines kept) and a newline to stderr. Errors
/// are ignored: stderr is where errors would go.
pub(crate) fn note(text: &str) {
    // As JSON, when logs are: one object on one line.
    let line = crate::logging::json_line(text).unwrap_or_else(|| terminal::text(text));
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Nobody reads the rest: end now, successfully and without a word.
fn reader_gone() -> ! {
    std::process::exit(i32::from(exit::COMPLETED))
}
