//! The standard toolset against ripgrep (issue 28): `grep` and `glob` over a
//! generated tree of 50,000 files / 500 MB, and `rg` (Debian's `ripgrep`)
//! on the same tree, as ratios measured in one run; and `read` of a 100 MB
//! file's last page, against `tail`. Each tool call is a settled call (a
//! fresh instance, permission rules, bounding), its compile excluded.
//! `cargo bench -p toolhost-cli --bench std_tools`.
//!
//! The tree is generated once into `target/tmp/std-tools-bench` (about
//! 600 MB) and reused; delete it when done.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::config::{DirGrant, Grants, PluginOptions};
use toolhost::permission::{Effect, Rule, Rules};
use toolhost::{BudgetOverrides, Call, Host, Outcome, Settlement, Snapshot};
use toolhost_tests::context;

toolhost_tests::plugin_paths!();

/// Directories of the tree, and files in each: 50,000 files.
const DIRS: usize = 500;
const FILES_PER_DIR: usize = 100;
/// Lines per file, about 85 bytes each: about 10 KB a file, 500 MB in all.
const LINES_PER_FILE: usize = 119;
/// Lines of the big file, about 46 bytes each: about 100 MB.
const BIG_LINES: usize = 2_200_000;
/// Runs of each measurement; the median is reported.
const RUNS: usize = 3;

/// A deterministic word stream (xorshift), so every run sees one tree.
struct Words(u64);

impl Words {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn word(&mut self) -> &'static str {
        const WORDS: &[&str] = &[
            "let", "value", "return", "match", "self", "config", "error", "result", "string",
            "vector", "index", "buffer", "handle", "option", "future", "stream", "parse", "render",
            "update", "client",
        ];
        WORDS[(self.next() % WORDS.len() as u64) as usize]
    }
}

/// One line of generated source (about 100 bytes); one line in 5,000
/// carries `needle_N`, one in 7 is a function header.
fn line(words: &mut Words, out: &mut String) {
    let n = words.next();
    if n.is_multiple_of(5_000) {
        let _ = write!(out, "    // needle_{} marks this line", n % 977);
    } else if n.is_multiple_of(7) {
        let _ = write!(
            out,
            "fn {}_{}() -> {} {{",
            words.word(),
            n % 1000,
            words.word()
        );
    } else {
        let start = out.len();
        out.push_str("   ");
        while out.len() - start < 90 {
            out.push(' ');
            out.push_str(words.word());
        }
    }
    out.push('\n');
}

/// The tree (generated if missing) and the big file.
fn tree(root: &Path) -> (PathBuf, PathBuf) {
    let tree = root.join("tree");
    let big = root.join("big/big.log");
    // Named after the sizes, so a change of them makes a new tree.
    let done = root.join(format!(
        "generated-{DIRS}-{FILES_PER_DIR}-{LINES_PER_FILE}-{BIG_LINES}"
    ));
    if done.exists() {
        return (tree, big);
    }
    let started = Instant::now();
    let _ = fs::remove_dir_all(root);
    let mut words = Words(0x9e37_79b9_7f4a_7c15);
    // Files ignored by .gitignore: both tools must skip them.
    fs::create_dir_all(tree.join("ignored")).unwrap();
    fs::write(tree.join(".gitignore"), "ignored/\n").unwrap();
    for i in 0..100 {
        fs::write(tree.join(format!("ignored/{i}.rs")), "needle_0 ignored\n").unwrap();
    }
    for d in 0..DIRS {
        let dir = tree.join(format!("pkg{:03}/src/mod{}", d, d % 7));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let ext = ["rs", "ts", "py", "go", "md"][f % 5];
            let mut text = String::with_capacity(LINES_PER_FILE * 100);
            for _ in 0..LINES_PER_FILE {
                line(&mut words, &mut text);
            }
            fs::write(dir.join(format!("file{f:03}.{ext}")), text).unwrap();
        }
    }
    fs::create_dir_all(big.parent().unwrap()).unwrap();
    let mut text = String::with_capacity(BIG_LINES * 100);
    for i in 0..BIG_LINES {
        let _ = writeln!(
            text,
            "{i:07} request handled in {} ms by worker {}",
            words.next() % 500,
            words.next() % 16
        );
    }
    fs::write(&big, text).unwrap();
    fs::write(&done, "").unwrap();
    eprintln!(
        "generated the tree in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    (tree, big)
}

fn du(path: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut bytes = 0;
    for entry in fs::read_dir(path).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            let (f, b) = du(&entry.path());
            files += f;
            bytes += b;
        } else {
            files += 1;
            bytes += meta.len();
        }
    }
    (files, bytes)
}

/// The standard tools over `dir` as `--std` loads them, with a budget no
/// measured call reaches.
async fn load(host: &Host, dir: &Path) -> (Snapshot, Vec<toolhost::Activation>) {
    let location = host.location(dir);
    let options = PluginOptions {
        config: json!({ "root": "/workspace" }),
        grants: Grants {
            dirs: vec![DirGrant {
                host: dir.to_owned(),
                guest: Some("/workspace".into()),
                writable: false,
            }],
            ..Grants::default()
        },
        rules: Rules(
            ["read", "glob", "grep", "list"]
                .iter()
                .map(|a| Rule::new(*a, "*", Effect::Allow))
                .collect(),
        ),
        ..PluginOptions::default()
    };
    let activation = location.load(STD_READ, &options).await.unwrap();
    (location.snapshot(), vec![activation])
}

/// A generous budget: the measurement is the time, not a limit.
fn generous() -> BudgetOverrides {
    BudgetOverrides {
        fuel: Some(u64::MAX / 4),
        timeout: Some(Duration::from_secs(1200)),
        memory: Some(1 << 30),
    }
}

/// Settles `tool` and returns the settlement and its wall time.
async fn settle(snapshot: &Snapshot, tool: &str, input: Value) -> (Settlement, Duration) {
    let call = Call::new(tool, input.to_string(), context(tool)).with_overrides(generous());
    let started = Instant::now();
    let s = snapshot.settle(call).await;
    let took = started.elapsed();
    assert!(
        matches!(s.outcome, Outcome::Completed(_)),
        "{tool}: {:?}",
        s.outcome
    );
    (s, took)
}

/// Runs `command`, returning its stdout's line count and wall time.
fn run(command: &mut Command) -> (usize, Duration) {
    let started = Instant::now();
    let out = command.output().unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "{command:?}: {out:?}"
    );
    (memchr_lines(&out.stdout), took)
}

fn memchr_lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let root = toolhost_tests::repo().join("target/tmp/std-tools-bench");
    let (tree, big) = tree(&root);
    let (files, bytes) = du(&tree);
    println!(
        "tree: {files} files, {:.0} MB; big file {:.0} MB; ripgrep: {}",
        bytes as f64 / 1e6,
        fs::metadata(&big).unwrap().len() as f64 / 1e6,
        String::from_utf8_lossy(&Command::new("rg").arg("--version").output().unwrap().stdout)
            .lines()
            .next()
            .unwrap_or("?")
    );
    let state = tempfile::tempdir().unwrap();
    let host = Host::builder().state_dir(state.path()).build().unwrap();
    let (snapshot, _held) = load(&host, &tree).await;

    // (what, the tool's call, ripgrep's arguments)
    let cases: Vec<(&str, &str, Value, Vec<&str>)> = vec![
        (
            "grep, rare literal (needle_1)",
            "grep",
            json!({"pattern": "needle_1 ", "literal": true}),
            vec!["-n", "-F", "needle_1 "],
        ),
        (
            "grep, regex on every 7th line",
            "grep",
            json!({"pattern": "fn [a-z]+_[0-9]+\\(\\)"}),
            vec!["-n", "fn [a-z]+_[0-9]+\\(\\)"],
        ),
        (
            "glob **/*.rs (10,000 files)",
            "glob",
            json!({"pattern": "**/*.rs"}),
            vec!["--files", "-g", "*.rs"],
        ),
    ];
    println!(
        "\n| operation | std tool (median of {RUNS}) | ripgrep | ratio | tool's result | fuel | peak memory |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (what, tool, input, rg_args) in &cases {
        // Warm the page cache and the instance pool once.
        settle(&snapshot, tool, input.clone()).await;
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        let mut last = None;
        let mut rg_lines = 0;
        for _ in 0..RUNS {
            let (s, took) = settle(&snapshot, tool, input.clone()).await;
            ours.push(took);
            last = Some(s);
            let (lines, took) = run(Command::new("rg").args(rg_args).arg(".").current_dir(&tree));
            theirs.push(took);
            rg_lines = lines;
        }
        let s = last.unwrap();
        let meta = match &s.outcome {
            Outcome::Completed(c) => Value::Object(c.metadata.clone().unwrap_or_default()),
            _ => Value::Null,
        };
        let count = meta
            .get("matches")
            .or_else(|| meta.get("count"))
            .cloned()
            .unwrap_or_default();
        let (ours, theirs) = (median(ours), median(theirs));
        println!(
            "| {what} | {} | {} | {:.1}× | {count} (rg: {rg_lines} lines) | {:.2e} | {} MiB |",
            ms(ours),
            ms(theirs),
            ours.as_secs_f64() / theirs.as_secs_f64(),
            s.usage.fuel_used as f64,
            s.usage.peak_memory >> 20
        );
    }

    // read: the last page of the 100 MB file, against tail.
    let (big_snapshot, _big_held) = load(&host, big.parent().unwrap()).await;
    let input = json!({"path": "big.log", "offset": BIG_LINES - 1997});
    settle(&big_snapshot, "read", input.clone()).await;
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let (s, took) = settle(&big_snapshot, "read", input.clone()).await;
        ours.push(took);
        last = Some(s);
        let (_, took) = run(Command::new("tail").args(["-n", "1998"]).arg(&big));
        theirs.push(took);
    }
    let s = last.unwrap();
    let (ours, theirs) = (median(ours), median(theirs));
    println!(
        "| read, last page of the 100 MB file | {} | {} (tail -n 1998) | {:.1}× | {} lines shown | {:.2e} | {} MiB |",
        ms(ours),
        ms(theirs),
        ours.as_secs_f64() / theirs.as_secs_f64(),
        Value::Object(match &s.outcome {
            Outcome::Completed(c) => c.metadata.clone().unwrap_or_default(),
            _ => Default::default(),
        })["lines"],
        s.usage.fuel_used as f64,
        s.usage.peak_memory >> 20
    );
}
