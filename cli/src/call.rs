//! `toolhost call PLUGIN TOOL --input JSON`.

use std::borrow::Cow;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use toolhost::events::{EventSink, ProgressEvent};
use toolhost::{Call, CallContext, CancellationToken, ContentPart, Outcome};

use crate::common::{Common, activate_all, specs};
use crate::std_tools::StdArgs;
use crate::{Failure, exit, stdio, terminal, usage};

/// Shows progress: JSON lines on stderr with `--json`, one updating line on
/// a terminal, nothing otherwise.
struct ProgressPrinter {
    json: bool,
    terminal: bool,
}

impl EventSink for ProgressPrinter {
    fn progress(&self, event: &ProgressEvent) {
        let mut stderr = std::io::stderr().lock();
        if self.json {
            let line = serde_json::json!({"event": "progress", "tool": event.tool, "update": event.update});
            let _ = writeln!(stderr, "{line}");
        } else if self.terminal {
            // One line that each update overwrites: its text cannot break it.
            let update = terminal::line(&event.update.to_string());
            let _ = write!(stderr, "\r\x1b[2Kprogress: {update}");
            let _ = stderr.flush();
        }
    }
}

pub(crate) async fn run(
    plugins: &[PathBuf],
    tool: &str,
    input: &str,
    std: &StdArgs,
    common: &Common,
) -> Result<u8, Failure> {
    let input = if input == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the input from stdin")
            .map_err(usage)?;
        text
    } else {
        input.to_owned()
    };
    let terminal = std::io::stderr().is_terminal();
    let printer = Arc::new(ProgressPrinter {
        json: common.json,
        terminal,
    });
    let host = common.host(Some(printer), true).await?;
    let mut specs = specs(plugins, common)?;
    std.add(&mut specs, common)?;
    let (location, _activations) = activate_all(&host, &specs).await?;
    let snapshot = location.snapshot();
    // Fresh ids each run (a minted message id): nothing to replay or
    // wait for, so the outcome is the run's one write to the store.
    let context = CallContext::new(
        format!("cli-{}", uuid::Uuid::new_v4().simple()),
        "toolhost",
        String::new(),
        "cli-call",
    );
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    if tool == toolhost::registry::RESERVED_NAME {
        wait_for_code_mode(&host, terminal && !common.json).await;
    }
    let call = Call::minted(tool, input, context).with_cancel(cancel);
    let settlement = snapshot.settle(call).await;
    if terminal && !common.json {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
    if common.json {
        stdio::line(
            &serde_json::to_string_pretty(&settlement).context("cannot print the outcome")?,
        )?;
    } else {
        print_human(&settlement, common.verbose)?;
    }
    Ok(match settlement.outcome {
        Outcome::Completed(_) => exit::COMPLETED,
        Outcome::Error { .. } => exit::TOOL_ERROR,
        Outcome::Interrupted { .. } => exit::INTERRUPTED,
        _ => exit::DEFECT,
    })
}

fn print_human(s: &toolhost::Settlement, verbose: bool) -> Result<(), Failure> {
    match &s.outcome {
        Outcome::Completed(c) => print_content(c)?,
        Outcome::Error { message, .. } => stdio::note(&format!("error: {message}")),
        Outcome::Interrupted { reason } => {
            let limit = s
                .usage
                .tripped
                .map(|l| {
                    format!(
                        " (limit tripped: {})",
                        serde_json::to_value(l).unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            stdio::note(&format!("interrupted: {reason}{limit}"));
        }
        Outcome::Defect { message, .. } => stdio::note(&format!("defect: {message}")),
        _ => stdio::note("error: unknown outcome"),
    }
    for w in &s.warnings {
        stdio::note(&format!("warning: {w}"));
    }
    if verbose {
        print_logs(s);
    }
    Ok(())
}

/// The content on stdout: raw bytes into a pipe or file (byte-exact),
/// escaped on a terminal (R30).
fn print_content(c: &toolhost::Completed) -> Result<(), Failure> {
    let terminal = std::io::stdout().is_terminal();
    for part in &c.content {
        match part {
            ContentPart::Text { text } => {
                let shown = if terminal {
                    Cow::Owned(terminal::text(text))
                } else {
                    Cow::Borrowed(text)
                };
                stdio::write(shown.as_bytes())?;
                if !text.ends_with('\n') {
                    stdio::write(b"\n")?;
                }
            }
            ContentPart::Media {
                mime_type,
                data,
                name,
            } => {
                let name = terminal::line(name.as_deref().unwrap_or("unnamed"));
                let mime_type = terminal::line(mime_type);
                stdio::line(&format!(
                    "[media {name}: {mime_type}, {} bytes]",
                    data.len()
                ))?;
            }
        }
    }
    for r in &c.retained {
        stdio::note(&format!(
            "note: output bounded; the full {} bytes are retained as {} (`toolhost output {}` prints them)",
            r.bytes, r.reference, r.reference
        ));
    }
    Ok(())
}

/// `--verbose`: the guest's captured output and the call's usage.
fn print_logs(s: &toolhost::Settlement) {
    if !s.logs.stdout.is_empty() {
        stdio::note(&format!("--- guest stdout ---\n{}", s.logs.stdout));
    }
    if !s.logs.stderr.is_empty() {
        stdio::note(&format!("--- guest stderr ---\n{}", s.logs.stderr));
    }
    if s.logs.dropped_bytes > 0 {
        stdio::note(&format!(
            "({} bytes of guest output dropped)",
            s.logs.dropped_bytes
        ));
    }
    stdio::note(&format!(
        "usage: fuel {}, wall {:.3} ms, peak memory {} bytes",
        s.usage.fuel_used,
        s.usage.wall_time.as_secs_f64() * 1000.0,
        s.usage.peak_memory
    ));
}

/// Says on a terminal that Code Mode's interpreter is compiling (seconds,
/// on a cold compile cache), until it is. The wait is not the program's:
/// its deadline starts once the interpreter is ready.
async fn wait_for_code_mode(host: &toolhost::Host, terminal: bool) {
    if !terminal || !host.code_mode_compiling() {
        return;
    }
    let _ = write!(
        std::io::stderr(),
        "compiling Code Mode's interpreter (first use with this compile cache; later runs load it)..."
    );
    host.code_mode_compiled().await;
    let _ = write!(std::io::stderr(), "\r\x1b[2K");
}
