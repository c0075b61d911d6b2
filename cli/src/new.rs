//! `toolhost new NAME`: a ready plugin project (build script, manifest,
//! samples, CI workflow, README and one example tool) from the templates in
//! `cli/templates/<language>/`, which `build.rs` embeds in the binary.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use clap::ValueEnum;

use crate::{Failure, exit, stdio, usage};

include!(concat!(env!("OUT_DIR"), "/templates.rs"));

/// The plugin world, written into projects whose toolchain generates bindings
/// from WIT: the copy this CLI was built with, so a new project targets
/// exactly the world this host runs.
const WIT: &str = include_str!("../../wit/v0.1/world.wit");

/// Where the WIT goes in such a project (its build script reads it there).
const WIT_PATH: &str = "wit/world.wit";

/// The version of `toolhost-sdk` a project depends on: this CLI's own.
const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Stripped from template file names: it keeps a file from acting as what it
/// is inside this repository (a `Cargo.toml` would make cargo see a package).
const TEMPLATE_SUFFIX: &str = ".tmpl";

/// The longest plugin name.
const MAX_NAME: usize = 64;

/// Names a Rust package, npm package or Python module cannot have, or that
/// would clash with what the project depends on, in groups of words.
const RESERVED: &[&str] = &[
    // Rust keywords, strict and reserved.
    "as async await break const continue crate dyn else enum extern false fn for gen if impl \
     in let loop match mod move mut pub ref return self static struct super trait true type \
     unsafe use where while abstract become box do final macro override priv try typeof \
     unsized virtual yield",
    // Rust's built-in crates, and the SDK.
    "alloc core proc_macro std test toolhost_sdk toolhost_sdk_macros",
    // The device names Windows reserves.
    "con prn aux nul com1 com2 com3 com4 com5 com6 com7 com8 com9 \
     lpt1 lpt2 lpt3 lpt4 lpt5 lpt6 lpt7 lpt8 lpt9",
];

/// The language of a new plugin.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Lang {
    /// Rust with `toolhost-sdk`, built by cargo for wasm32-wasip2.
    Rust,
    /// Python, built by componentize-py.
    Python,
    /// JavaScript, built by componentize-js.
    Js,
}

impl Lang {
    /// Its directory under `cli/templates/`.
    fn dir(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }

    /// Whether its toolchain generates bindings from a WIT copy in the
    /// project (Rust gets them from the SDK).
    fn needs_wit(self) -> bool {
        !matches!(self, Lang::Rust)
    }

    /// The commands that build a new project, as its README gives them.
    fn build_steps(self) -> &'static [&'static str] {
        match self {
            Lang::Rust => &["cargo build --release --target wasm32-wasip2"],
            Lang::Python => &[
                "python3 -m venv .venv && . .venv/bin/activate",
                "pip install -r requirements.txt",
                "./build.sh",
            ],
            Lang::Js => &["npm install", "npm run build"],
        }
    }
}

/// Creates the project and prints the next steps.
pub(crate) fn run(name: &str, lang: Lang, dir: Option<&Path>) -> Result<u8, Failure> {
    let crate_name = check_name(name).map_err(usage)?;
    let dir = dir.map_or_else(|| PathBuf::from(name), Path::to_owned);
    check_destination(&dir).map_err(usage)?;
    let files = render(lang, name, &crate_name)?;
    create(&dir, &files)?;
    stdio::line(&next_steps(lang, name, &dir))?;
    Ok(exit::COMPLETED)
}

/// Checks a plugin name and gives its snake_case form (the Rust crate and
/// the `.wasm` file name).
fn check_name(name: &str) -> anyhow::Result<String> {
    let invalid = |why: String| {
        anyhow!(
            "`{}` is not a valid plugin name: {why}; use lowercase ASCII letters, digits, \
             `-` and `_`, starting with a letter (e.g. `my-tools`)",
            name.escape_default()
        )
    };
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    match name.chars().next() {
        None => return Err(invalid("it is empty".into())),
        Some(first) if !first.is_ascii_lowercase() => {
            return Err(invalid(format!(
                "it starts with `{}`",
                first.escape_default()
            )));
        }
        Some(_) => {}
    }
    if let Some(bad) = name.chars().find(|&c| !allowed(c)) {
        return Err(invalid(format!(
            "`{}` is not allowed",
            bad.escape_default()
        )));
    }
    if name.len() > MAX_NAME {
        return Err(invalid(format!("it is longer than {MAX_NAME} characters")));
    }
    let crate_name = name.replace('-', "_");
    let mut reserved = RESERVED.iter().flat_map(|group| group.split_whitespace());
    if reserved.any(|word| word == crate_name) {
        bail!(
            "`{name}` is reserved (a Rust keyword, a built-in crate or a device name); \
             choose another name"
        );
    }
    Ok(crate_name)
}

/// The project directory must not exist, or be an empty directory: nothing
/// of the user's is ever overwritten.
fn check_destination(dir: &Path) -> anyhow::Result<()> {
    match fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow!(e).context(format!("cannot inspect {}", dir.display()))),
        Ok(meta) if !meta.is_dir() => bail!("{} exists and is not a directory", dir.display()),
        Ok(_) => {
            let mut entries =
                fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
            if entries.next().is_some() {
                bail!(
                    "{} exists and is not empty; choose another NAME or --dir, \
                     or remove the directory",
                    dir.display()
                );
            }
            Ok(())
        }
    }
}

/// One file of the new project.
#[derive(Debug)]
struct File {
    path: String,
    contents: Vec<u8>,
}

/// The language's template files with their placeholders filled in and
/// their `.tmpl` suffix stripped, plus the WIT where the language needs it.
fn render(lang: Lang, name: &str, crate_name: &str) -> anyhow::Result<Vec<File>> {
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{crate_name}}", crate_name)
            .replace("{{sdk_version}}", SDK_VERSION)
    };
    let mut files: Vec<File> = FILES
        .iter()
        .filter(|(l, _, _)| *l == lang.dir())
        .map(|(_, path, bytes)| File {
            path: path
                .strip_suffix(TEMPLATE_SUFFIX)
                .unwrap_or(path)
                .to_owned(),
            contents: match std::str::from_utf8(bytes) {
                Ok(text) => fill(text).into_bytes(),
                Err(_) => bytes.to_vec(),
            },
        })
        .collect();
    if files.is_empty() {
        bail!("this toolhost was built without a {} template", lang.dir());
    }
    if lang.needs_wit() {
        files.push(File {
            path: WIT_PATH.to_owned(),
            contents: WIT.as_bytes().to_vec(),
        });
    }
    Ok(files)
}

/// Writes the files under `dir`; on failure, removes what it wrote.
fn create(dir: &Path, files: &[File]) -> anyhow::Result<()> {
    let existed = dir.exists();
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let result = files.iter().try_for_each(|f| write_new(dir, f));
    if result.is_err() {
        // The directory was absent or empty: everything in it is ours.
        let _ = if existed {
            clear(dir)
        } else {
            fs::remove_dir_all(dir)
        };
    }
    result
}

/// Writes one file, which must not exist yet; shell scripts are executable.
fn write_new(dir: &Path, file: &File) -> anyhow::Result<()> {
    let path = dir.join(&file.path);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if file.path.ends_with(".sh") {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o755);
    }
    options
        .open(&path)
        .and_then(|mut f| f.write_all(&file.contents))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Removes everything inside `dir`.
fn clear(dir: &Path) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            fs::remove_dir_all(path)?;
        } else {
            fs::remove_file(path)?;
        }
    }
    Ok(())
}

/// What to run next, in the new project.
fn next_steps(lang: Lang, name: &str, dir: &Path) -> String {
    let mut text = format!(
        "Created the {} plugin `{name}` in {}\n\nNext steps:\n  cd {}\n",
        lang.dir(),
        dir.display(),
        shell_quote(&dir.display().to_string())
    );
    for step in lang.build_steps() {
        text += &format!("  {step}\n");
    }
    text += "  toolhost check toolhost.toml\n\nThe README in the project says more.";
    text
}

/// `text` as one shell word.
fn shell_quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}
