//! The `toolhost` CLI end to end: output, `--json` and exit codes.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use toolhost_tests::wait_until;

use crate::{
    BULK_OUTPUT, CHAOS, FS_TOOLS, FUTURE_VERSION, HTTP_TOOLS, OTHER_WORLD, SEARCH_ONE, SEARCH_TWO,
    TEXT_TOOLS,
};

/// Runs `toolhost` with a private compile cache and output directory.
fn toolhost(args: &[&str], dirs: &tempfile::TempDir) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .env("TOOLHOST_CACHE_DIR", dirs.path().join("cache"))
        .arg("--output-dir")
        .arg(dirs.path().join("outputs"))
        .output()
        .expect("runs toolhost")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let dirs = tempfile::tempdir().unwrap();
    let out = toolhost(args, &dirs);
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn list_shows_every_tool_with_description_and_input_schema() {
    let (code, stdout, stderr) = run(&["list", TEXT_TOOLS]);
    assert_eq!(code, 0, "{stderr}");
    for tool in ["echo", "word_count", "regex_search"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(tool) && l.contains("text_tools")),
            "{tool}:\n{stdout}"
        );
    }
    assert!(stdout.contains(r#"input: {"#), "{stdout}");
    assert!(stdout.contains(r#""message""#), "{stdout}");

    let (code, stdout, _) = run(&["list", "--json", TEXT_TOOLS]);
    assert_eq!(code, 0);
    let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3);
    assert_eq!(rows[0]["name"], "echo");
    assert_eq!(
        rows[0]["input_schema"]["properties"]["message"]["type"],
        "string"
    );
    assert!(!rows[0]["description"].as_str().unwrap().is_empty());
}

#[test]
fn list_shows_which_plugin_wins_and_which_is_shadowed() {
    let (code, stdout, stderr) = run(&["list", SEARCH_ONE, SEARCH_TWO]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("search")).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].contains("search_two") && !lines[0].contains("(shadowed)"),
        "{stdout}"
    );
    assert!(
        lines[1].contains("search_one") && lines[1].contains("(shadowed)"),
        "{stdout}"
    );
}

#[test]
fn call_prints_the_content_and_exits_zero() {
    let (code, stdout, stderr) =
        run(&["call", TEXT_TOOLS, "echo", "--input", r#"{"message":"hi"}"#]);
    assert_eq!((code, stdout.as_str()), (0, "hi\n"), "{stderr}");

    let (code, stdout, _) = run(&[
        "call",
        "--json",
        TEXT_TOOLS,
        "echo",
        "--input",
        r#"{"message":"hi"}"#,
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"], serde_json::json!({"message": "hi"}));
    assert_eq!(v["content"][0]["text"], "hi");
    assert!(v["usage"]["fuel_used"].as_u64().unwrap() > 0);
}

#[test]
fn call_reads_input_from_stdin() {
    let dirs = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["call", TEXT_TOOLS, "word_count", "--input", "-", "--json"])
        .env("TOOLHOST_CACHE_DIR", dirs.path().join("cache"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"text":"one two\nthree"}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["output"]["words"], 3);
    assert_eq!(v["output"]["lines"], 2);
}

#[test]
fn invalid_input_exits_one_naming_the_json_path() {
    let (code, stdout, stderr) = run(&["call", TEXT_TOOLS, "echo", "--input", r#"{"message":42}"#]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stderr.contains("/message"), "{stderr}");
    assert!(stderr.contains("call the tool again"), "{stderr}");

    let (code, stdout, _) = run(&["call", "--json", TEXT_TOOLS, "echo", "--input", "{oops"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (v["status"].as_str(), v["kind"].as_str()),
        (Some("error"), Some("malformed_input"))
    );
}

#[test]
fn bad_plugin_files_are_one_line_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.wasm");
    std::fs::write(&text, "hello").unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let empty_component = dir.path().join("empty.wasm");
    std::fs::write(&empty_component, b"\0asm\x0d\0\x01\0").unwrap();
    let missing = dir.path().join("missing.wasm");
    let cases = [
        (missing.as_path(), "cannot read plugin"),
        (text.as_path(), "is not a WebAssembly file"),
        (
            core.as_path(),
            "is a core WebAssembly module, not a component",
        ),
        (empty_component.as_path(), "is not a Toolhost plugin"),
        (Path::new(OTHER_WORLD), "is not a Toolhost plugin"),
        (
            Path::new(FUTURE_VERSION),
            "was built for toolhost:plugin/plugin@0.2.0",
        ),
    ];
    for (path, expected) in cases {
        let (code, stdout, stderr) = run(&["list", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{}: {stderr}", path.display());
        assert!(stdout.is_empty());
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(expected),
            "{stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("backtrace"),
            "{stderr}"
        );
    }
    let (code, _, stderr) = run(&["call", TEXT_TOOLS]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn serve_refuses_workers_out_of_range_as_usage() {
    for workers in ["0", "257", "many"] {
        let (code, _, stderr) = run(&["serve", TEXT_TOOLS, "--workers", workers]);
        assert_eq!(code, 2, "--workers {workers}: {stderr}");
        assert!(stderr.contains("--workers"), "names the flag: {stderr}");
    }
}

#[test]
fn an_infinite_loop_with_a_timeout_exits_three() {
    let (code, _, stderr) = run(&["call", CHAOS, "spin_forever", "--timeout", "200ms"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("interrupted: deadline exceeded"),
        "{stderr}"
    );
    let (code, stdout, _) = run(&[
        "call",
        "--json",
        CHAOS,
        "spin_forever",
        "--fuel",
        "10000000",
    ]);
    assert_eq!(code, 3);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (v["status"].as_str(), v["reason"].as_str()),
        (Some("interrupted"), Some("fuel"))
    );
}

#[test]
fn a_memory_bomb_exits_four_naming_the_memory_limit() {
    let (code, _, stderr) = run(&[
        "call",
        CHAOS,
        "allocate",
        "--input",
        r#"{"mib":64}"#,
        "--memory",
        "16MiB",
    ]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("memory limit of 16 MiB"), "{stderr}");
    assert!(stderr.contains("chaos"), "{stderr}");
    let (code, _, stderr) = run(&["call", CHAOS, "panic"]);
    assert_eq!(code, 4);
    assert!(stderr.contains("chaos: deliberate panic"), "{stderr}");
}

#[test]
fn big_output_is_previewed_and_retained_byte_for_byte() {
    let dirs = tempfile::tempdir().unwrap();
    let out = toolhost(
        &[
            "call",
            "--json",
            BULK_OUTPUT,
            "generate",
            "--input",
            r#"{"bytes":10000000}"#,
        ],
        &dirs,
    );
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let preview = v["content"][0]["text"].as_str().unwrap();
    assert!(preview.len() <= 51_200);
    assert!(
        v["retained"][0].get("path").is_none(),
        "no managed path: {v}"
    );
    let reference = v["retained"][0]["reference"].as_str().unwrap();
    assert!(preview.contains(reference));
    // The operator reads it back from the same store by its reference.
    let read = toolhost(&["output", reference], &dirs);
    assert_eq!(read.status.code(), Some(0));
    let full = String::from_utf8(read.stdout).unwrap();
    assert_eq!(full.len(), 10_000_000);
    let head = preview.split("[... ").next().unwrap();
    assert!(full.starts_with(head));
}

#[test]
fn compile_fills_the_cache_and_the_second_load_uses_it() {
    let dirs = tempfile::tempdir().unwrap();
    let first = toolhost(&["compile", TEXT_TOOLS, CHAOS], &dirs);
    assert_eq!(first.status.code(), Some(0));
    let stdout = String::from_utf8(first.stdout).unwrap();
    assert_eq!(stdout.matches("compiled").count(), 2, "{stdout}");
    let second = toolhost(&["compile", "--json", TEXT_TOOLS, CHAOS], &dirs);
    let v: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .all(|r| r["from_cache"] == true),
        "{v}"
    );
    // A corrupt entry is detected and rebuilt, never trusted.
    for entry in std::fs::read_dir(dirs.path().join("cache")).unwrap() {
        let path = entry.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n / 2] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
    }
    let third = toolhost(&["compile", "--json", TEXT_TOOLS], &dirs);
    let v: serde_json::Value = serde_json::from_slice(&third.stdout).unwrap();
    assert_eq!(v[0]["from_cache"], false);
    let (code, stdout, _) = run(&["call", TEXT_TOOLS, "echo", "--input", r#"{"message":"ok"}"#]);
    assert_eq!((code, stdout.as_str()), (0, "ok\n"));
}

#[test]
fn writes_needing_permission_are_denied_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let grant = format!("{}::/work", dir.path().display());
    let input = r#"{"path":"/work/out.txt","content":"data"}"#;
    let (code, _, stderr) = run(&[
        "call",
        FS_TOOLS,
        "write_file",
        "--input",
        input,
        "--dir-rw",
        &grant,
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("Permission denied: edit /work/out.txt"),
        "{stderr}"
    );
    assert!(!dir.path().join("out.txt").exists());
    let (code, _, stderr) = run(&[
        "call",
        FS_TOOLS,
        "write_file",
        "--input",
        input,
        "--dir-rw",
        &grant,
        "--allow",
        "edit:/work/*",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "data"
    );
    std::fs::remove_file(dir.path().join("out.txt")).unwrap();
    let (code, _, stderr) = run(&[
        "call",
        FS_TOOLS,
        "write_file",
        "--input",
        input,
        "--dir-rw",
        &grant,
        "--yes",
    ]);
    assert_eq!(code, 0, "{stderr}");
    // A read-only grant refuses the write even when allowed.
    let ro = format!("{}::/work", dir.path().display());
    let (code, _, _) = run(&[
        "call",
        FS_TOOLS,
        "write_file",
        "--input",
        input,
        "--dir",
        &ro,
        "--yes",
    ]);
    assert_eq!(code, 1);
}

/// The example plugins' manifests, relative to the workspace root.
fn example_manifests() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    [
        "text-tools",
        "bulk-output",
        "chaos",
        "fs-tools",
        "fixtures/search-one",
        "fixtures/search-two",
    ]
    .iter()
    .map(|p| root.join("example-plugins").join(p).join("toolhost.toml"))
    .collect()
}

#[test]
fn check_passes_on_every_example_plugin() {
    let manifests = example_manifests();
    let args: Vec<&str> = std::iter::once("check")
        .chain(manifests.iter().map(|m| m.to_str().unwrap()))
        .collect();
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert!(
        stdout.contains("ok   text-tools: echo returns the message"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with(" passed, 0 failed"), "{stdout}");
}

#[test]
fn check_fails_clearly_on_a_sample_expecting_the_wrong_status() {
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples.toml");
    std::fs::write(
        &samples,
        "[[sample]]\nname = \"echo is wrongly expected to fail\"\ntool = \"echo\"\ninput = { message = \"hi\" }\nstatus = \"error\"\n\n[[sample]]\nname = \"echo output\"\ntool = \"echo\"\ninput = { message = \"hi\" }\nstatus = \"completed\"\noutput = { message = \"bye\" }\n",
    )
    .unwrap();
    let manifest = dir.path().join("toolhost.toml");
    std::fs::write(
        &manifest,
        format!("path = {TEXT_TOOLS:?}\nsamples = \"samples.toml\"\n"),
    )
    .unwrap();
    let (code, stdout, _) = run(&["check", manifest.to_str().unwrap()]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("FAIL text_tools: echo is wrongly expected to fail: expected status error, got completed"),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"FAIL text_tools: echo output: expected output {"message":"bye"}, got {"message":"hi"}"#),
        "{stdout}"
    );
    assert!(stdout.contains("1 passed, 2 failed"), "{stdout}");
}

/// The `testcase` elements of a JUnit report: name and failure message.
fn junit_cases(xml: &str) -> Vec<(String, Option<String>)> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut cases: Vec<(String, Option<String>)> = Vec::new();
    loop {
        match reader.read_event().expect("the report is well-formed XML") {
            Event::Start(e) | Event::Empty(e) if e.name().as_ref() == b"testcase" => {
                let name = e.try_get_attribute("name").unwrap().unwrap();
                cases.push((name.unescape_value().unwrap().into_owned(), None));
            }
            Event::Start(e) if e.name().as_ref() == b"failure" => {
                let message = e.try_get_attribute("message").unwrap().unwrap();
                cases.last_mut().unwrap().1 = Some(message.unescape_value().unwrap().into_owned());
            }
            Event::Eof => return cases,
            _ => {}
        }
    }
}

#[test]
fn check_compares_numbers_by_value_and_writes_a_junit_report() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("samples.toml"),
        concat!(
            "[[sample]]\nname = \"counts as floats\"\ntool = \"word_count\"\n",
            "input = { text = \"one two\\nthree\" }\nstatus = \"completed\"\n",
            "output = { words = 3.0, lines = 2, bytes = 13.0 }\n\n",
            "[[sample]]\nname = \"a wrong count\"\ntool = \"word_count\"\n",
            "input = { text = \"one\" }\nstatus = \"completed\"\n",
            "output = { words = 1.5, lines = 1, bytes = 3 }\n\n",
        ),
    )
    .unwrap();
    let manifest = dir.path().join("toolhost.toml");
    std::fs::write(
        &manifest,
        format!("path = {TEXT_TOOLS:?}\nsamples = \"samples.toml\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("chaos-samples.toml"),
        concat!(
            "[[sample]]\nname = \"guest text with a control character\"\ntool = \"fail\"\n",
            "input = { message = \"\\u001b[31mred\" }\nstatus = \"completed\"\n",
        ),
    )
    .unwrap();
    let chaos = dir.path().join("chaos.toml");
    std::fs::write(
        &chaos,
        format!("path = {CHAOS:?}\nsamples = \"chaos-samples.toml\"\n"),
    )
    .unwrap();
    let report = dir.path().join("reports/junit.xml");
    std::fs::create_dir(dir.path().join("reports")).unwrap();
    let (code, stdout, _) = run(&[
        "check",
        manifest.to_str().unwrap(),
        chaos.to_str().unwrap(),
        "--junit",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("ok   text_tools: counts as floats"),
        "{stdout}"
    );
    assert!(stdout.contains("3 passed, 2 failed"), "{stdout}");

    let xml = std::fs::read_to_string(&report).unwrap();
    assert!(
        xml.contains(r#"<testsuite name="text_tools" tests="3" failures="1""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<testsuites name="toolhost check" tests="5" failures="2""#),
        "{xml}"
    );
    let cases = junit_cases(&xml);
    let names: Vec<&str> = cases.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "activate",
            "counts as floats",
            "a wrong count",
            "activate",
            "guest text with a control character"
        ]
    );
    assert_eq!(cases[0].1, None);
    assert_eq!(cases[1].1, None);
    assert_eq!(
        cases[2].1.as_deref(),
        Some(
            r#"expected output {"bytes":3,"lines":1,"words":1.5}, got {"bytes":3,"lines":1,"words":1}"#
        )
    );
    let control = cases[4].1.as_deref().unwrap();
    assert!(control.contains("\u{FFFD}[31mred"), "{control}");
}

#[test]
fn config_flag_reaches_activate_and_calls_inline_or_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let output = |stdout: &str| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(stdout).unwrap()["output"].clone()
    };
    let (code, stdout, stderr) = run(&[
        "call",
        CHAOS,
        "read_config",
        "--json",
        "--config",
        r#"{"volume": 3}"#,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        output(&stdout),
        serde_json::json!({"config": {"volume": 3}})
    );

    let file = dir.path().join("config.json");
    std::fs::write(&file, r#"{"mode": "from-file"}"#).unwrap();
    let at_file = format!("@{}", file.display());
    let (code, stdout, stderr) =
        run(&["call", CHAOS, "read_config", "--json", "--config", &at_file]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        output(&stdout),
        serde_json::json!({"config": {"mode": "from-file"}})
    );

    let (code, _, stderr) = run(&["list", CHAOS, "--config", r#"{"volume": 3}"#]);
    assert_eq!(code, 0, "{stderr}");
    for (bad, why) in [
        ("[1, 2]", "is JSON but not an object"),
        ("{volume", "is not valid JSON"),
        ("@/no/such/config.json", "cannot read /no/such/config.json"),
    ] {
        let (code, _, stderr) = run(&["call", CHAOS, "read_config", "--config", bad]);
        assert_eq!(code, 2, "{bad}: {stderr}");
        assert!(stderr.contains(why), "{bad}: {stderr}");
    }
}

#[test]
fn manifests_with_unknown_keys_are_usage_errors_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("toolhost.toml");
    std::fs::write(
        &manifest,
        format!("path = {TEXT_TOOLS:?}\n[limits]\ntimeuot = \"1s\"\n"),
    )
    .unwrap();
    let (code, _, stderr) = run(&["list", manifest.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("timeuot") && stderr.contains("line 3"),
        "{stderr}"
    );
}

#[test]
fn progress_is_printed_as_json_lines_with_json() {
    let (code, stdout, stderr) = run(&[
        "call",
        "--json",
        BULK_OUTPUT,
        "generate",
        "--input",
        r#"{"bytes":3000000}"#,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let progress: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(progress.len() >= 2, "{stderr}");
    assert!(
        progress
            .iter()
            .all(|p| p["event"] == "progress" && p["tool"] == "generate")
    );
    let outcome: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(outcome["status"], "completed");
}

#[test]
fn verbose_shows_captured_guest_output_and_env_grants_reach_the_guest() {
    let input = r#"{"stdout":"out-text","stderr":"err-text"}"#;
    let (code, stdout, stderr) = run(&["call", CHAOS, "print", "--input", input, "--verbose"]);
    assert_eq!((code, stdout.as_str()), (0, "printed\n"), "{stderr}");
    assert!(
        stderr.contains("--- guest stdout ---\nout-text"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--- guest stderr ---\nerr-text"),
        "{stderr}"
    );
    assert!(stderr.contains("usage: fuel "), "{stderr}");
    // Without --verbose the guest's output stays out of the way.
    let (_, _, stderr) = run(&["call", CHAOS, "print", "--input", input]);
    assert!(!stderr.contains("out-text"), "{stderr}");

    let (code, stdout, _) = run(&[
        "call",
        "--json",
        CHAOS,
        "read_env",
        "--input",
        r#"{"name":"MODE"}"#,
        "--env",
        "MODE=test",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["output"]["value"], "test");
    let (_, stdout, _) = run(&[
        "call",
        "--json",
        CHAOS,
        "read_env",
        "--input",
        r#"{"name":"MODE"}"#,
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["output"]["value"], serde_json::Value::Null);
}

/// Spawns `toolhost` with stdout a pipe whose read end is closed at once.
fn with_stdout_closed(args: &[&str]) -> Output {
    let dirs = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .env("TOOLHOST_CACHE_DIR", dirs.path().join("cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

#[test]
fn a_reader_that_goes_away_ends_list_and_call_quietly() {
    let echo = r#"{"message":"hi"}"#;
    for args in [
        &["list", TEXT_TOOLS][..],
        &["list", "--json", TEXT_TOOLS],
        &["call", TEXT_TOOLS, "echo", "--input", echo],
        &["call", "--json", TEXT_TOOLS, "echo", "--input", echo],
    ] {
        let out = with_stdout_closed(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// Whether `text` holds a control character a terminal would act on.
fn has_raw_control(text: &str) -> bool {
    text.chars().any(|c| {
        (c.is_control() && c != '\n' && c != '\t') || ('\u{202a}'..='\u{202e}').contains(&c)
    })
}

#[test]
fn r30_guest_text_on_stderr_is_escaped() {
    let input = r#"{"message":"\u001b[2Jwiped\r\u202eevil"}"#;
    let (code, _, stderr) = run(&["call", CHAOS, "fail", "--input", input]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(r"\u{1b}[2Jwiped\u{d}\u{202e}evil"),
        "{stderr}"
    );
    assert!(!has_raw_control(&stderr), "{stderr:?}");

    let input = r#"{"stdout":"\u001b]0;title\u0007out","stderr":"err\r\u001b[2K"}"#;
    let (code, _, stderr) = run(&["call", CHAOS, "print", "--input", input, "--verbose"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains(r"\u{1b}]0;title\u{7}out"), "{stderr}");
    assert!(stderr.contains(r"err\u{d}\u{1b}[2K"), "{stderr}");
    assert!(!has_raw_control(&stderr), "{stderr:?}");
}

#[test]
fn r30_content_piped_to_a_file_stays_byte_exact() {
    let input = r#"{"message":"a\u001b[31mb\r\tc"}"#;
    let (code, stdout, stderr) = run(&["call", TEXT_TOOLS, "echo", "--input", input]);
    assert_eq!(
        (code, stdout.as_str()),
        (0, "a\x1b[31mb\r\tc\n"),
        "{stderr}"
    );
}

/// A manifest for text-tools in a fresh directory, with `grants` appended.
fn manifest_granting(grants: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let manifest = dir.path().join("toolhost.toml");
    std::fs::write(
        &manifest,
        format!("path = {TEXT_TOOLS:?}\nname = \"granted\"\n[grants]\n{grants}\n"),
    )
    .unwrap();
    (dir, manifest.to_str().unwrap().to_owned())
}

#[test]
fn manifest_grants_beyond_its_directory_need_yes_when_not_on_a_terminal() {
    for (grants, shown) in [
        (
            r#"dirs = [{ host = "/", guest = "/host" }]"#,
            "read-only access to / as /host",
        ),
        (
            r#"dirs = [{ host = "..", guest = "/up" }]"#,
            "as /up (outside the manifest's directory)",
        ),
        (
            r#"dirs = [{ host = "data", guest = "/data", writable = true }]"#,
            "read-write access to ",
        ),
        (
            r#"env = ["HOME"]"#,
            "environment variable HOME with this machine's value",
        ),
    ] {
        let (_dir, manifest) = manifest_granting(grants);
        let (code, stdout, stderr) = run(&["list", &manifest]);
        assert_eq!(code, 2, "{grants}: {stdout}{stderr}");
        assert!(stdout.is_empty(), "{grants}: {stdout}");
        let error = stderr.lines().last().unwrap();
        assert!(error.starts_with("error: manifest "), "{grants}: {stderr}");
        for needle in [manifest.as_str(), "--yes", "terminal", shown] {
            assert!(error.contains(needle), "{grants}: {needle} in {stderr}");
        }

        let (code, stdout, stderr) = run(&["list", "--yes", &manifest]);
        assert_eq!(code, 0, "{grants}: {stderr}");
        assert!(stdout.contains("echo"), "{stdout}");
        assert!(
            stderr.contains(&format!("{manifest} grants plugin granted: "))
                && stderr.contains(shown),
            "{grants}: {stderr}"
        );
    }
}

#[test]
fn manifest_grants_inside_its_directory_are_shown_and_need_no_yes() {
    let (dir, manifest) = manifest_granting(
        r#"dirs = [{ host = "data", guest = "/data" }]
env = [{ name = "MODE", value = "test" }]"#,
    );
    let (code, stdout, stderr) = run(&["list", &manifest]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("echo"), "{stdout}");
    let data = dir.path().join("data").canonicalize().unwrap();
    assert!(
        stderr.contains(&format!(
            "read-only access to {} as /data\n",
            data.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("environment variable MODE (value set by the manifest)"),
        "{stderr}"
    );
    // The user's own flags grant without asking, even outside.
    let (code, _, stderr) = run(&["list", TEXT_TOOLS, "--dir", "/::/host", "--dir-rw", "/tmp"]);
    assert_eq!(code, 0, "{stderr}");
}

/// Runs `toolhost` and fails the test if it has not exited within a minute.
fn run_within_a_minute(args: &[&str]) -> (i32, String) {
    let dirs = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .env("TOOLHOST_CACHE_DIR", dirs.path().join("cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let exited = wait_until(Duration::from_secs(60), || {
        child.try_wait().unwrap().is_some()
    });
    if !exited {
        child.kill().unwrap();
        let _ = child.wait();
        panic!("toolhost {args:?} did not exit within a minute");
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn r31_check_refuses_samples_that_are_not_a_small_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a-directory")).unwrap();
    let fifo = dir.path().join("a-fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let mut huge = "#".repeat(1024 * 1024);
    huge.push_str("\n[[sample]]\n");
    std::fs::write(dir.path().join("huge.toml"), huge).unwrap();
    for (samples, why) in [
        ("a-directory", "is not a regular file"),
        ("a-fifo", "is not a regular file"),
        ("huge.toml", "is larger than 1024 KiB"),
    ] {
        let manifest = dir.path().join(format!("{samples}.toml"));
        std::fs::write(
            &manifest,
            format!("path = {TEXT_TOOLS:?}\nsamples = {samples:?}\n"),
        )
        .unwrap();
        let (code, stdout) = run_within_a_minute(&["check", manifest.to_str().unwrap()]);
        assert_eq!(code, 1, "{samples}: {stdout}");
        let fail = stdout
            .lines()
            .find(|l| l.starts_with("FAIL"))
            .unwrap_or_default();
        assert!(
            fail.contains(&format!(
                "cannot read samples {}",
                dir.path().join(samples).display()
            )) && fail.contains(why),
            "{samples}: {stdout}"
        );
    }
}

#[test]
fn r36_allow_http_grants_an_origin_and_a_manifest_http_grant_needs_yes() {
    use std::io::{Read as _, Write as _};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(2) {
            let mut stream = stream.unwrap();
            let mut head = [0u8; 1024];
            let _ = stream.read(&mut head);
            let body = r#"{"via": "cli"}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let url = format!(r#"{{"url": "http://{addr}/"}}"#);
    let grant = format!("http://{addr}/*");
    let (code, stdout, stderr) =
        run(&["call", "--json", HTTP_TOOLS, "fetch_json", "--input", &url]);
    assert_eq!(code, 1, "no grant, no request: {stdout}{stderr}");
    let (code, stdout, stderr) = run(&[
        "call",
        "--json",
        HTTP_TOOLS,
        "fetch_json",
        "--input",
        &url,
        "--allow-http",
        &grant,
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["output"]["json"]["via"], "cli");
    assert_eq!(v["usage"]["http_requests"], 1);

    // The same grant from a manifest is shown and needs the user's yes.
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("toolhost.toml");
    std::fs::write(
        &manifest,
        format!("path = {HTTP_TOOLS:?}\n[grants]\nhttp = [{grant:?}]\n"),
    )
    .unwrap();
    let manifest = manifest.to_str().unwrap();
    let (code, _, stderr) = run(&["call", manifest, "fetch_json", "--input", &url]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("HTTP requests to") && stderr.contains("--yes"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run(&["call", manifest, "fetch_json", "--input", &url, "--yes"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
}

/// `toolhost call TEXT_TOOLS echo` with `--max-instances slots`.
fn echo_with_slots(slots: &str) -> (i32, String, String) {
    let input = r#"{"message": "hi"}"#;
    run(&[
        "call",
        TEXT_TOOLS,
        "echo",
        "--input",
        input,
        "--max-instances",
        slots,
    ])
}

#[test]
fn max_instances_sizes_the_instance_pool_and_a_full_pool_names_the_flag() {
    let (code, stdout, stderr) = echo_with_slots("2");
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
    // One slot: the activation holds it, so the call finds none free.
    let (code, _, stderr) = echo_with_slots("1");
    assert_ne!(code, 0);
    assert!(stderr.contains("--max-instances"), "{stderr}");
    let (code, _, stderr) = echo_with_slots("0");
    assert_eq!(code, 2, "{stderr}");
}

/// A refused request reaches the tool as HTTP-request-denied every time,
/// never as its body's stream having broken (the guest still writes its
/// body while the host refuses).
#[test]
fn r36_a_refused_webfetch_is_http_request_denied_every_time() {
    let dirs = tempfile::tempdir().unwrap();
    let root = dirs.path().join("root");
    std::fs::create_dir(&root).unwrap();
    for _ in 0..8 {
        let out = toolhost(
            &[
                "call",
                "--std",
                root.to_str().unwrap(),
                "webfetch",
                "--yes",
                "--input",
                r#"{"url": "http://127.0.0.1:9/not-granted"}"#,
            ],
            &dirs,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("HttpRequestDenied"), "{stderr}");
    }
}
