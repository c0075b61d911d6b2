//! Approvers for permission requests that ask: `--yes`, or a terminal prompt.
//! Every string of a request comes from the guest: the question shows each
//! escaped to one line, after the fixed words, so no argument can alter the
//! question (R30), and it says exactly what "always" would save (R29).

use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;

use toolhost::permission::{Approver, PermissionRequest, Reply};

use crate::terminal;

/// `--yes`: approve each request once.
pub(crate) struct Yes;

impl Approver for Yes {
    fn ask<'a>(
        &'a self,
        _: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        Box::pin(async { Reply::Once })
    }
}

/// Asks the person at the terminal.
pub(crate) struct Terminal;

impl Approver for Terminal {
    fn ask<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        let question = question(request);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut stderr = std::io::stderr();
                // Clear a progress line first, so the question starts a line.
                let _ = write!(stderr, "\r\x1b[2K{question}");
                let _ = stderr.flush();
                let mut line = String::new();
                match std::io::stdin().lock().read_line(&mut line) {
                    Ok(_) => reply(&line),
                    Err(_) => Reply::Reject,
                }
            })
            .await
            .unwrap_or(Reply::Reject)
        })
    }
}

/// The first words of every question: fixed, before any guest text.
const HEADER: &str = "A plugin asks for permission";

/// The question for `request`: one labelled line per part, guest text
/// escaped to a single line, then what "always" would save, then the choice.
pub(crate) fn question(request: &PermissionRequest) -> String {
    let resources: Vec<String> = request
        .resources
        .iter()
        .map(|r| terminal::line(r))
        .collect();
    format!(
        "{HEADER}:\n  plugin:    {}\n  tool:      {}\n  action:    {}\n  resources: {}\n  {}\nAllow? [o]nce / [a]lways / [r]eject: ",
        terminal::line(&request.plugin),
        terminal::line(&request.tool),
        terminal::line(&request.action),
        resources.join(", "),
        always(request),
    )
}

/// The call-out of a save pattern that allows more than was requested.
const BROADER: &str = "broader than this request";

/// What answering "always" saves: every pattern, the broader ones called out.
fn always(request: &PermissionRequest) -> String {
    if request.save.is_empty() {
        return "[a]lways saves nothing beyond this request".to_owned();
    }
    let broader = request.broader_saves();
    let patterns: Vec<String> = request
        .save
        .iter()
        .map(|p| {
            let shown = terminal::line(p);
            if p == "*" {
                format!("{shown} (ANY resource; {BROADER})")
            } else if broader.contains(&p.as_str()) {
                format!("{shown} ({BROADER})")
            } else {
                shown
            }
        })
        .collect();
    format!(
        "[a]lways would also allow `{}` on: {}",
        terminal::line(&request.action),
        patterns.join(", ")
    )
}

/// The answer typed: once, always, or anything else (reject).
fn reply(line: &str) -> Reply {
    match line.trim().to_ascii_lowercase().as_str() {
        "o" | "once" | "y" | "yes" => Reply::Once,
        "a" | "always" => Reply::Always,
        _ => Reply::Reject,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::CallContext;

    fn request(resources: &[&str], save: &[&str]) -> PermissionRequest {
        PermissionRequest {
            context: CallContext::new("s", "a", "m", "c"),
            plugin: "fs-tools".into(),
            tool: "write_file".into(),
            action: "edit".into(),
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            save: save.iter().map(|s| (*s).to_owned()).collect(),
            metadata: None,
        }
    }

    #[test]
    fn r29_a_star_save_is_shown_and_called_out_as_any_resource() {
        let text = question(&request(&["README.md"], &["*"]));
        assert!(
            text.contains(
                "[a]lways would also allow `edit` on: * (ANY resource; broader than this request)"
            ),
            "{text}"
        );
    }

    #[test]
    fn r29_every_save_pattern_is_listed_and_only_broader_ones_called_out() {
        let text = question(&request(&["/work/a.txt"], &["/work/a.txt", "/work/src/*"]));
        assert!(
            text.contains(
                "[a]lways would also allow `edit` on: /work/a.txt, /work/src/* (broader than this request)"
            ),
            "{text}"
        );
    }

    #[test]
    fn r29_an_empty_save_says_always_saves_nothing_more() {
        let text = question(&request(&["/work/a.txt"], &[]));
        assert!(
            text.contains("[a]lways saves nothing beyond this request"),
            "{text}"
        );
    }

    #[test]
    fn r30_a_hostile_resource_reaches_the_terminal_without_any_control_character() {
        let mut hostile = request(&["\r\x1b[2Kharmless"], &["\u{202e}*\n"]);
        hostile.tool = "t\x07\u{9b}".into();
        hostile.plugin = "p\u{2066}".into();
        let text = question(&hostile);
        // The fixed layout's own newlines are the only control characters.
        let bidi = "\u{200e}\u{200f}\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}\u{2066}\u{2067}\u{2068}\u{2069}";
        let controls: Vec<char> = text
            .chars()
            .filter(|&c| c != '\n' && (c.is_control() || bidi.contains(c)))
            .collect();
        assert!(controls.is_empty(), "{controls:?} in {text}");
        assert!(text.contains(r"\u{d}\u{1b}[2Kharmless"), "{text}");
        assert_eq!(text.lines().count(), 7, "guest text added no line: {text}");
    }

    #[test]
    fn r30_the_fixed_words_come_before_any_guest_text() {
        let text = question(&request(&["README.md"], &["README.md"]));
        assert!(text.starts_with(HEADER), "{text}");
        for (label, value) in [
            ("plugin:", "fs-tools"),
            ("tool:", "write_file"),
            ("action:", "edit"),
            ("resources:", "README.md"),
        ] {
            let label_at = text.find(label).expect(label);
            assert!(label_at < text.find(value).expect(value), "{label} {text}");
        }
        assert!(
            text.ends_with("Allow? [o]nce / [a]lways / [r]eject: "),
            "{text}"
        );
    }

    #[test]
    fn answers_map_to_once_always_and_reject() {
        for (typed, expected) in [
            ("o\n", Reply::Once),
            ("Yes\n", Reply::Once),
            ("a\n", Reply::Always),
            (" always \n", Reply::Always),
            ("\n", Reply::Reject),
            ("sure\n", Reply::Reject),
        ] {
            assert_eq!(reply(typed), expected, "{typed:?}");
        }
    }
}
