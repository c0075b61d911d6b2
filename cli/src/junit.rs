//! `toolhost check --junit FILE`: the checks as a JUnit XML report, one
//! test suite per plugin and one test case per check, the format CI
//! systems (GitHub Actions reporters, GitLab, Jenkins) render.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};

/// The checks of one plugin.
pub(crate) struct Suite {
    /// The plugin's name (its path when it did not load).
    pub(crate) name: String,
    pub(crate) cases: Vec<Case>,
}

/// One check: activation, or one sample call.
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) time: Duration,
    /// Why it failed; `None` when it passed.
    pub(crate) failure: Option<String>,
}

impl Suite {
    pub(crate) fn failures(&self) -> usize {
        self.cases.iter().filter(|c| c.failure.is_some()).count()
    }

    fn time(&self) -> Duration {
        self.cases.iter().map(|c| c.time).sum()
    }
}

/// Writes the report to `path`, replacing it atomically, so a CI step never
/// reads half a report.
pub(crate) fn write(path: &Path, suites: &[Suite]) -> anyhow::Result<()> {
    let xml = render(suites).context("cannot render the JUnit report")?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let cannot = || format!("cannot write the JUnit report {}", path.display());
    let mut file = tempfile::NamedTempFile::new_in(dir).with_context(cannot)?;
    file.write_all(&xml).with_context(cannot)?;
    file.persist(path).with_context(cannot)?;
    Ok(())
}

fn render(suites: &[Suite]) -> std::io::Result<Vec<u8>> {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    writer.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let tests: usize = suites.iter().map(|s| s.cases.len()).sum();
    let failures: usize = suites.iter().map(Suite::failures).sum();
    let time: Duration = suites.iter().map(Suite::time).sum();
    writer
        .create_element("testsuites")
        .with_attributes([
            ("name", "toolhost check"),
            ("tests", &tests.to_string()),
            ("failures", &failures.to_string()),
            ("time", &seconds(time)),
        ])
        .write_inner_content(|w| suites.iter().try_for_each(|suite| write_suite(w, suite)))?;
    Ok(writer.into_inner())
}

fn write_suite(w: &mut Writer<Vec<u8>>, suite: &Suite) -> std::io::Result<()> {
    let name = xml_text(&suite.name);
    w.create_element("testsuite")
        .with_attributes([
            ("name", name.as_str()),
            ("tests", &suite.cases.len().to_string()),
            ("failures", &suite.failures().to_string()),
            ("errors", "0"),
            ("time", &seconds(suite.time())),
        ])
        .write_inner_content(|w| {
            for case in &suite.cases {
                let element = w.create_element("testcase").with_attributes([
                    ("classname", name.as_str()),
                    ("name", &xml_text(&case.name)),
                    ("time", &seconds(case.time)),
                ]);
                match &case.failure {
                    None => element.write_empty()?,
                    Some(why) => element.write_inner_content(|w| {
                        let why = xml_text(why);
                        let first_line = why.lines().next().unwrap_or_default();
                        w.create_element("failure")
                            .with_attribute(("message", first_line))
                            .write_text_content(BytesText::new(&why))?;
                        Ok::<_, std::io::Error>(())
                    })?,
                };
            }
            Ok::<_, std::io::Error>(())
        })?;
    Ok(())
}

fn seconds(time: Duration) -> String {
    format!("{:.3}", time.as_secs_f64())
}

/// Text XML 1.0 can carry: guest text may hold control characters, which
/// no XML parser accepts even escaped; each becomes U+FFFD.
fn xml_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_replacement_characters() {
        assert_eq!(xml_text("a\u{1b}[31mb\tc\n"), "a\u{FFFD}[31mb\tc\n");
    }
}
