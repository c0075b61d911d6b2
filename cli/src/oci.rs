//! Plugins from OCI registries (R41): `toolhost push`, `toolhost sign`,
//! `toolhost lock` and `toolhost inspect` (the flags every command takes to
//! pull `oci://` plugins are in `oci_args.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use toolhost::manifest::Source;
use toolhost::oci::{ANNOTATION_TOOLS, ANNOTATION_WIT_WORLD, LOCK_FILE, Lock, Locked, SigningKey};

use crate::common::{Common, activate_all, specs};
use crate::{Failure, exit, stdio, usage};

/// `toolhost push PLUGIN.wasm oci://REGISTRY/REPO:TAG`.
#[derive(Args)]
pub(crate) struct PushArgs {
    /// The component to push (a .wasm file).
    plugin: PathBuf,
    /// Where to: oci://REGISTRY/REPOSITORY:TAG.
    reference: String,
    /// Sign the pushed manifest with this private key (PKCS#8 PEM, P-256),
    /// as `cosign sign --key` would.
    #[arg(long, value_name = "KEY")]
    sign: Option<PathBuf>,
    /// The name annotation (default: the file's stem).
    #[arg(long)]
    name: Option<String>,
    /// The version annotation (default: the tag).
    #[arg(long = "plugin-version", value_name = "VERSION")]
    version: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// `toolhost push`: loads the plugin (to refuse a broken one and to name
/// its tools), then pushes it with its annotations, signed if asked.
pub(crate) async fn push(args: &PushArgs) -> Result<u8, Failure> {
    let key = match &args.sign {
        Some(path) => Some(SigningKey::read(path).map_err(|e| usage(e.into()))?),
        None => None,
    };
    let wasm = std::fs::read(&args.plugin)
        .with_context(|| format!("cannot read {}", args.plugin.display()))
        .map_err(usage)?;
    // Loaded only to be checked and to list its tools: nothing cached.
    let mut common = args.common.clone();
    common.no_cache = true;
    let host = common.host(None, false).await?;
    let specs = specs(std::slice::from_ref(&args.plugin), &args.common)?;
    let (location, _held) = activate_all(&host, &specs).await?;
    let tools: Vec<String> = location.catalog().into_iter().map(|e| e.name).collect();
    let reference =
        toolhost::oci::OciReference::parse(&args.reference).map_err(|e| usage(e.into()))?;
    let name = args.name.clone().unwrap_or_else(|| {
        args.plugin
            .file_stem()
            .map_or_else(|| "plugin".to_owned(), |s| s.to_string_lossy().into_owned())
    });
    let version = args
        .version
        .clone()
        .or_else(|| reference.tag().map(str::to_owned))
        .unwrap_or_default();
    let annotations = BTreeMap::from([
        ("org.opencontainers.image.title".to_owned(), name),
        ("org.opencontainers.image.version".to_owned(), version),
        (
            ANNOTATION_WIT_WORLD.to_owned(),
            format!("{}@{}", toolhost::WIT_PACKAGE, toolhost::WIT_VERSION),
        ),
        (ANNOTATION_TOOLS.to_owned(), tools.join(",")),
    ]);
    let pushed = args
        .common
        .distribution()?
        .push(&wasm, &args.reference, annotations, key.as_ref())
        .await
        .map_err(toolhost::Error::from)?;
    if args.common.json {
        stdio::line(&serde_json::to_string(&pushed).context("cannot print the push")?)?;
    } else {
        stdio::line(&format!("pushed {}@{}", pushed.reference, pushed.digest))?;
        if let Some(signer) = &pushed.signer {
            stdio::line(&format!("signed by {signer}"))?;
        }
    }
    Ok(exit::COMPLETED)
}

/// `toolhost lock MANIFEST...`: pulls and verifies every `oci://` plugin
/// the manifests (or arguments) name and writes ./toolhost.lock.
pub(crate) async fn lock(plugins: &[PathBuf], common: &Common) -> Result<u8, Failure> {
    let distribution = common.distribution()?;
    // Only the references: nothing is loaded, so grants need no review.
    let mut references = Vec::new();
    for path in plugins {
        if path.extension().is_some_and(|e| e == "toml") {
            for source in Source::load(path).map_err(toolhost::Error::from)? {
                if let Source::Plugin(manifest) = source {
                    references.push(manifest.path);
                }
            }
        } else {
            references.push(path.clone());
        }
    }
    let mut lock = Lock::new();
    for path in &references {
        let Some(reference) = path.to_str().filter(|p| p.starts_with("oci://")) else {
            continue;
        };
        let fetched = distribution
            .fetch(reference, toolhost::limits::MAX_PLUGIN_BYTES)
            .await
            .map_err(toolhost::Error::from)?;
        if !common.json {
            stdio::line(&format!("{reference} -> {}", fetched.digest))?;
        }
        lock.insert(Locked::new(
            reference.to_owned(),
            fetched.digest,
            fetched.signer,
        ));
    }
    if lock.entries().is_empty() {
        return Err(usage(anyhow::anyhow!(
            "no oci:// plugin in {}; a lock file pins oci:// references",
            plugins
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    lock.write(Path::new(LOCK_FILE))
        .map_err(toolhost::Error::from)?;
    if common.json {
        stdio::line(&serde_json::to_string(lock.entries()).context("cannot print the lock")?)?;
    }
    Ok(exit::COMPLETED)
}

/// `toolhost sign oci://REF --key KEY | --bundle FILE`.
#[derive(Args)]
#[group(id = "how", required = true, multiple = false, args = ["key", "bundle"])]
pub(crate) struct SignArgs {
    /// The pushed plugin: oci://REGISTRY/REPOSITORY:TAG or @sha256:DIGEST.
    reference: String,
    /// Sign with this private key (PKCS#8 PEM, P-256), as `cosign sign
    /// --key` would.
    #[arg(long, value_name = "KEY")]
    key: Option<PathBuf>,
    /// Attach this Sigstore bundle: a keyless signature of the manifest's
    /// bytes (`toolhost inspect --manifest FILE`, then `python -m sigstore
    /// sign FILE` or `cosign sign-blob --bundle`).
    #[arg(long, value_name = "FILE")]
    bundle: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// `toolhost sign`: adds a key-pair signature or a keyless bundle to a
/// pushed plugin's signature manifest.
pub(crate) async fn sign(args: &SignArgs) -> Result<u8, Failure> {
    let distribution = args.common.distribution()?;
    let signed = match (&args.key, &args.bundle) {
        (Some(key), _) => {
            let key = SigningKey::read(key).map_err(|e| usage(e.into()))?;
            distribution.sign(&args.reference, &key).await
        }
        (None, Some(file)) => {
            let bundle = read_bundle(file)?;
            distribution.attach_bundle(&args.reference, &bundle).await
        }
        (None, None) => unreachable!("clap requires --key or --bundle"),
    }
    .map_err(toolhost::Error::from)?;
    if args.common.json {
        stdio::line(&serde_json::to_string(&signed).context("cannot print it")?)?;
        return Ok(exit::COMPLETED);
    }
    stdio::line(&format!("signed {}@{}", signed.reference, signed.digest))?;
    stdio::line(&match &signed.signer {
        Some(signer) => format!("signed by {}", crate::terminal::line(signer)),
        None => "attached; its signer is not trusted by this machine's trust policy".into(),
    })?;
    Ok(exit::COMPLETED)
}

/// A bundle file, bounded as a registry's would be.
fn read_bundle(path: &Path) -> Result<Vec<u8>, Failure> {
    let limit = toolhost::oci::MAX_SIGSTORE_BUNDLE_BYTES;
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(usage)?
        .len();
    if len > limit {
        return Err(usage(anyhow::anyhow!(
            "{} is {len} bytes, more than a Sigstore bundle can be ({limit} bytes)",
            path.display()
        )));
    }
    std::fs::read(path)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(usage)
}

/// `toolhost inspect oci://...`: digest, annotations and signers, nothing
/// run and no component pulled; with `manifest`, the manifest's bytes
/// written there.
pub(crate) async fn inspect(
    reference: &str,
    manifest: Option<&Path>,
    common: &Common,
) -> Result<u8, Failure> {
    let distribution = common.distribution()?;
    if let Some(file) = manifest {
        let (_, bytes) = distribution
            .manifest_bytes(reference)
            .await
            .map_err(toolhost::Error::from)?;
        std::fs::write(file, bytes)
            .with_context(|| format!("cannot write {}", file.display()))
            .map_err(usage)?;
    }
    let inspection = distribution
        .inspect(reference)
        .await
        .map_err(toolhost::Error::from)?;
    if common.json {
        stdio::line(&serde_json::to_string(&inspection).context("cannot print it")?)?;
        return Ok(exit::COMPLETED);
    }
    let mut out = vec![
        inspection.reference.clone(),
        format!("  digest: {}", inspection.digest),
        format!("  layer:  {} ({} bytes)", inspection.layer, inspection.size),
    ];
    for (key, value) in &inspection.annotations {
        out.push(format!("  {key}: {}", crate::terminal::line(value)));
    }
    if inspection.signatures.is_empty() {
        out.push("  signatures: none".into());
    }
    for signer in &inspection.signatures {
        out.push(match signer {
            Some(key) if key.starts_with("sha256:") => format!("  signed by trusted key {key}"),
            Some(signer) => format!(
                "  signed keylessly by trusted {}",
                crate::terminal::line(signer)
            ),
            None => "  signed by a key or identity not trusted for this repository".into(),
        });
    }
    stdio::line(&out.join("\n"))?;
    Ok(exit::COMPLETED)
}
