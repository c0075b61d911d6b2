//! The standard toolset (`std-tools/`, issue 28): each tool's behaviour
//! against real files in temporary directories, through the real engine,
//! loaded as `toolhost --std` loads it (the directory granted at
//! `/workspace`, reads allowed by rule); and the CLI's `--std` flags.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::pin::Pin;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolhost::config::{DirGrant, Grants, HttpGrant, PluginOptions};
use toolhost::permission::{Approver, Effect, PermissionRequest, Reply, Rule, Rules};
use toolhost::{Activation, ContentPart, Host, Location, Settlement, Snapshot};
use toolhost_tests::{builder, completed, error_message, exited, names, settle, text};

use crate::{STD_EDIT, STD_READ};

/// The guest path of the granted directory, as `--std` maps it.
const ROOT: &str = "/workspace";

/// What an approver was asked: tool, action, resources, save patterns.
type Asked = (String, String, Vec<String>, Vec<String>);

/// Records every question and answers with `reply`.
struct Recording {
    reply: Reply,
    asked: Mutex<Vec<Asked>>,
}

impl Approver for Recording {
    fn ask<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        self.asked.lock().unwrap().push((
            request.tool.clone(),
            request.action.clone(),
            request.resources.clone(),
            request.save.clone(),
        ));
        Box::pin(async move { self.reply })
    }
}

/// The standard tools over a fresh directory.
struct Std {
    dir: tempfile::TempDir,
    approver: Arc<Recording>,
    _host: Host,
    _state: tempfile::TempDir,
    location: Location,
    _activations: Vec<Activation>,
}

/// Which rules the tools are loaded with.
enum Policy {
    /// `--std`'s: read, glob, grep and list allowed; the rest asks.
    Careful,
    /// None: every request reaches the approver.
    AskAll,
}

impl Std {
    /// The tools over a read-write directory, `--std`'s rules, and an
    /// approver that allows once.
    async fn new() -> Std {
        Std::with(true, Policy::Careful, Reply::Once, Vec::new()).await
    }

    async fn with(writable: bool, policy: Policy, reply: Reply, http: Vec<HttpGrant>) -> Std {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let approver = Arc::new(Recording {
            reply,
            asked: Mutex::new(Vec::new()),
        });
        let host = builder(&state).approver(approver.clone()).build().unwrap();
        let location = host.location(dir.path());
        let rules = match policy {
            Policy::Careful => Rules(
                ["read", "glob", "grep", "list"]
                    .iter()
                    .map(|a| Rule::new(*a, "*", Effect::Allow))
                    .collect(),
            ),
            Policy::AskAll => Rules::default(),
        };
        let options = PluginOptions {
            config: json!({ "root": ROOT }),
            grants: Grants {
                dirs: vec![DirGrant {
                    host: dir.path().to_owned(),
                    guest: Some(ROOT.to_owned()),
                    writable,
                }],
                http,
                ..Grants::default()
            },
            rules,
            ..PluginOptions::default()
        };
        let mut activations = Vec::new();
        for plugin in [STD_READ, STD_EDIT] {
            activations.push(location.load(plugin, &options).await.unwrap());
        }
        Std {
            dir,
            approver,
            _host: host,
            _state: state,
            location,
            _activations: activations,
        }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    fn put(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    fn get(&self, rel: &str) -> Vec<u8> {
        fs::read(self.path(rel)).unwrap()
    }

    fn snapshot(&self) -> Snapshot {
        self.location.snapshot()
    }

    async fn call(&self, tool: &str, input: Value) -> Settlement {
        settle(&self.snapshot(), tool, input).await
    }

    /// A completed call's text.
    async fn ok(&self, tool: &str, input: Value) -> String {
        let s = self.call(tool, input).await;
        completed(&s);
        text(&s)
    }

    /// A tool error's message.
    async fn err(&self, tool: &str, input: Value) -> String {
        let s = self.call(tool, input).await;
        error_message(&s).to_owned()
    }

    fn asked(&self) -> Vec<Asked> {
        std::mem::take(&mut *self.approver.asked.lock().unwrap())
    }
}

/// `n` with thousands separators, as the tools write counts.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    groups.join(",")
}

fn metadata(s: &Settlement) -> Value {
    Value::Object(completed(s).metadata.clone().unwrap_or_default())
}

#[tokio::test]
async fn std_tools_are_the_opencode_names() {
    let std = Std::new().await;
    assert_eq!(
        names(&std.snapshot()),
        [
            "apply_patch",
            "edit",
            "glob",
            "grep",
            "list",
            "read",
            "webfetch",
            "write"
        ]
    );
    let snapshot = std.snapshot();
    let schema = |name: &str| {
        snapshot
            .definitions()
            .iter()
            .find(|d| d.name == name)
            .unwrap()
            .input_schema
            .clone()
    };
    let props = |name: &str| {
        let mut keys: Vec<String> = schema(name)["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(props("read"), ["filePath", "limit", "offset"]);
    assert_eq!(props("write"), ["content", "filePath"]);
    assert_eq!(
        props("edit"),
        ["filePath", "newString", "oldString", "replaceAll"]
    );
    assert_eq!(props("apply_patch"), ["patchText"]);
    assert_eq!(props("glob"), ["hidden", "limit", "path", "pattern"]);
    assert_eq!(
        props("grep"),
        [
            "caseSensitive",
            "include",
            "limit",
            "literal",
            "path",
            "pattern"
        ]
    );
    assert_eq!(props("list"), ["ignore", "path"]);
    assert_eq!(props("webfetch"), ["format", "timeout", "url"]);
}

#[tokio::test]
async fn std_old_field_names_are_accepted_for_one_release() {
    let std = Std::new().await;
    std.put("a.txt", "one\n");
    assert_eq!(
        std.ok("read", json!({"path": "a.txt"})).await,
        "1: one\n\n(End of file: 1 lines.)"
    );
    std.ok(
        "edit",
        json!({"path": "a.txt", "oldString": "one", "newString": "two"}),
    )
    .await;
    std.ok(
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+three\n*** End Patch"}),
    )
    .await;
    std.ok("write", json!({"path": "b.txt", "content": "b\n"}))
        .await;
    assert_eq!(std.get("a.txt"), b"three\n");
    assert_eq!(std.get("b.txt"), b"b\n");
    // Neither name: the error names the new one.
    let message = std.err("read", json!({"offset": 1})).await;
    assert!(message.contains("missing field `filePath`"), "{message}");
}

#[tokio::test]
async fn std_read_numbers_lines_and_pages_with_what_is_left() {
    let std = Std::new().await;
    let lines: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
    std.put("big.txt", &lines);
    std.put("small.txt", "alpha\nbeta\n");

    assert_eq!(
        std.ok("read", json!({"filePath": "small.txt"})).await,
        "1: alpha\n2: beta\n\n(End of file: 2 lines.)"
    );
    // An absolute path under the root is the same file.
    assert_eq!(
        std.ok("read", json!({"filePath": "/workspace/small.txt"}))
            .await,
        "1: alpha\n2: beta\n\n(End of file: 2 lines.)"
    );

    // The default page: as many lines as fit in 2,000 lines with its note.
    let s = std.call("read", json!({"filePath": "big.txt"})).await;
    let page = text(&s);
    assert!(page.starts_with("1: line 1\n2: line 2\n"), "{page}");
    assert!(
        page.ends_with(
            "1998: line 1998\n\n(Showing lines 1-1998 of 5,000. Use offset=1999 to continue.)"
        ),
        "{}",
        &page[page.len() - 200..]
    );
    assert!(
        completed(&s).retained.is_empty(),
        "the page fits the host's bounds whole"
    );
    assert_eq!(metadata(&s)["totalLines"], 5000);

    // offset and limit page on; the last page ends the file.
    assert_eq!(
        std.ok(
            "read",
            json!({"filePath": "big.txt", "offset": 4999, "limit": 10})
        )
        .await,
        "4999: line 4999\n5000: line 5000\n\n(End of file: 5,000 lines.)"
    );
    assert_eq!(
        std.ok(
            "read",
            json!({"filePath": "big.txt", "offset": 10, "limit": 2})
        )
        .await,
        "10: line 10\n11: line 11\n\n(Showing lines 10-11 of 5,000. Use offset=12 to continue.)"
    );
    assert_eq!(
        std.err("read", json!({"filePath": "big.txt", "offset": 5001}))
            .await,
        "offset 5001 is past the end of `big.txt`, which has 5,000 lines."
    );

    // The 50 KiB bound: long lines fill the page before 2,000 lines do.
    let wide: String = (1..=100).map(|i| format!("{i:0>1000}\n")).collect();
    std.put("wide.txt", &wide);
    let page = std.ok("read", json!({"filePath": "wide.txt"})).await;
    assert!(page.len() <= 50 << 10, "{}", page.len());
    assert!(
        page.contains("of 100 (the page is full at 50 KiB). Use offset="),
        "{}",
        &page[page.len() - 200..]
    );

    // An overlong line is cut with a marker.
    std.put("minified.js", format!("{}\n", "x".repeat(5000)));
    let page = std.ok("read", json!({"filePath": "minified.js"})).await;
    assert!(
        page.starts_with(&format!(
            "1: {}… (line cut at 2000 of 5000 characters)\n",
            "x".repeat(2000)
        )),
        "{}",
        &page[..100]
    );

    std.put("empty.txt", "");
    assert_eq!(
        std.ok("read", json!({"filePath": "empty.txt"})).await,
        "`empty.txt` is empty."
    );
}

#[tokio::test]
async fn std_read_lists_a_directory_and_returns_images_as_media() {
    let std = Std::new().await;
    std.put("src/main.rs", "fn main() {}\n");
    std.put("src/lib/mod.rs", "\n");
    std.put("README.md", "# hi\n");
    assert_eq!(
        std.ok("read", json!({"filePath": "src"})).await,
        "lib/\nmain.rs\n\n(2 entries.)"
    );
    assert_eq!(
        std.ok("read", json!({"filePath": ".", "limit": 1})).await,
        "README.md\n\n(Showing entries 1-1 of 2. Use offset=2 to continue.)"
    );

    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRpretend-image".to_vec();
    std.put("shot.png", &png);
    let s = std.call("read", json!({"filePath": "shot.png"})).await;
    let parts = &completed(&s).content;
    assert_eq!(parts.len(), 2, "{parts:?}");
    match &parts[1] {
        ContentPart::Media {
            mime_type,
            data,
            name,
        } => {
            assert_eq!(mime_type, "image/png");
            assert_eq!(data, &png);
            assert_eq!(name.as_deref(), Some("shot.png"));
        }
        other => panic!("not media: {other:?}"),
    }
    std.put("doc.pdf", b"%PDF-1.7\n\0binary");
    let s = std.call("read", json!({"filePath": "doc.pdf"})).await;
    assert!(
        matches!(&completed(&s).content[1], ContentPart::Media { mime_type, .. } if mime_type == "application/pdf")
    );

    // Media over the 5 MiB cap, and other binary files, are refused.
    let mut huge = b"GIF89a".to_vec();
    huge.resize((5 << 20) + 1, 0);
    std.put("huge.gif", &huge);
    assert_eq!(
        std.err("read", json!({"filePath": "huge.gif"})).await,
        "`huge.gif` is image/gif of 5,242,881 bytes, over the 5 MiB limit for attachments."
    );
    std.put("tool.bin", b"\x7fELF\x02\x01\x01\0\0\0");
    assert_eq!(
        std.err("read", json!({"filePath": "tool.bin"})).await,
        "`tool.bin` is a binary file (10 bytes); read shows text, and PNG, JPEG, GIF, WebP and PDF files as attachments, nothing else."
    );
}

#[tokio::test]
async fn std_paths_that_leave_the_root_are_refused() {
    let std = Std::new().await;
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    std.put("inside/ok.txt", "fine\n");
    std::os::unix::fs::symlink(outside.path(), std.path("escape")).unwrap();
    std::os::unix::fs::symlink("../..", std.path("inside/up")).unwrap();
    std::os::unix::fs::symlink("ok.txt", std.path("inside/alias.txt")).unwrap();

    assert_eq!(
        std.err("read", json!({"filePath": "../secret.txt"})).await,
        "`../secret.txt` leaves the granted root through `..`; give a path inside it"
    );
    assert_eq!(
        std.err("read", json!({"filePath": "/etc/passwd"})).await,
        "`/etc/passwd` is outside the granted root /workspace; give a path relative to the root"
    );
    assert_eq!(
        std.err("read", json!({"filePath": "escape/secret.txt"}))
            .await,
        "`escape/secret.txt` goes through the symbolic link `escape`, whose target is an absolute path outside the granted root: it cannot be followed. Give a path inside the root."
    );
    assert_eq!(
        std.err(
            "write",
            json!({"filePath": "inside/up/x.txt", "content": "x"})
        )
        .await,
        "`inside/up/x.txt` goes through the symbolic link `inside/up`, which points outside the granted root (or loops); only paths inside the root can be used"
    );
    assert_eq!(
        std.err("grep", json!({"pattern": "x", "path": "../"}))
            .await,
        "`../` leaves the granted root through `..`; give a path inside it"
    );
    // `..` that stays inside, and a link to a file inside, are fine.
    assert_eq!(
        std.ok("read", json!({"filePath": "inside/../inside/alias.txt"}))
            .await,
        "1: fine\n\n(End of file: 1 lines.)"
    );
    // Searches do not follow links out either.
    let found = std.ok("grep", json!({"pattern": "secret"})).await;
    assert_eq!(found, "No lines match `secret` in `.`.");
    assert!(
        std.asked().is_empty(),
        "refused before asking: {:?}",
        std.asked()
    );
}

#[tokio::test]
async fn std_write_creates_parents_replaces_atomically_and_keeps_crlf() {
    let std = Std::new().await;
    let s = std
        .call(
            "write",
            json!({"filePath": "a/b/new.txt", "content": "one\ntwo\n"}),
        )
        .await;
    assert_eq!(text(&s), "Created `a/b/new.txt` (8 bytes).");
    assert_eq!(std.get("a/b/new.txt"), b"one\ntwo\n");
    assert_eq!(
        std.asked(),
        [(
            "write".to_owned(),
            "edit".to_owned(),
            vec!["a/b/new.txt".to_owned()],
            vec!["a/b/*".to_owned()]
        )]
    );

    std.put("dos.txt", "\u{feff}old\r\nfile\r\n");
    assert_eq!(
        std.ok(
            "write",
            json!({"filePath": "dos.txt", "content": "new\ntext\n"})
        )
        .await,
        "Replaced `dos.txt` (14 bytes)."
    );
    assert_eq!(std.get("dos.txt"), "\u{feff}new\r\ntext\r\n".as_bytes());
    // No temporary file is left beside what was written.
    let mut names: Vec<String> = fs::read_dir(std.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "dos.txt"]);

    assert_eq!(
        std.err("write", json!({"filePath": "a", "content": "x"}))
            .await,
        "`a` is a directory; give a file path."
    );
}

#[tokio::test]
async fn std_edit_replaces_one_match_or_says_how_many() {
    let std = Std::new().await;
    std.put("f.rs", "let a = 1;\nlet b = 1;\nlet c = 2;\n");
    assert_eq!(
        std.err(
            "edit",
            json!({"filePath": "f.rs", "oldString": "= 1;", "newString": "= 3;"})
        )
        .await,
        "oldString occurs 2 times in `f.rs`; it must occur once. Include more surrounding lines to pick one, or set replaceAll to replace all 2."
    );
    assert!(
        std.asked().is_empty(),
        "no question before the edit is possible"
    );
    let s = std
        .call(
            "edit",
            json!({"filePath": "f.rs", "oldString": "let b = 1;", "newString": "let b = 5;"}),
        )
        .await;
    assert_eq!(text(&s), "Edited `f.rs`: 1 replacement.");
    assert_eq!(metadata(&s)["fallback"], Value::Null);
    assert_eq!(std.get("f.rs"), b"let a = 1;\nlet b = 5;\nlet c = 2;\n");
    assert_eq!(
        std.asked(),
        [(
            "edit".to_owned(),
            "edit".to_owned(),
            vec!["f.rs".to_owned()],
            vec!["*".to_owned()]
        )]
    );
    assert_eq!(
        std.ok(
            "edit",
            json!({"filePath": "f.rs", "oldString": "let", "newString": "const", "replaceAll": true})
        )
        .await,
        "Edited `f.rs`: 3 replacements."
    );
    assert_eq!(
        std.get("f.rs"),
        b"const a = 1;\nconst b = 5;\nconst c = 2;\n"
    );
    assert_eq!(
        std.err(
            "edit",
            json!({"filePath": "f.rs", "oldString": "nothing like it", "newString": "x"})
        )
        .await,
        "oldString was not found in `f.rs`, not even ignoring whitespace at its ends, indentation, or whitespace within lines. Read the file again and copy the text exactly, without the `<line>: ` prefixes of read's output."
    );
    assert_eq!(
        std.err(
            "edit",
            json!({"filePath": "f.rs", "oldString": "x", "newString": "x"})
        )
        .await,
        "oldString and newString are the same; nothing would change."
    );
    // An empty oldString creates a file that does not exist.
    assert_eq!(
        std.ok(
            "edit",
            json!({"filePath": "new/g.rs", "oldString": "", "newString": "fn g() {}\n"})
        )
        .await,
        "Created `new/g.rs`."
    );
    assert_eq!(std.get("new/g.rs"), b"fn g() {}\n");
}

#[tokio::test]
async fn std_edit_fallbacks_are_each_named() {
    let std = Std::new().await;
    let source = "fn main() {\n    if ready {\n        go(1,  2);\n    }\n}\n";
    let cases = [
        // The model added blank lines and spaces around the text.
        (
            "\n  go(1,  2);  \n",
            "stop();",
            "trimmed",
            "fn main() {\n    if ready {\n        stop();\n    }\n}\n",
        ),
        // The model dropped the block's indentation: the new text is
        // re-indented to the file's.
        (
            "if ready {\n    go(1,  2);\n}",
            "if set {\n    run();\n}",
            "indentation",
            "fn main() {\n    if set {\n        run();\n    }\n}\n",
        ),
        // Each line's ends differ, not uniformly.
        (
            "if ready {\n  go(1,  2);\n  }",
            "    if ready {\n        go(3, 4);\n    }",
            "line-trimmed",
            "fn main() {\n    if ready {\n        go(3, 4);\n    }\n}\n",
        ),
        // Whitespace inside a line differs.
        (
            "        go(1, 2);",
            "        go(1, 9);",
            "whitespace",
            "fn main() {\n    if ready {\n        go(1, 9);\n    }\n}\n",
        ),
    ];
    for (old, new, fallback, expected) in cases {
        std.put("main.rs", source);
        let s = std
            .call(
                "edit",
                json!({"filePath": "main.rs", "oldString": old, "newString": new}),
            )
            .await;
        assert!(
            text(&s).contains(&format!("it matched with the `{fallback}` fallback")),
            "{fallback}: {}",
            text(&s)
        );
        assert_eq!(metadata(&s)["fallback"], fallback);
        assert_eq!(
            String::from_utf8(std.get("main.rs")).unwrap(),
            expected,
            "{fallback}"
        );
    }
}

#[tokio::test]
async fn std_edit_keeps_crlf_and_the_byte_order_mark() {
    let std = Std::new().await;
    std.put("win.txt", "\u{feff}first\r\nsecond\r\nthird\r\n");
    // The model writes `\n`; the file stays CRLF with its mark.
    std.ok(
        "edit",
        json!({"filePath": "win.txt", "oldString": "first\nsecond", "newString": "1st\n2nd\nextra"}),
    )
    .await;
    assert_eq!(
        std.get("win.txt"),
        "\u{feff}1st\r\n2nd\r\nextra\r\nthird\r\n".as_bytes()
    );
    std.put("bin.dat", b"\0\x01\x02");
    assert_eq!(
        std.err(
            "edit",
            json!({"filePath": "bin.dat", "oldString": "a", "newString": "b"})
        )
        .await,
        "`bin.dat` is not UTF-8 text; edit changes text files only."
    );
}

#[tokio::test]
async fn std_apply_patch_adds_updates_moves_and_deletes() {
    let std = Std::new().await;
    std.put(
        "src/app.py",
        "import os\n\ndef main():\n    print('hi')\n    return 0\n",
    );
    std.put("old/name.txt", "keep me\n");
    std.put("gone.txt", "bye\n");
    std.put("win.txt", "a\r\nb\r\n");
    let patch = [
        "*** Begin Patch",
        "*** Add File: docs/new.md",
        "+# New",
        "+text",
        "*** Update File: src/app.py",
        "@@ def main():",
        "-    print('hi')",
        "+    print('hello')",
        "     return 0",
        "*** Update File: old/name.txt",
        "*** Move to: renamed/name.txt",
        "@@",
        "-keep me",
        "+kept",
        "*** Update File: win.txt",
        "@@",
        " a",
        "-b",
        "+c",
        "*** Delete File: gone.txt",
        "*** End Patch",
    ]
    .join("\n");
    let s = std.call("apply_patch", json!({"patchText": patch})).await;
    assert_eq!(
        text(&s),
        "Applied the patch to 5 files:\nA docs/new.md\nM src/app.py\nR old/name.txt -> renamed/name.txt\nM win.txt\nD gone.txt\n"
    );
    assert_eq!(std.get("docs/new.md"), b"# New\ntext\n");
    assert_eq!(
        std.get("src/app.py"),
        b"import os\n\ndef main():\n    print('hello')\n    return 0\n"
    );
    assert_eq!(std.get("renamed/name.txt"), b"kept\n");
    assert!(!std.path("old/name.txt").exists());
    assert!(!std.path("gone.txt").exists());
    assert_eq!(std.get("win.txt"), b"a\r\nc\r\n");
    // One question for every file at once.
    let asked = std.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].1, "edit");
    assert_eq!(
        asked[0].2,
        [
            "docs/new.md",
            "gone.txt",
            "old/name.txt",
            "renamed/name.txt",
            "src/app.py",
            "win.txt"
        ]
    );
    assert_eq!(asked[0].3, ["*", "docs/*", "old/*", "renamed/*", "src/*"]);
}

#[tokio::test]
async fn std_apply_patch_that_fails_anywhere_changes_nothing() {
    let std = Std::new().await;
    std.put("a.txt", "one\ntwo\n");
    std.put("b.txt", "three\nfour\n");
    let patch = [
        "*** Begin Patch",
        "*** Update File: a.txt",
        "@@",
        "-one",
        "+ONE",
        "*** Add File: c.txt",
        "+new",
        "*** Delete File: b.txt",
        "*** Update File: b.txt",
        "@@",
        "-not in the file",
        "+x",
        "*** End Patch",
    ]
    .join("\n");
    assert_eq!(
        std.err("apply_patch", json!({"patchText": patch})).await,
        "the patch changes `b.txt` twice; nothing was written. Give each file one operation."
    );
    let patch = patch.replace("*** Delete File: b.txt\n", "");
    assert_eq!(
        std.err("apply_patch", json!({"patchText": patch})).await,
        "hunk 1 of `b.txt` does not match the file; nothing was written. These lines were not found:\nnot in the file\nRead the file and make the context and `-` lines match it exactly."
    );
    assert_eq!(std.get("a.txt"), b"one\ntwo\n");
    assert_eq!(std.get("b.txt"), b"three\nfour\n");
    assert!(!std.path("c.txt").exists());
    assert!(
        std.asked().is_empty(),
        "nothing asked for a patch that cannot apply"
    );
    let mut names: Vec<String> = fs::read_dir(std.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.txt", "b.txt"], "no temporary file left");

    // Refused by the user: nothing written either.
    let refusing = Std::with(true, Policy::Careful, Reply::Reject, Vec::new()).await;
    refusing.put("a.txt", "one\n");
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+1\n*** Add File: z.txt\n+z\n*** End Patch";
    assert_eq!(
        refusing
            .err("apply_patch", json!({"patchText": patch}))
            .await,
        "Permission denied: edit a.txt"
    );
    assert_eq!(refusing.get("a.txt"), b"one\n");
    assert!(!refusing.path("z.txt").exists());
}

#[tokio::test]
async fn std_glob_is_newest_first_respects_gitignore_and_reports_the_rest() {
    let std = Std::new().await;
    std.put(".gitignore", "build/\n*.log\n");
    for (i, name) in ["old.rs", "mid.rs", "src/new.rs"].iter().enumerate() {
        std.put(name, "x\n");
        let time = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs(1_000_000 * (i as u64 + 1));
        fs::File::options()
            .write(true)
            .open(std.path(name))
            .unwrap()
            .set_modified(time)
            .unwrap();
    }
    std.put("build/out.rs", "x\n");
    std.put("debug.log", "x\n");
    std.put(".hidden/h.rs", "x\n");
    assert_eq!(
        std.ok("glob", json!({"pattern": "*.rs"})).await,
        "src/new.rs\nmid.rs\nold.rs\n"
    );
    assert_eq!(
        std.ok("glob", json!({"pattern": "src/**/*.rs"})).await,
        "src/new.rs\n"
    );
    assert_eq!(
        std.ok("glob", json!({"pattern": "*.rs", "path": "src"}))
            .await,
        "src/new.rs\n"
    );
    let hidden = std
        .ok("glob", json!({"pattern": "**/*.rs", "hidden": true}))
        .await;
    assert!(hidden.contains(".hidden/h.rs"), "{hidden}");
    assert!(!hidden.contains("build/"), "{hidden}");
    assert_eq!(
        std.ok("glob", json!({"pattern": "*.log"})).await,
        "No files match `*.log` in `.`."
    );

    for i in 0..250 {
        std.put(&format!("many/f{i:03}.txt"), "x\n");
    }
    let s = std.call("glob", json!({"pattern": "*.txt"})).await;
    let found = text(&s);
    assert_eq!(found.lines().filter(|l| l.ends_with(".txt")).count(), 100);
    assert!(
        found.ends_with("(100 of 250 matching files shown, newest first; narrow the pattern or path, or raise limit.)"),
        "{found}"
    );
    assert_eq!(metadata(&s)["count"], 250);
    let s = std
        .call("glob", json!({"pattern": "*.txt", "limit": 5}))
        .await;
    assert!(text(&s).ends_with(
        "(5 of 250 matching files shown, newest first; narrow the pattern or path, or raise limit.)"
    ));
}

#[tokio::test]
async fn std_grep_gives_paths_and_line_numbers_and_counts_every_match() {
    let std = Std::new().await;
    std.put(".gitignore", "ignored/\n");
    std.put("a.rs", "fn alpha() {}\nfn beta() {}\n// TODO: gamma\n");
    std.put("b.py", "def alpha():\n    pass\n");
    std.put("ignored/c.rs", "fn alpha() {}\n");
    std.put("blob.bin", b"alpha\0binary");
    assert_eq!(
        std.ok("grep", json!({"pattern": "alpha"})).await,
        "Found 2 matching lines in 2 files.\n\na.rs:\n  Line 1: fn alpha() {}\n\nb.py:\n  Line 1: def alpha():\n"
    );
    assert_eq!(
        std.ok("grep", json!({"pattern": "fn \\w+", "include": "*.rs"}))
            .await,
        "Found 2 matching lines in 1 files.\n\na.rs:\n  Line 1: fn alpha() {}\n  Line 2: fn beta() {}\n"
    );
    assert_eq!(
        std.ok(
            "grep",
            json!({"pattern": "ALPHA", "caseSensitive": false, "include": "*.py"})
        )
        .await,
        "Found 1 matching lines in 1 files.\n\nb.py:\n  Line 1: def alpha():\n"
    );
    assert_eq!(
        std.ok("grep", json!({"pattern": "alpha()", "literal": true}))
            .await,
        "Found 2 matching lines in 2 files.\n\na.rs:\n  Line 1: fn alpha() {}\n\nb.py:\n  Line 1: def alpha():\n"
    );
    assert!(
        std.err("grep", json!({"pattern": "(unclosed"}))
            .await
            .starts_with("invalid regular expression `(unclosed`")
    );

    // A file larger than grep's read window is searched to its end.
    let mut large: String = (0..30_000).map(|i| format!("filler line {i}\n")).collect();
    large.push_str("the last line has the needle\n");
    assert!(large.len() > 256 << 10);
    std.put("large/big.txt", &large);
    assert_eq!(
        std.ok("grep", json!({"pattern": "needle", "path": "large"}))
            .await,
        "Found 1 matching lines in 1 files.\n\nlarge/big.txt:\n  Line 30001: the last line has the needle\n"
    );

    // The producer says exactly what it left out.
    let many: String = (0..4213).map(|i| format!("match {i}\n")).collect();
    std.put("many/log.txt", &many);
    let s = std
        .call("grep", json!({"pattern": "^match", "path": "many"}))
        .await;
    let found = text(&s);
    assert!(
        found.starts_with("100 of 4,213 matching lines shown (in 1 files); narrow the pattern, path or include, or raise limit.\n\nmany/log.txt:\n  Line 1: match 0\n"),
        "{}",
        &found[..200]
    );
    assert!(found.ends_with("  Line 100: match 99\n"));
    assert_eq!(metadata(&s)["matches"], 4213);
    assert_eq!(metadata(&s)["truncated"], true);
}

#[tokio::test]
async fn std_list_shows_a_tree_without_the_usual_noise() {
    let std = Std::new().await;
    std.put(".gitignore", "secret.env\n");
    std.put("src/main.rs", "\n");
    std.put("src/util/mod.rs", "\n");
    std.put("README.md", "\n");
    std.put("secret.env", "\n");
    std.put("node_modules/pkg/index.js", "\n");
    std.put("target/debug/app", "\n");
    std.put(".git/HEAD", "\n");
    std.put("notes/a.log", "\n");
    assert_eq!(
        std.ok("list", json!({})).await,
        "./\n  README.md\n  notes/\n    a.log\n  src/\n    main.rs\n    util/\n      mod.rs\n"
    );
    assert_eq!(
        std.ok("list", json!({"path": "src", "ignore": ["util"]}))
            .await,
        "src/\n  main.rs\n"
    );
    assert_eq!(
        std.ok("list", json!({"ignore": ["*.log"]})).await,
        "./\n  README.md\n  src/\n    main.rs\n    util/\n      mod.rs\n"
    );
    for i in 0..120 {
        std.put(&format!("gen/{i:03}.txt"), "\n");
    }
    let listed = std.ok("list", json!({"path": "gen"})).await;
    assert!(
        listed.ends_with("\n(100 of 120 files shown; list a subdirectory, or use glob.)"),
        "{listed}"
    );
}

#[tokio::test]
async fn std_permission_actions_and_resources_are_opencodes() {
    let std = Std::with(true, Policy::AskAll, Reply::Once, Vec::new()).await;
    std.put("src/a.txt", "hello\n");
    std.ok("read", json!({"filePath": "src/a.txt"})).await;
    std.ok("read", json!({"filePath": "src"})).await;
    std.ok("glob", json!({"pattern": "**/*.txt", "path": "src"}))
        .await;
    std.ok("grep", json!({"pattern": "hel+o"})).await;
    std.ok("list", json!({"path": "src"})).await;
    std.ok("write", json!({"filePath": "src/b.txt", "content": "x"}))
        .await;
    std.ok(
        "edit",
        json!({"filePath": "src/a.txt", "oldString": "hello", "newString": "bye"}),
    )
    .await;
    std.ok(
        "apply_patch",
        json!({"patchText": "*** Begin Patch\n*** Add File: top.txt\n+t\n*** End Patch"}),
    )
    .await;
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        std.asked(),
        [
            (
                "read".into(),
                "read".into(),
                s(&["src/a.txt"]),
                s(&["src/*"])
            ),
            (
                "read".into(),
                "read".into(),
                s(&["src"]),
                s(&["src", "src/*"])
            ),
            ("glob".into(), "glob".into(), s(&["**/*.txt"]), s(&["*"])),
            ("grep".into(), "grep".into(), s(&["hel+o"]), s(&["*"])),
            (
                "list".into(),
                "list".into(),
                s(&["src"]),
                s(&["src", "src/*"])
            ),
            (
                "write".into(),
                "edit".into(),
                s(&["src/b.txt"]),
                s(&["src/*"])
            ),
            (
                "edit".into(),
                "edit".into(),
                s(&["src/a.txt"]),
                s(&["src/*"])
            ),
            (
                "apply_patch".into(),
                "edit".into(),
                s(&["top.txt"]),
                s(&["*"])
            ),
        ]
    );

    // Rejected: the model sees the denial, the file is untouched.
    let rejecting = Std::with(true, Policy::Careful, Reply::Reject, Vec::new()).await;
    rejecting.put("a.txt", "keep\n");
    assert_eq!(
        rejecting
            .err(
                "edit",
                json!({"filePath": "a.txt", "oldString": "keep", "newString": "lose"})
            )
            .await,
        "Permission denied: edit a.txt"
    );
    assert_eq!(rejecting.get("a.txt"), b"keep\n");
    // `--std`'s rules: reads are not asked about.
    rejecting.ok("read", json!({"filePath": "a.txt"})).await;
    rejecting.ok("grep", json!({"pattern": "keep"})).await;
    assert_eq!(rejecting.asked().len(), 1, "only the edit was asked about");
}

#[tokio::test]
async fn std_a_read_only_root_refuses_every_edit() {
    let std = Std::with(false, Policy::Careful, Reply::Once, Vec::new()).await;
    std.put("a.txt", "one\n");
    assert_eq!(
        std.ok("read", json!({"filePath": "a.txt"})).await,
        "1: one\n\n(End of file: 1 lines.)"
    );
    for (tool, input) in [
        ("write", json!({"filePath": "a.txt", "content": "two\n"})),
        ("write", json!({"filePath": "new.txt", "content": "two\n"})),
        (
            "edit",
            json!({"filePath": "a.txt", "oldString": "one", "newString": "two"}),
        ),
        (
            "apply_patch",
            json!({"patchText": "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n*** End Patch"}),
        ),
        (
            "apply_patch",
            json!({"patchText": "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch"}),
        ),
    ] {
        let message = std.err(tool, input.clone()).await;
        assert!(
            message.contains("read-only") || message.contains("denied"),
            "{tool} {input}: {message}"
        );
    }
    assert_eq!(std.get("a.txt"), b"one\n");
    assert!(!std.path("new.txt").exists());
}

/// A loopback HTTP server answering every request with `body` as HTML;
/// at most `connections` of them.
async fn html_server(body: &'static str, connections: usize) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for _ in 0..connections {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            // The request head (bounded); its contents do not matter.
            let mut head = vec![0u8; 16 << 10];
            let mut read = 0;
            while read < head.len() && !head[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                match tcp.read(&mut head[read..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tcp.write_all(reply.as_bytes()).await;
        }
    });
    addr
}

#[tokio::test]
async fn std_webfetch_converts_html_under_origin_grants() {
    let page = "<html><head><title>T</title><style>p{}</style></head><body><h1>Title</h1><p>Some <b>bold</b> text &amp; more.</p><script>var x;</script></body></html>";
    let addr = html_server(page, 4).await;
    let origin = format!("http://{addr}");
    let grant: HttpGrant = format!("{origin}/*").parse().unwrap();
    let std = Std::with(true, Policy::Careful, Reply::Once, vec![grant]).await;
    let url = format!("{origin}/page");
    let markdown = std.ok("webfetch", json!({"url": url})).await;
    assert!(markdown.contains("# Title"), "{markdown}");
    assert!(
        markdown.contains("Some **bold** text & more."),
        "{markdown}"
    );
    assert!(!markdown.contains("var x"), "{markdown}");
    let plain = std
        .ok("webfetch", json!({"url": url, "format": "text"}))
        .await;
    assert!(plain.contains("Title\n"), "{plain}");
    assert!(plain.contains("Some bold text & more."), "{plain}");
    assert!(!plain.contains('<'), "{plain}");
    let html = std
        .ok("webfetch", json!({"url": url, "format": "html"}))
        .await;
    assert_eq!(html, page);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        std.asked(),
        vec![("webfetch".into(), "webfetch".into(), s(&[&url]), s(&[&url])); 3]
    );

    // An origin nobody granted is not reached.
    let ungranted = Std::new().await;
    let message = ungranted.err("webfetch", json!({"url": url})).await;
    assert!(
        message.starts_with(&format!("fetching {url} failed: ")),
        "{message}"
    );
    assert_eq!(
        ungranted
            .err("webfetch", json!({"url": "file:///etc/passwd"}))
            .await,
        "`file:///etc/passwd` is not an http:// or https:// URL."
    );
}

/// A loopback HTTP server answering every request with its own request
/// target, recording each target it was sent.
async fn echoing_server() -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let mut head = vec![0u8; 16 << 10];
            let mut read = 0;
            while read < head.len() && !head[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                match tcp.read(&mut head[read..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
            let line = String::from_utf8_lossy(&head[..read])
                .lines()
                .next()
                .unwrap_or("")
                .to_owned();
            let target = line.split(' ').nth(1).unwrap_or("").to_owned();
            record.lock().unwrap().push(target.clone());
            let body = format!("<p>served {target}</p>");
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tcp.write_all(reply.as_bytes()).await;
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn r36_webfetch_cannot_leave_a_path_grant_by_dot_segments() {
    let (addr, seen) = echoing_server().await;
    let origin = format!("http://{addr}");
    let grant: HttpGrant = format!("{origin}/public/*").parse().unwrap();
    let std = Std::with(true, Policy::Careful, Reply::Once, vec![grant]).await;
    for escape in [
        "/public/../secret",
        "/public/%2e%2e/secret",
        "/public/.%2E/secret",
        "/public/..%2fsecret",
        "/public/..%5Csecret",
    ] {
        let url = format!("{origin}{escape}");
        let message = std
            .err("webfetch", json!({"url": url, "format": "html"}))
            .await;
        assert!(message.contains("failed"), "{escape}: {message}");
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing outside the grant was sent: {:?}",
        seen.lock().unwrap()
    );
    // Inside the grant, the path is sent as it was matched: normalised.
    let inside = format!("{origin}/public/./a/../page");
    let page = std
        .ok("webfetch", json!({"url": inside, "format": "html"}))
        .await;
    assert_eq!(page, "<p>served /public/page</p>");
    assert_eq!(*seen.lock().unwrap(), ["/public/page"]);
}

/// `toolhost ARGS` in `dir`, with the compile cache and state of `dir`
/// (so the embedded components compile once for the test).
fn toolhost(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .arg("--cache-dir")
        .arg(dir.join(".cache"))
        .arg("--state-dir")
        .arg(dir.join(".state"))
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    exited(out)
}

#[test]
fn std_cli_flags_serve_the_embedded_tools_with_careful_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    fs::write(work.join("notes.txt"), "hello\n").unwrap();
    let w = work.to_str().unwrap();

    let (code, out, err) = toolhost(dir.path(), &["list", "--std", w, "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let listed: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["plugin"].as_str().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [
            ("apply_patch", "std-edit"),
            ("edit", "std-edit"),
            ("glob", "std"),
            ("grep", "std"),
            ("list", "std"),
            ("read", "std"),
            ("webfetch", "std"),
            ("write", "std-edit"),
        ]
    );
    let (code, out, err) = toolhost(dir.path(), &["list", "--std-readonly", w, "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["glob", "grep", "list", "read", "webfetch"]);

    // Reads are allowed; an edit asks, and without a terminal or --yes
    // that is a denial; with --yes it is done.
    let (code, out, err) = toolhost(
        dir.path(),
        &[
            "call",
            "--std",
            w,
            "read",
            "--input",
            r#"{"filePath":"notes.txt"}"#,
        ],
    );
    assert_eq!(
        (code, out.as_str()),
        (0, "1: hello\n\n(End of file: 1 lines.)\n"),
        "{err}"
    );
    let edit = r#"{"filePath":"notes.txt","oldString":"hello","newString":"bye"}"#;
    let (code, _, err) = toolhost(dir.path(), &["call", "--std", w, "edit", "--input", edit]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Permission denied: edit notes.txt"), "{err}");
    assert_eq!(
        fs::read_to_string(work.join("notes.txt")).unwrap(),
        "hello\n"
    );
    let (code, out, err) = toolhost(
        dir.path(),
        &["call", "--std", w, "--yes", "edit", "--input", edit],
    );
    assert_eq!(
        (code, out.as_str()),
        (0, "Edited `notes.txt`: 1 replacement.\n"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(work.join("notes.txt")).unwrap(), "bye\n");

    // --std-readonly has no editing tool to call.
    let (code, _, err) = toolhost(
        dir.path(),
        &[
            "call",
            "--std-readonly",
            w,
            "--yes",
            "write",
            "--input",
            r#"{"filePath":"x","content":"x"}"#,
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Unknown tool: write"), "{err}");
    assert!(!work.join("x").exists());

    let (code, _, err) = toolhost(dir.path(), &["list", "--std", "no-such-dir"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--std no-such-dir: cannot find the directory"),
        "{err}"
    );
}

/// A test server that accepts connections and never answers.
async fn silent_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    addr
}

#[tokio::test]
async fn std_grep_skips_files_over_its_limit_counted_and_streams_the_rest() {
    let std = Std::new().await;
    // Two files over the 64 MiB limit (text at the start, sparse after).
    for name in ["big1.log", "big2.log"] {
        let file = fs::File::create(std.path(name)).unwrap();
        std::io::Write::write_all(&mut &file, "needle\n".repeat(2000).as_bytes()).unwrap();
        file.set_len(70_000_000).unwrap();
    }
    // A file under the limit but larger than grep's read window: matches
    // past the window, and on a line longer than it, keep their numbers.
    let mut lines = String::new();
    for i in 1..=60_000 {
        if i % 20_000 == 0 {
            lines.push_str("a needle here\n");
        } else {
            lines.push_str(&format!("line {i}\n"));
        }
    }
    lines.push_str(&"y".repeat(300_000));
    lines.push_str("needle\n");
    std.put("mid.txt", &lines);
    std.put("small.txt", "one needle\n");
    let s = std.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(
        text(&s),
        format!(
            "Found 5 matching lines in 2 files.\n2 files over 64 MiB were not searched.\n\nmid.txt:\n  Line 20000: a needle here\n  Line 40000: a needle here\n  Line 60000: a needle here\n  Line 60001: {}… (line cut at 2000 of 300006 characters)\n\nsmall.txt:\n  Line 1: one needle\n",
            "y".repeat(2000)
        )
    );
    assert_eq!(metadata(&s)["skippedLargeFiles"], 2);
}

#[tokio::test]
async fn std_read_of_a_huge_one_line_file_answers_its_first_line_cut() {
    let std = Std::new().await;
    let mut line = "x".repeat(200_000_000);
    line.push('\n');
    std.put("one-line.txt", line);
    assert_eq!(
        std.ok("read", json!({"filePath": "one-line.txt"})).await,
        format!(
            "1: {}… (line cut at 2000 of 200000000 characters)\n\n(End of file: 1 lines.)",
            "x".repeat(2000)
        )
    );
}

#[tokio::test]
async fn std_edit_of_a_file_over_the_limit_answers_with_the_limit() {
    let std = Std::new().await;
    let mut big = String::from("needle\n");
    big.push_str(&"a line of ordinary text\n".repeat((110 << 20) / 24));
    let size = big.len();
    std.put("big.txt", big);
    let message = format!(
        "`big.txt` is too large to edit ({} bytes; edit and apply_patch change files of at most 32 MiB). Leave it unchanged, or ask the user to change it.",
        thousands(size)
    );
    assert_eq!(
        std.err(
            "edit",
            json!({"filePath": "big.txt", "oldString": "needle", "newString": "pin"})
        )
        .await,
        message
    );
    let patch = "*** Begin Patch\n*** Update File: big.txt\n@@\n-needle\n+pin\n*** End Patch";
    assert_eq!(
        std.err("apply_patch", json!({"patchText": patch})).await,
        format!("`*** Update File: big.txt`: {message} Nothing was written.")
    );
    assert!(std.get("big.txt").starts_with(b"needle\n"));
}

#[tokio::test]
async fn std_apply_patch_deletes_a_link_not_its_target() {
    let std = Std::new().await;
    std.put("real.txt", "keep\n");
    std::os::unix::fs::symlink("real.txt", std.path("link.txt")).unwrap();
    assert_eq!(
        std.ok(
            "apply_patch",
            json!({"patchText": "*** Begin Patch\n*** Delete File: link.txt\n*** End Patch"})
        )
        .await,
        "Applied the patch to 1 files:\nD link.txt\n"
    );
    assert!(fs::symlink_metadata(std.path("link.txt")).is_err());
    assert_eq!(std.get("real.txt"), b"keep\n");
    // Updating through a link changes its target, and keeps the link.
    std::os::unix::fs::symlink("real.txt", std.path("link.txt")).unwrap();
    std.ok(
        "apply_patch",
        json!({"patchText": "*** Begin Patch\n*** Update File: link.txt\n@@\n-keep\n+kept\n*** End Patch"}),
    )
    .await;
    assert!(
        fs::symlink_metadata(std.path("link.txt"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(std.get("real.txt"), b"kept\n");
}

#[tokio::test]
async fn std_apply_patch_accepts_indented_headers_and_a_heredoc() {
    let std = Std::new().await;
    std.put("a.txt", "one\ntwo\n");
    // Headers indented (inside an update's hunks an indented line is
    // context, so a header there is not).
    let indented = "*** Begin Patch\n  *** Add File: b.txt\n+b\n  *** Update File: a.txt\n@@\n-one\n+1\n *** End Patch";
    assert_eq!(
        std.ok("apply_patch", json!({"patchText": indented})).await,
        "Applied the patch to 2 files:\nA b.txt\nM a.txt\n"
    );
    assert_eq!(std.get("a.txt"), b"1\ntwo\n");
    for (n, heredoc) in [
        "cat <<'EOF'\n*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+2\n*** End Patch\nEOF\n",
        "<<EOF\n*** Begin Patch\n*** Update File: a.txt\n@@\n-2\n+II\n*** End Patch\nEOF",
        "apply_patch <<\"PATCH\"\n*** Begin Patch\n*** Delete File: b.txt\n*** End Patch\nPATCH\n",
    ]
    .iter()
    .enumerate()
    {
        let s = std.call("apply_patch", json!({"patchText": heredoc})).await;
        assert_eq!(
            s.outcome.status(),
            "completed",
            "{n}: {}",
            error_message(&s)
        );
    }
    assert_eq!(std.get("a.txt"), b"1\nII\n");
    assert!(!std.path("b.txt").exists());
}

#[tokio::test]
async fn std_edits_keep_each_lines_own_ending() {
    let std = Std::new().await;
    // Mostly CRLF, one LF line: new lines get CRLF, untouched lines keep
    // their own endings.
    std.put("mixed.txt", "a\r\nb\nc\r\nd\r\n");
    std.ok(
        "edit",
        json!({"filePath": "mixed.txt", "oldString": "c", "newString": "c1\nc2"}),
    )
    .await;
    assert_eq!(std.get("mixed.txt"), b"a\r\nb\nc1\r\nc2\r\nd\r\n");
    std.ok(
        "edit",
        json!({"filePath": "mixed.txt", "oldString": "b\nc1", "newString": "B\nC1"}),
    )
    .await;
    assert_eq!(std.get("mixed.txt"), b"a\r\nB\nC1\r\nc2\r\nd\r\n");
    let patch =
        "*** Begin Patch\n*** Update File: mixed.txt\n@@\n a\n B\n-C1\n+new\n c2\n*** End Patch";
    std.ok("apply_patch", json!({"patchText": patch})).await;
    assert_eq!(std.get("mixed.txt"), b"a\r\nB\nnew\r\nc2\r\nd\r\n");
    // Mostly LF: new lines get LF; the CRLF line stays CRLF.
    std.put("unix.txt", "x\ny\r\nz\n");
    let patch = "*** Begin Patch\n*** Update File: unix.txt\n@@\n x\n+w\n y\n*** End Patch";
    std.ok("apply_patch", json!({"patchText": patch})).await;
    assert_eq!(std.get("unix.txt"), b"x\nw\ny\r\nz\n");
}

#[tokio::test]
async fn std_apply_patch_move_onto_an_existing_file_replaces_it() {
    let std = Std::new().await;
    std.put("from.txt", "one\n");
    std.put("to.txt", "old\n");
    let patch = "*** Begin Patch\n*** Update File: from.txt\n*** Move to: to.txt\n@@\n-one\n+two\n*** End Patch";
    assert_eq!(
        std.ok("apply_patch", json!({"patchText": patch})).await,
        "Applied the patch to 1 files:\nR from.txt -> to.txt\n"
    );
    assert_eq!(std.get("to.txt"), b"two\n");
    assert!(!std.path("from.txt").exists());
    // A patch that fails later puts the replaced file back.
    std.put("from.txt", "one\n");
    let patch = "*** Begin Patch\n*** Update File: from.txt\n*** Move to: to.txt\n@@\n-one\n+three\n*** Update File: nowhere.txt\n@@\n-x\n+y\n*** End Patch";
    std.err("apply_patch", json!({"patchText": patch})).await;
    assert_eq!(std.get("to.txt"), b"two\n");
    assert_eq!(std.get("from.txt"), b"one\n");
}

#[tokio::test]
async fn std_an_absolute_link_into_the_root_is_followed_and_one_out_of_it_refused() {
    let std = Std::new().await;
    std.put("b/target.txt", "inside\n");
    // As a link made outside the sandbox names it: the host's path.
    let host_b = fs::canonicalize(std.path("b")).unwrap();
    std::os::unix::fs::symlink(&host_b, std.path("a")).unwrap();
    // As one made inside it names it: the guest's path.
    std::os::unix::fs::symlink("/workspace/b", std.path("d")).unwrap();
    for link in ["a", "c", "d"] {
        if link == "c" {
            std::os::unix::fs::symlink("b", std.path("c")).unwrap();
        }
        assert_eq!(
            std.ok("read", json!({"filePath": format!("{link}/target.txt")}))
                .await,
            "1: inside\n\n(End of file: 1 lines.)",
            "{link}"
        );
    }
    // An absolute link out of the root is refused, its target unshown.
    std::os::unix::fs::symlink("/etc", std.path("e")).unwrap();
    let refused = std.err("read", json!({"filePath": "e/hostname"})).await;
    assert_eq!(
        refused,
        "`e/hostname` goes through the symbolic link `e`, whose target is an absolute path outside the granted root: it cannot be followed. Give a path inside the root."
    );
}

#[tokio::test]
async fn std_edit_and_write_call_a_fifo_not_a_regular_file() {
    let std = Std::new().await;
    let status = Command::new("mkfifo")
        .arg(std.path("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std.err(
            "edit",
            json!({"filePath": "pipe", "oldString": "a", "newString": "b"})
        )
        .await,
        "`pipe` is not a regular file (a FIFO, socket or device); edit changes regular files only."
    );
    assert_eq!(
        std.err("write", json!({"filePath": "pipe", "content": "x"}))
            .await,
        "`pipe` is not a regular file (a FIFO, socket or device); write replaces regular files only."
    );
    assert!(
        fs::symlink_metadata(std.path("pipe"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[tokio::test]
async fn std_webfetch_gives_up_after_its_timeout() {
    let addr = silent_server().await;
    let origin = format!("http://{addr}");
    let grant: HttpGrant = format!("{origin}/*").parse().unwrap();
    let std = Std::with(true, Policy::Careful, Reply::Once, vec![grant]).await;
    let url = format!("{origin}/slow");
    let started = std::time::Instant::now();
    assert_eq!(
        std.err("webfetch", json!({"url": url, "timeout": 1})).await,
        format!(
            "fetching {url} timed out after 1 s; try again with a larger timeout (at most 120 s)."
        )
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
