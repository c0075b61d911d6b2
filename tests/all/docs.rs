//! The docs agree with the code: `docs/limits.md` lists every constant of
//! `toolhost::limits` and `toolhost_mcp::limits` with its value, `docs/contract.md` names each rule's
//! tests with true counts, and README.md stays a front page whose links
//! to `docs/` resolve.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The library's limits and the MCP server's, as docs/limits.md lists
/// them together.
mod limits {
    pub use toolhost::limits::*;
    pub use toolhost_mcp::limits::*;
}

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_owned()
}

fn read(path: &str) -> String {
    let full = root().join(path);
    fs::read_to_string(&full).unwrap_or_else(|e| panic!("cannot read {}: {e}", full.display()))
}

/// Fails with every problem found, one per line.
fn assert_no_problems(what: &str, problems: &[String]) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

// ---------------------------------------------------------------- limits

/// `n` with a comma between each group of three digits: `20,000,000,000`.
fn count<N: TryInto<u64>>(n: N) -> String
where
    N::Error: Debug,
{
    let digits = n.try_into().expect("a count fits u64").to_string();
    let mut shown = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            shown.push(',');
        }
        shown.push(digit);
    }
    shown
}

/// A size in the largest binary unit that divides it: `16 MiB`, `4 KiB`.
fn bytes<N: TryInto<u64>>(n: N) -> String
where
    N::Error: Debug,
{
    let n: u64 = n.try_into().expect("a size fits u64");
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= size && n.is_multiple_of(size) {
            return format!("{} {unit}", count(n / size));
        }
    }
    plain_bytes(n)
}

/// A size in bytes: `51,200 bytes`.
fn plain_bytes<N: TryInto<u64>>(n: N) -> String
where
    N::Error: Debug,
{
    format!("{} bytes", count(n))
}

/// A duration in the unit docs/limits.md gives it; each must be exact.
fn millis(d: Duration) -> String {
    assert_eq!(
        d.subsec_nanos() % 1_000_000,
        0,
        "{d:?} is not whole milliseconds"
    );
    format!("{} ms", count(d.as_millis() as u64))
}

fn secs(d: Duration) -> String {
    assert_eq!(d.subsec_nanos(), 0, "{d:?} is not whole seconds");
    format!("{} s", count(d.as_secs()))
}

fn minutes(d: Duration) -> String {
    assert!(
        d.as_secs().is_multiple_of(60) && d.subsec_nanos() == 0,
        "{d:?} is not whole minutes"
    );
    format!("{} min", count(d.as_secs() / 60))
}

fn days(d: Duration) -> String {
    assert!(
        d.as_secs().is_multiple_of(86_400) && d.subsec_nanos() == 0,
        "{d:?} is not whole days"
    );
    format!("{} days", count(d.as_secs() / 86_400))
}

/// `(name, value as docs/limits.md shows it)` for each listed constant of
/// `toolhost::limits`, grouped by how it is shown.
macro_rules! shown {
    ($($format:ident: $($name:ident),+ ;)+) => {
        vec![$($((stringify!($name), $format(limits::$name)),)+)+]
    };
}

/// Every constant of `toolhost::limits` with its real value. A constant
/// added to `host/src/limits.rs` must be added here too (the test says
/// so), and given a row in docs/limits.md.
fn limit_values() -> Vec<(&'static str, String)> {
    shown![
        count: DEFAULT_FUEL, DEFAULT_CONCURRENCY, DEFAULT_HTTP_REQUESTS, DEFAULT_HTTP_CONCURRENCY,
            MAX_HANDLES_PER_CALL, MAX_PROGRAM_CALLS, MAX_PROGRAM_CALLS_IN_FLIGHT,
            DEFAULT_MAX_LINES, MAX_LISTED_VIOLATIONS, MAX_COUNTED_VIOLATIONS, MAX_NAME_LEN,
            MAX_TOOLS_PER_ACTIVATION, MAX_PERMISSION_ITEMS, DEFAULT_MAX_INSTANCES,
            EVENT_LOG_SEGMENTS, MAX_CONNECTIONS, MAX_SESSIONS, MAX_CALLS_IN_FLIGHT,
            MAX_CALLS_PER_SESSION, MAX_CALLS_WAITING, MAX_LISTED_OUTPUTS, MAX_BATCH,
            CALLER_CONNECTION_SHARE_PERCENT,
            MAX_QUEUED_WRITES, MAX_STORED_EVENTS, MAX_SEALED_ANSWERS;
        bytes: DEFAULT_MEMORY, MAX_MEMORY, DEFAULT_HTTP_REQUEST_BYTES,
            DEFAULT_HTTP_RESPONSE_BYTES, MAX_HOST_COPY_BYTES, MAX_CONSOLE_BYTES,
            DEFAULT_MAX_MACHINE_OUTPUT, MAX_MEDIA_BYTES, MAX_RESULT_MEDIA_BYTES,
            MAX_METADATA_BYTES, MAX_MESSAGE_BYTES, MAX_PROGRESS_BYTES, MAX_PARTIAL_BYTES,
            MAX_CAPTURED_BYTES, MAX_SCHEMA_BYTES, MAX_DESCRIPTION_BYTES, MAX_REGISTERED_BYTES,
            MAX_PERMISSION_TEXT, MAX_PLUGIN_BYTES, MAX_MANIFEST_BYTES, DEFAULT_COMPILE_MEMORY,
            DEFAULT_CACHE_LIMIT, DEFAULT_RETENTION_QUOTA, DEFAULT_MEMORY_RETENTION_QUOTA,
            EVENT_LOG_ROTATE_BYTES,
            MAX_REQUEST_BODY_BYTES, MAX_BUFFERED_REQUEST_BYTES, MAX_INITIALIZE_BYTES,
            MAX_STDIO_MESSAGE_BYTES, OUTPUT_CHUNK_BYTES, MAX_SEALED_STATE_BYTES, MAX_UNBUDGETED_BYTES;
        plain_bytes: DEFAULT_MAX_BYTES;
        millis: MCP_RECONNECT_MIN;
        secs: DEFAULT_TIMEOUT, DEFAULT_COMPILE_TIMEOUT, MCP_CONNECT_TIMEOUT, MCP_RECONNECT_MAX,
            HEADER_READ_TIMEOUT, BODY_IDLE_TIMEOUT, BODY_READ_TIMEOUT, MAX_SLOT_WAIT,
            MAX_LOADING_WAIT, OUTCOME_FLUSH_LIMIT, REPLY_FLUSH_LIMIT;
        minutes: SESSION_IDLE_EXPIRY, SEALED_STATE_LIFETIME;
        days: DEFAULT_RETENTION;
        count: MAX_TOOL_LABELS;
        secs: READY_CHECK_TIMEOUT, READY_CHECK_CACHE;
        count: MAX_ISSUER_KEYS;
        bytes: MAX_TOKEN_BYTES, MAX_AUTH_DOCUMENT_BYTES;
        secs: TOKEN_LEEWAY, AUTH_FETCH_TIMEOUT, KEY_REFETCH_INTERVAL;
        count: WARM_INSTANCES, MAX_RETIRING;
        secs: WARM_IDLE;
        bytes: MAX_OCI_MANIFEST_BYTES, MAX_OCI_CONFIG_BYTES, MAX_SIGNATURE_PAYLOAD_BYTES, MAX_SIGSTORE_BUNDLE_BYTES;
        count: MAX_SIGNATURES;
        secs: OCI_PULL_TIMEOUT, OCI_CONNECT_TIMEOUT, OCI_READ_TIMEOUT;
    ]
}

/// How a limit's value is shown.
type Show = fn(u64) -> String;

/// The CLI's own limits docs/limits.md lists (marked "(CLI)"), and how
/// each is shown; their values are read from `cli/src`.
const CLI_LIMITS: &[(&str, Show)] = &[
    ("MAX_SAMPLES_BYTES", bytes),
    ("MAX_CONFIG_BYTES", bytes),
    ("MAX_SHOWN_OUTPUT_BYTES", bytes),
    ("MAX_LISTED_EVENTS", count),
    ("MAX_WORKERS", count),
];

/// The source without `//` comments (none of it has `//` in a string).
fn without_comments(source: &str) -> String {
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names `host/src/limits.rs` makes public: each item of a `pub use`
/// (its alias, if renamed) and each `pub const`.
fn limits_module_names() -> BTreeSet<String> {
    let source = ["host/src/limits.rs", "host/mcp/src/limits.rs"]
        .map(|file| without_comments(&read(file)))
        .join(";");
    let mut names = BTreeSet::new();
    for statement in source.split(';') {
        let statement = statement.trim();
        let statement = match statement.rfind("pub ") {
            Some(at) => &statement[at..],
            None => continue,
        };
        if let Some(rest) = statement.strip_prefix("pub const ") {
            let name = rest.split(':').next().unwrap_or("").trim();
            names.insert(name.to_owned());
        } else if let Some(path) = statement.strip_prefix("pub use ") {
            let items = match (path.find('{'), path.rfind('}')) {
                (Some(open), Some(close)) => &path[open + 1..close],
                _ => path.rsplit("::").next().unwrap_or(""),
            };
            for item in items.split(',') {
                let item = item.trim();
                let name = item.rsplit(" as ").next().unwrap_or(item).trim();
                let name = name.rsplit("::").next().unwrap_or(name);
                if !name.is_empty() {
                    names.insert(name.to_owned());
                }
            }
        }
    }
    names
}

/// The cells of a Markdown table row, trimmed; `None` for other lines.
fn cells(line: &str) -> Option<Vec<String>> {
    let line = line.trim();
    let inner = line.strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split('|').map(|c| c.trim().to_owned()).collect())
}

/// One row of docs/limits.md that names a constant.
#[derive(Debug)]
struct LimitRow {
    name: String,
    cli: bool,
    default: String,
    line: usize,
}

/// The rows of every table with `constant` and `default` columns.
fn documented_limits(doc: &str) -> (Vec<LimitRow>, Vec<String>) {
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    let mut columns: Option<(usize, usize)> = None;
    for (i, line) in doc.lines().enumerate() {
        let line_no = i + 1;
        let Some(row) = cells(line) else {
            columns = None;
            continue;
        };
        if row
            .iter()
            .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            continue;
        }
        let header = (
            row.iter().position(|c| c == "constant"),
            row.iter().position(|c| c == "default"),
        );
        if let (Some(constant), Some(default)) = header {
            columns = Some((constant, default));
            continue;
        }
        let Some((constant, default)) = columns else {
            continue;
        };
        let (Some(cell), Some(value)) = (row.get(constant), row.get(default)) else {
            problems.push(format!(
                "docs/limits.md:{line_no}: a row with too few cells"
            ));
            continue;
        };
        if cell == "—" {
            continue;
        }
        let (named, cli) = match cell.strip_suffix(" (CLI)") {
            Some(named) => (named, true),
            None => (cell.as_str(), false),
        };
        match named.strip_prefix('`').and_then(|n| n.strip_suffix('`')) {
            Some(name) if !name.contains('`') => rows.push(LimitRow {
                name: name.to_owned(),
                cli,
                default: value.clone(),
                line: line_no,
            }),
            _ => problems.push(format!(
                "docs/limits.md:{line_no}: the constant cell must be `NAME`, `NAME` (CLI) or —, not {cell:?}"
            )),
        }
    }
    (rows, problems)
}

/// The value of a `const NAME: T = EXPR;` in `cli/src`, for EXPR made of
/// integer literals joined by `*` or `<<`.
fn cli_constant(name: &str) -> Result<u64, String> {
    let mut found = Vec::new();
    let dir = root().join("cli/src");
    for file in files_under(&dir, &["rs"]) {
        let source = fs::read_to_string(&file).unwrap_or_default();
        for line in source.lines() {
            let line = line.trim();
            let line = line.strip_prefix("pub(crate) ").unwrap_or(line);
            if let Some(rest) = line.strip_prefix(&format!("const {name}:")) {
                found.push(rest.to_owned());
            }
        }
    }
    let [definition] = found.as_slice() else {
        return Err(format!(
            "`const {name}` is defined {} times in cli/src",
            found.len()
        ));
    };
    let expr = definition
        .split_once('=')
        .and_then(|(_, e)| e.split(';').next())
        .ok_or_else(|| format!("cannot read the value of {name}"))?;
    evaluate(expr).ok_or_else(|| format!("cannot evaluate {name} = {expr}"))
}

fn evaluate(expr: &str) -> Option<u64> {
    let literal = |s: &str| s.trim().replace('_', "").parse::<u64>().ok();
    if let Some((a, b)) = expr.split_once("<<") {
        return Some(evaluate(a)? << literal(b)?);
    }
    expr.split('*')
        .map(literal)
        .try_fold(1u64, |acc, n| acc.checked_mul(n?))
}

#[test]
fn limits_doc_lists_every_limit_with_its_value() {
    let module = limits_module_names();
    let values: BTreeMap<&str, String> = limit_values().into_iter().collect();
    let (rows, mut problems) = documented_limits(&read("docs/limits.md"));

    let table: BTreeSet<String> = values.keys().map(|n| (*n).to_owned()).collect();
    for name in module.difference(&table) {
        problems.push(format!(
            "{name} is in toolhost::limits or toolhost_mcp::limits but not in limit_values() of tests/all/docs.rs: add it there and give it a row in docs/limits.md"
        ));
    }
    for name in table.difference(&module) {
        problems.push(format!(
            "{name} is in limit_values() of tests/all/docs.rs but neither host/src/limits.rs nor host/mcp/src/limits.rs exports it"
        ));
    }

    let mut seen = BTreeSet::new();
    for row in &rows {
        if !seen.insert(row.name.clone()) {
            problems.push(format!(
                "docs/limits.md:{}: {} has a second row",
                row.line, row.name
            ));
        }
        let expected = if row.cli {
            match CLI_LIMITS.iter().find(|(n, _)| *n == row.name) {
                Some((name, show)) => cli_constant(name).map(show),
                None => Err(format!(
                    "{} is marked (CLI) but CLI_LIMITS does not list it",
                    row.name
                )),
            }
        } else {
            match values.get(row.name.as_str()) {
                Some(value) => Ok(value.clone()),
                None if module.contains(&row.name) => Err(format!(
                    "{} has no value in limit_values() to check the row against",
                    row.name
                )),
                None => Err(format!(
                    "{} is not a constant of toolhost::limits",
                    row.name
                )),
            }
        };
        match expected {
            Ok(expected) if expected == row.default => {}
            Ok(expected) => problems.push(format!(
                "docs/limits.md:{}: {} is {expected}, the row says {:?}",
                row.line, row.name, row.default
            )),
            Err(e) => problems.push(format!("docs/limits.md:{}: {e}", row.line)),
        }
    }
    for name in &module {
        if !seen.contains(name) {
            problems.push(format!("docs/limits.md has no row for {name}"));
        }
    }
    for (name, _) in CLI_LIMITS {
        if !rows.iter().any(|r| r.cli && r.name == *name) {
            problems.push(format!("docs/limits.md has no (CLI) row for {name}"));
        }
    }
    assert_no_problems("docs/limits.md disagrees with the code", &problems);
}

// -------------------------------------------------------------- contract

/// The design's rules: R1–R41.
const RULES: std::ops::RangeInclusive<u32> = 1..=41;

/// Where tests named after rules live.
const TEST_ROOTS: &[&str] = &["host", "cli", "tests"];

/// Every `.rs` or `.py` file under `dir`, skipping installed packages and
/// build output.
fn files_under(dir: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let skipped = ["node_modules", "target", "__pycache__"].contains(&name.as_str());
                if !skipped && !name.starts_with('.') {
                    pending.push(path);
                }
            } else if path
                .extension()
                .is_some_and(|e| extensions.iter().any(|x| e == *x))
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The rule a test is named after: `fn r07_…` / `async fn r07_…` in Rust,
/// `def test_r07_…` in Python, at the start of a line's code.
fn rule_of_test(line: &str) -> Option<u32> {
    let line = line.trim_start();
    let line = line.strip_prefix("pub ").unwrap_or(line);
    let line = line.strip_prefix("async ").unwrap_or(line);
    let rest = line
        .strip_prefix("fn r")
        .or_else(|| line.strip_prefix("def test_r"))?;
    let digits = rest.get(..2)?;
    (digits.bytes().all(|b| b.is_ascii_digit()) && rest[2..].starts_with('_'))
        .then(|| digits.parse().ok())
        .flatten()
}

/// For each rule, the files with tests named after it and how many.
fn tests_by_rule() -> BTreeMap<u32, BTreeMap<String, usize>> {
    let root = root();
    let mut rules: BTreeMap<u32, BTreeMap<String, usize>> = BTreeMap::new();
    for top in TEST_ROOTS {
        for file in files_under(&root.join(top), &["rs", "py"]) {
            let source = fs::read_to_string(&file).unwrap_or_default();
            let relative = file
                .strip_prefix(&root)
                .expect("under the root")
                .to_string_lossy()
                .replace('\\', "/");
            for rule in source.lines().filter_map(rule_of_test) {
                *rules
                    .entry(rule)
                    .or_default()
                    .entry(relative.clone())
                    .or_default() += 1;
            }
        }
    }
    rules
}

/// The spans between backticks in `text`, each with what follows it.
fn code_spans(text: &str) -> Vec<(&str, &str)> {
    let mut spans = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else {
            break;
        };
        spans.push((&after[..close], &after[close + 1..]));
        rest = &after[close + 1..];
    }
    spans
}

/// Whether a code span names a file or directory of the repository.
fn is_repo_path(span: &str) -> bool {
    let tops = [
        "host/",
        "cli/",
        "tests/",
        "xtask/",
        "guest-sdk/",
        "code-mode/",
        "example-plugins/",
        "wit/",
        "docs/",
    ];
    tops.iter().any(|t| span.starts_with(t))
        && !span.contains(|c: char| c.is_whitespace() || "*<>…".contains(c))
}

/// The `` `PATH` rNN ×N `` entries of one row's tests cell.
fn contract_entries(
    rule: u32,
    cell: &str,
    line_no: usize,
    problems: &mut Vec<String>,
) -> BTreeMap<String, usize> {
    let mut entries = BTreeMap::new();
    for (span, after) in code_spans(cell) {
        let Some(tail) = after.strip_prefix(" r") else {
            continue;
        };
        let Some(digits) = tail
            .get(..2)
            .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let named: u32 = digits.parse().expect("two digits");
        let count = tail[2..]
            .strip_prefix(" ×")
            .map(|t| {
                t.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .and_then(|n| n.parse::<usize>().ok());
        match count {
            _ if named != rule => problems.push(format!(
                "docs/contract.md:{line_no}: R{rule}'s row names r{digits} tests in `{span}`"
            )),
            None => problems.push(format!(
                "docs/contract.md:{line_no}: `{span}` r{digits} needs a count: `{span}` r{digits} ×N"
            )),
            Some(n) => {
                if entries.insert(span.to_owned(), n).is_some() {
                    problems.push(format!("docs/contract.md:{line_no}: `{span}` is listed twice"));
                }
            }
        }
    }
    entries
}

#[test]
fn contract_doc_names_each_rules_tests_with_true_counts() {
    let doc = read("docs/contract.md");
    let tests = tests_by_rule();
    let mut problems = Vec::new();
    let mut rows = BTreeSet::new();
    for (i, line) in doc.lines().enumerate() {
        let line_no = i + 1;
        for (span, _) in code_spans(line) {
            if is_repo_path(span) && !root().join(span.trim_end_matches('/')).exists() {
                problems.push(format!(
                    "docs/contract.md:{line_no}: `{span}` does not exist"
                ));
            }
        }
        let Some(row) = cells(line) else {
            continue;
        };
        let Some(rule) = row[0].strip_prefix('R').and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if !RULES.contains(&rule) {
            problems.push(format!(
                "docs/contract.md:{line_no}: R{rule} is not a rule of the design"
            ));
        }
        if !rows.insert(rule) {
            problems.push(format!(
                "docs/contract.md:{line_no}: R{rule} has a second row"
            ));
        }
        let Some(cell) = row.get(2) else {
            problems.push(format!(
                "docs/contract.md:{line_no}: R{rule}'s row has no tests column"
            ));
            continue;
        };
        let listed = contract_entries(rule, cell, line_no, &mut problems);
        let found = tests.get(&rule).cloned().unwrap_or_default();
        for (path, n) in &listed {
            match found.get(path) {
                Some(m) if m == n => {}
                Some(m) => problems.push(format!(
                    "docs/contract.md:{line_no}: `{path}` has {m} r{rule:02} tests, the row says ×{n}"
                )),
                None => problems.push(format!(
                    "docs/contract.md:{line_no}: `{path}` has no r{rule:02} tests"
                )),
            }
        }
        for (path, n) in &found {
            if !listed.contains_key(path) {
                problems.push(format!(
                    "docs/contract.md:{line_no}: R{rule}'s row misses `{path}` r{rule:02} ×{n}"
                ));
            }
        }
        if found.is_empty() {
            problems.push(format!(
                "docs/contract.md:{line_no}: R{rule} has a row but no tests"
            ));
        }
    }
    for (rule, files) in &tests {
        if !RULES.contains(rule) {
            problems.push(format!(
                "tests named after R{rule}, which is not a rule of the design: {:?}",
                files.keys().collect::<Vec<_>>()
            ));
        } else if !rows.contains(rule) {
            problems.push(format!(
                "R{rule} has tests ({:?}) but docs/contract.md has no row for it",
                files
            ));
        }
    }
    assert_no_problems("docs/contract.md disagrees with the tests", &problems);
}

// ---------------------------------------------------------------- README

/// The longest README.md may be: a front page, the reference in docs/.
const README_MAX_LINES: usize = 260;

/// GitHub's anchor for a heading: lower case, punctuation dropped but `-`
/// and `_`, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings, outside code blocks.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            anchors.insert(anchor(line.trim_start_matches('#')));
        }
    }
    anchors
}

/// The targets of the Markdown links `[text](target)` in `markdown`.
fn link_targets(markdown: &str) -> Vec<&str> {
    markdown
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect()
}

#[test]
fn readme_is_a_front_page_and_its_links_to_docs_resolve() {
    let readme = read("README.md");
    let mut problems = Vec::new();
    let lines = readme.lines().count();
    if lines > README_MAX_LINES {
        problems.push(format!(
            "README.md has {lines} lines, more than {README_MAX_LINES}: move reference to docs/"
        ));
    }
    let mut linked = BTreeSet::new();
    for target in link_targets(&readme) {
        let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
        if !path.starts_with("docs/") {
            continue;
        }
        linked.insert(path.to_owned());
        let Ok(doc) = fs::read_to_string(root().join(path)) else {
            problems.push(format!("README.md links to {path}, which does not exist"));
            continue;
        };
        if !fragment.is_empty() && !anchors(&doc).contains(fragment) {
            problems.push(format!(
                "README.md links to {target}: {path} has no such heading"
            ));
        }
    }
    for file in files_under(&root().join("docs"), &["md"]) {
        let name = format!("docs/{}", file.file_name().unwrap().to_string_lossy());
        if !linked.contains(&name) {
            problems.push(format!("README.md does not link to {name}"));
        }
    }
    assert_no_problems("README.md", &problems);
}

/// The PyPI name `toolhost` is an unrelated project's: the wheel is
/// `toolhost-cli`, and no doc, template or workflow installs anything by
/// the other name.
#[test]
fn the_cli_installs_as_toolhost_cli_never_as_someone_elses_toolhost() {
    let pyproject: toml::Table = read("cli/pyproject.toml").parse().unwrap();
    assert_eq!(pyproject["project"]["name"].as_str(), Some("toolhost-cli"));
    let mut files = vec![root().join("README.md")];
    files.extend(files_under(&root().join("docs"), &["md"]));
    let templates = root().join("cli/templates");
    files.extend(files_under(&templates, &["md", "toml", "sh"]));
    for template in fs::read_dir(&templates).unwrap().flatten() {
        files.extend(files_under(
            &template.path().join(".github/workflows"),
            &["yml"],
        ));
    }
    let mut problems = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if installs_pypi_toolhost(line) {
                problems.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert_no_problems("installs of `toolhost` from PyPI", &problems);
}

/// Whether `line` installs the distribution `toolhost` (bare, or with a
/// version) with pip, pipx or uv.
fn installs_pypi_toolhost(line: &str) -> bool {
    ["pip install", "pipx install", "uv tool install"]
        .iter()
        .filter_map(|command| line.split_once(command).map(|(_, after)| after))
        .any(|after| {
            after
                .split(|c: char| c.is_whitespace() || c == '`' || c == ')')
                .any(|word| {
                    word.strip_prefix("toolhost").is_some_and(|rest| {
                        rest.is_empty() || rest.starts_with(['=', '>', '<', '~', '['])
                    })
                })
        })
}

// ---------------------------------------------------------- Rust examples

/// Every Rust example of README.md and docs/ compiles: none is `ignore`d,
/// and each file holding one is a doctest of toolhost-tests
/// (tests/src/lib.rs), which `cargo test --workspace` compiles.
#[test]
fn every_rust_example_in_the_docs_is_compiled() {
    let included = read("tests/src/lib.rs");
    let mut docs: Vec<PathBuf> = files_under(&root().join("docs"), &["md"]);
    docs.push(root().join("README.md"));
    let mut problems = Vec::new();
    for path in docs {
        let text = fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        let fences: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("```"))
            .filter(|info| info.starts_with("rust"))
            .collect();
        if fences.iter().any(|info| info.contains("ignore")) {
            problems.push(format!(
                "{name}: an `ignore`d Rust example; make it compile (`no_run` if it cannot run)"
            ));
        }
        let include = format!("include_str!(\"../../{name}\")");
        if !fences.is_empty() && !included.contains(&include) {
            problems.push(format!(
                "{name}: has Rust examples but tests/src/lib.rs does not {include}"
            ));
        }
    }
    assert_no_problems("Rust examples in the docs", &problems);
}
