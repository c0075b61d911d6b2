//! `toolhost new`: names are checked, nothing of the user's is overwritten,
//! and every template comes out complete with its placeholders filled in.
//! Building the projects it writes needs componentize-py, Node and the
//! wasm32-wasip2 target: `cargo xtask templates` does that.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The languages `toolhost new --lang` offers.
const LANGS: &[&str] = &["rust", "python", "js"];

/// Runs `toolhost new ARGS...` in `cwd`: exit code, stdout, stderr.
fn new(args: &[&str], cwd: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("new")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("runs toolhost");
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Every file under `dir`, as paths relative to it with `/` separators.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).unwrap();
                out.push(relative.to_str().unwrap().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

#[test]
fn new_refuses_invalid_names_with_exit_2_and_creates_nothing() {
    let long = "a".repeat(65);
    let cases = [
        ("", "it is empty"),
        ("My-Tools", "it starts with `M`"),
        ("1tools", "it starts with `1`"),
        ("-tools", "it starts with `-`"),
        ("my tools", "` ` is not allowed"),
        ("my.tools", "`.` is not allowed"),
        ("my/tools", "`/` is not allowed"),
        ("tööls", "is not allowed"),
        (long.as_str(), "longer than 64 characters"),
    ];
    for (name, why) in cases {
        let cwd = tempfile::tempdir().unwrap();
        // After `--`, so that `-tools` reaches the check as a name.
        let (code, _, stderr) = new(&["--lang", "python", "--", name], cwd.path());
        assert_eq!(code, 2, "{name:?}: {stderr}");
        assert!(
            stderr.contains("is not a valid plugin name") && stderr.contains(why),
            "{name:?}: {stderr}"
        );
        assert!(
            stderr.contains("e.g. `my-tools`"),
            "says how to fix it: {stderr}"
        );
        assert!(files(cwd.path()).is_empty(), "{name:?} created files");
        assert_eq!(fs::read_dir(cwd.path()).unwrap().count(), 0, "{name:?}");
    }
    for name in ["fn", "self", "std", "test", "toolhost-sdk", "con"] {
        let cwd = tempfile::tempdir().unwrap();
        let (code, _, stderr) = new(&[name, "--lang", "js"], cwd.path());
        assert_eq!(code, 2, "{name:?}: {stderr}");
        assert!(stderr.contains("is reserved"), "{name:?}: {stderr}");
        assert_eq!(fs::read_dir(cwd.path()).unwrap().count(), 0, "{name:?}");
    }
}

#[test]
fn new_accepts_names_at_the_edges() {
    for name in ["a", "a".repeat(64).as_str(), "my_tools-2"] {
        let cwd = tempfile::tempdir().unwrap();
        let (code, _, stderr) = new(&[name, "--lang", "python"], cwd.path());
        assert_eq!(code, 0, "{name:?}: {stderr}");
        assert!(cwd.path().join(name).join("toolhost.toml").is_file());
    }
}

#[test]
fn new_refuses_a_non_empty_directory_and_leaves_it_alone() {
    let cwd = tempfile::tempdir().unwrap();
    let project = cwd.path().join("tools");
    fs::create_dir(&project).unwrap();
    fs::write(project.join("README.md"), "mine").unwrap();
    for args in [
        &["tools", "--lang", "js"][..],
        &["other", "--lang", "python", "--dir", "tools"],
    ] {
        let (code, _, stderr) = new(args, cwd.path());
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("exists and is not empty"), "{stderr}");
        assert_eq!(files(&project), ["README.md"]);
        assert_eq!(
            fs::read_to_string(project.join("README.md")).unwrap(),
            "mine"
        );
    }

    fs::write(cwd.path().join("file"), "mine").unwrap();
    let (code, _, stderr) = new(&["file", "--lang", "js"], cwd.path());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("is not a directory"), "{stderr}");
    assert_eq!(fs::read_to_string(cwd.path().join("file")).unwrap(), "mine");
}

#[test]
fn new_fills_an_empty_directory_given_with_dir() {
    let cwd = tempfile::tempdir().unwrap();
    let project = cwd.path().join("nested").join("here");
    fs::create_dir_all(&project).unwrap();
    let (code, stdout, stderr) = new(
        &[
            "my-tools",
            "--lang",
            "js",
            "--dir",
            project.to_str().unwrap(),
        ],
        cwd.path(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(project.join("package.json").is_file());
    assert!(
        !cwd.path().join("my-tools").exists(),
        "--dir replaces ./NAME"
    );
    assert!(
        stdout.contains(&format!("cd {}", project.display())),
        "{stdout}"
    );
}

#[test]
fn new_writes_every_template_complete_with_placeholders_filled() {
    let wit = fs::read_to_string(repo_root().join("wit/v0.1/world.wit")).unwrap();
    for lang in LANGS {
        let cwd = tempfile::tempdir().unwrap();
        let (code, stdout, stderr) = new(&["my-tools", "--lang", lang], cwd.path());
        assert_eq!(code, 0, "{lang}: {stderr}");
        assert!(
            stdout.contains("cd my-tools") && stdout.contains("toolhost check toolhost.toml"),
            "{lang}: next steps:\n{stdout}"
        );
        let project = cwd.path().join("my-tools");
        let written = files(&project);
        for required in [
            "toolhost.toml",
            "samples.toml",
            ".gitignore",
            ".github/workflows/ci.yml",
            "README.md",
        ] {
            assert!(
                written.iter().any(|f| f == required),
                "{lang}: no {required}"
            );
        }
        for file in &written {
            assert!(!file.ends_with(".tmpl"), "{lang}: {file} kept .tmpl");
            let text = fs::read_to_string(project.join(file)).unwrap();
            for placeholder in ["{{name}}", "{{crate_name}}", "{{sdk_version}}"] {
                assert!(
                    !text.contains(placeholder),
                    "{lang}: {placeholder} in {file}"
                );
            }
        }

        let manifest: toml::Table =
            toml::from_str(&fs::read_to_string(project.join("toolhost.toml")).unwrap()).unwrap();
        assert_eq!(manifest["name"].as_str(), Some("my-tools"), "{lang}");
        let path = manifest["path"].as_str().unwrap();
        assert!(path.ends_with("/my_tools.wasm"), "{lang}: {path}");
        let samples = manifest["samples"].as_str().unwrap();
        assert!(project.join(samples).is_file(), "{lang}: {samples}");
        let readme = fs::read_to_string(project.join("README.md")).unwrap();
        assert!(readme.starts_with("# my-tools\n"), "{lang}");
        let ci = fs::read_to_string(project.join(".github/workflows/ci.yml")).unwrap();
        assert!(
            ci.contains(&format!("toolhost-cli=={}", env!("CARGO_PKG_VERSION"))),
            "{lang}: CI installs this version of the CLI"
        );
        if *lang == "rust" {
            // Rust projects get the WIT inside toolhost-sdk.
            assert!(!project.join("wit").exists(), "rust: no wit/ of its own");
        } else {
            assert_eq!(
                fs::read_to_string(project.join("wit/world.wit")).unwrap(),
                wit,
                "{lang}: the project's WIT is the repository's"
            );
        }
    }
}

#[test]
fn new_rust_project_is_the_default_and_depends_on_this_sdk_version() {
    let cwd = tempfile::tempdir().unwrap();
    let (code, _, stderr) = new(&["rs-tools"], cwd.path());
    assert_eq!(code, 0, "{stderr}");
    let project = cwd.path().join("rs-tools");
    let manifest: toml::Table =
        toml::from_str(&fs::read_to_string(project.join("Cargo.toml")).unwrap()).unwrap();
    assert_eq!(manifest["package"]["name"].as_str(), Some("rs-tools"));
    assert_eq!(
        manifest["lib"]["crate-type"].as_array().unwrap(),
        &[toml::Value::from("cdylib")]
    );
    assert_eq!(
        manifest["dependencies"]["toolhost-sdk"].as_str(),
        Some(env!("CARGO_PKG_VERSION")),
        "the SDK of this CLI's version"
    );
    let lib = fs::read_to_string(project.join("src/lib.rs")).unwrap();
    assert!(lib.contains("toolhost_sdk::plugin!([greet]);"), "{lib}");
    let toolhost: toml::Table =
        toml::from_str(&fs::read_to_string(project.join("toolhost.toml")).unwrap()).unwrap();
    assert_eq!(
        toolhost["path"].as_str(),
        Some("target/wasm32-wasip2/release/rs_tools.wasm")
    );
}

#[test]
fn new_python_project_pins_componentize_py_and_has_an_executable_build_script() {
    let cwd = tempfile::tempdir().unwrap();
    let (code, _, stderr) = new(&["py-tools", "--lang", "python"], cwd.path());
    assert_eq!(code, 0, "{stderr}");
    let project = cwd.path().join("py-tools");
    let requirements = fs::read_to_string(project.join("requirements.txt")).unwrap();
    assert!(
        requirements.contains("componentize-py==0.25.1"),
        "{requirements}"
    );
    let build = fs::read_to_string(project.join("build.sh")).unwrap();
    assert!(build.contains("-o dist/py_tools.wasm"), "{build}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = fs::metadata(project.join("build.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "build.sh is executable: {mode:o}");
    }
    let app = fs::read_to_string(project.join("src/app.py")).unwrap();
    assert!(
        app.contains("global _registration"),
        "the handle is kept alive"
    );
}

#[test]
fn new_js_project_pins_exact_tool_versions() {
    let cwd = tempfile::tempdir().unwrap();
    let (code, _, stderr) = new(&["js-tools", "--lang", "js"], cwd.path());
    assert_eq!(code, 0, "{stderr}");
    let project = cwd.path().join("js-tools");
    let package: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(project.join("package.json")).unwrap()).unwrap();
    assert_eq!(package["name"], "js-tools");
    assert_eq!(package["scripts"]["build"], "node build.mjs");
    let dev = package["devDependencies"].as_object().unwrap();
    assert_eq!(dev["@bytecodealliance/componentize-js"], "0.23.0");
    for (name, version) in dev {
        let version = version.as_str().unwrap();
        assert!(
            version.chars().all(|c| c.is_ascii_digit() || c == '.'),
            "{name} is pinned exactly, not {version}"
        );
    }
    let build = fs::read_to_string(project.join("build.mjs")).unwrap();
    assert!(build.contains("dist/js_tools.wasm"), "{build}");
}
