//! Plugins from OCI registries (R41), end to end through the `toolhost`
//! CLI against a real registry (Debian's `docker-registry`) on loopback:
//! push, lock, pull and call; and every way an artifact can be wrong —
//! a tampered layer, a swapped manifest, another key's signature, no
//! signature, a moved tag — refused before anything is compiled (the
//! compile cache stays empty); a locked, pulled digest loads with the
//! registry stopped.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolhost_tests::exited;
use toolhost_tests::registry::{Options, Registry, digest as sha256};
use toolhost_tests::sigstore::Instance;

use crate::TEXT_TOOLS;

/// The repository every test pushes to.
const REPOSITORY: &str = "tools/text";

/// A registry, a working directory (state, compile cache, keys, manifest,
/// lock file) and two key pairs: `trusted` and `stranger`.
struct Setup {
    registry: Registry,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup::with(Options::default())
    }

    fn with(options: Options) -> Setup {
        let setup = Setup {
            registry: Registry::start_with(options),
            dir: tempfile::tempdir().expect("a temporary directory"),
        };
        for name in ["trusted", "stranger"] {
            let key = rcgen::KeyPair::generate().expect("a P-256 key");
            std::fs::write(setup.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
            std::fs::write(setup.path(&format!("{name}.pub")), key.public_key_pem()).unwrap();
        }
        setup
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `oci://127.0.0.1:PORT/tools/text:TAG`.
    fn reference(&self, tag: &str) -> String {
        format!("oci://{}/{REPOSITORY}:{tag}", self.registry.address())
    }

    /// `127.0.0.1:PORT/tools/text`, what trust flags match.
    fn repository(&self) -> String {
        format!("{}/{REPOSITORY}", self.registry.address())
    }

    /// Runs `toolhost` in the working directory with its own state and
    /// compile cache and no credentials from the environment.
    fn toolhost(&self, args: &[&str]) -> (i32, String, String) {
        self.toolhost_env(args, &[])
    }

    /// [`Setup::toolhost`] with environment variables set.
    fn toolhost_env(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(args)
            .arg("--state-dir")
            .arg(self.path("state"))
            .current_dir(self.dir.path())
            .env("TOOLHOST_CACHE_DIR", self.path("cache"))
            .env("HOME", self.dir.path())
            .env_remove("DOCKER_CONFIG")
            .env_remove("TOOLHOST_REGISTRY_USERNAME")
            .env_remove("TOOLHOST_REGISTRY_PASSWORD")
            .env_remove("TOOLHOST_REGISTRY_HOSTS")
            .envs(env.iter().copied())
            .output()
            .expect("runs toolhost");
        exited(out)
    }

    /// `--trust-key REPO=trusted.pub`.
    fn trusting(&self) -> String {
        format!(
            "{}={}",
            self.repository(),
            self.path("trusted.pub").display()
        )
    }

    /// Pushes `plugin` to `tag`, signed by `key` if given; its manifest
    /// digest.
    fn push(&self, plugin: &str, tag: &str, key: Option<&str>) -> String {
        self.push_to(plugin, &self.reference(tag), key)
    }

    /// [`Setup::push`] to any reference.
    fn push_to(&self, plugin: &str, reference: &str, key: Option<&str>) -> String {
        let key_file = key.map(|k| self.path(&format!("{k}.key")));
        let mut args = vec!["push", plugin, reference, "--json"];
        if let Some(file) = &key_file {
            args.extend(["--sign", file.to_str().unwrap()]);
        }
        let (code, stdout, stderr) = self.toolhost(&args);
        assert_eq!(code, 0, "push failed: {stderr}");
        let pushed: serde_json::Value = serde_json::from_str(&stdout).expect("push --json");
        let digest = pushed["digest"].as_str().expect("a digest").to_owned();
        assert!(
            digest.starts_with("sha256:") && digest.len() == 71,
            "{digest}"
        );
        digest
    }

    /// Calls `echo` on `plugin` with `flags`.
    fn echo(&self, plugin: &str, flags: &[&str]) -> (i32, String, String) {
        let mut args = vec!["call", plugin, "echo", "--input", r#"{"message": "hi"}"#];
        args.extend_from_slice(flags);
        self.toolhost(&args)
    }

    /// The compiled components in the compile cache.
    fn compiled(&self) -> usize {
        std::fs::read_dir(self.path("cache"))
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// A manifest naming `reference`, written as `toolhost.toml`.
    fn manifest(&self, reference: &str) -> PathBuf {
        let path = self.path("toolhost.toml");
        std::fs::write(&path, format!("path = \"{reference}\"\n")).unwrap();
        path
    }

    /// A raw request to the registry: its status and body.
    fn http(&self, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Vec<u8>) {
        let (head, body) = self.exchange(method, path, body);
        let status = head[9..12].parse().expect("a status");
        (status, body)
    }

    /// A raw request to the registry: the response's head and body.
    fn exchange(&self, method: &str, path: &str, body: Option<&[u8]>) -> (String, Vec<u8>) {
        let mut stream = TcpStream::connect(self.registry.address()).expect("the registry");
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/vnd.oci.image.manifest.v1+json\r\nConnection: close\r\n",
            self.registry.address()
        );
        if let Some(body) = body {
            request += &format!(
                "Content-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {}\r\n",
                body.len()
            );
        }
        request += "\r\n";
        stream.write_all(request.as_bytes()).unwrap();
        if let Some(body) = body {
            stream.write_all(body).unwrap();
        }
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a response head");
        let head = String::from_utf8_lossy(&response[..split]).into_owned();
        (head, response[split + 4..].to_vec())
    }

    /// Uploads `bytes` as a blob of the repository (a POST, then a PUT of
    /// the whole); its digest.
    fn upload(&self, bytes: &[u8]) -> String {
        let (head, _) = self.exchange("POST", &format!("/v2/{REPOSITORY}/blobs/uploads/"), None);
        assert!(head.starts_with("HTTP/1.1 202"), "{head}");
        let location = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("location").then(|| value.trim())
            })
            .expect("an upload location");
        let path = &location[location.find("/v2/").expect("a registry path")..];
        let digest = sha256(bytes);
        let separator = if path.contains('?') { '&' } else { '?' };
        let put = format!("{path}{separator}digest={digest}");
        assert_eq!(self.http("PUT", &put, Some(bytes)).0, 201);
        digest
    }

    /// Makes `bundle` (Sigstore bundle JSON) the one signature of the
    /// manifest `digest`, written straight to the registry (`toolhost sign
    /// --bundle` attaches message signatures only).
    fn attach(&self, digest: &str, bundle: &str) {
        let config = self.upload(b"{}");
        let layer = self.upload(bundle.as_bytes());
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
            "layers": [{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "digest": layer, "size": bundle.len()}],
        });
        let tag = digest.replacen(':', "-", 1) + ".sig";
        let path = format!("/v2/{REPOSITORY}/manifests/{tag}");
        let body = manifest.to_string();
        assert_eq!(self.http("PUT", &path, Some(body.as_bytes())).0, 201);
    }

    /// The digest of the manifest's one layer (`inspect --json`).
    fn layer(&self, tag: &str) -> String {
        let (code, stdout, stderr) = self.toolhost(&[
            "inspect",
            &self.reference(tag),
            "--json",
            "--trust-key",
            &self.trusting(),
        ]);
        assert_eq!(code, 0, "{stderr}");
        let inspected: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        inspected["layer"].as_str().unwrap().to_owned()
    }
}

/// The lock file's pins: reference → (digest, signer).
fn pins(path: &Path) -> toml::Table {
    toml::from_str(&std::fs::read_to_string(path).expect("toolhost.lock")).expect("TOML")
}

#[test]
fn r41_push_lock_pull_and_call_a_signed_plugin() {
    let setup = Setup::new();
    let digest = setup.push(TEXT_TOOLS, "1.0", Some("trusted"));
    let reference = setup.reference("1.0");

    // inspect: annotations, digest and the trusted signer; nothing compiled.
    let (code, stdout, stderr) = setup.toolhost(&[
        "inspect",
        &reference,
        "--json",
        "--trust-key",
        &setup.trusting(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let inspected: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(inspected["digest"], digest.as_str());
    let annotations = &inspected["annotations"];
    assert_eq!(annotations["org.opencontainers.image.title"], "text_tools");
    assert_eq!(annotations["org.opencontainers.image.version"], "1.0");
    assert_eq!(
        annotations["dev.toolhost.wit-world"],
        "toolhost:plugin@0.1.0"
    );
    assert_eq!(
        annotations["dev.toolhost.tools"],
        "echo,regex_search,word_count"
    );
    let signers = inspected["signatures"].as_array().unwrap();
    assert_eq!(signers.len(), 1, "{inspected}");
    assert!(signers[0].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(setup.compiled(), 0);

    // The CNCF wasm OCI artifact layout, as the registry holds it.
    let (status, body) = setup.http("GET", &format!("/v2/{REPOSITORY}/manifests/{digest}"), None);
    assert_eq!(status, 200);
    let manifest: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(manifest["layers"][0]["digest"], inspected["layer"]);
    let config = manifest["config"]["digest"].as_str().unwrap();
    let (status, body) = setup.http("GET", &format!("/v2/{REPOSITORY}/blobs/{config}"), None);
    assert_eq!(status, 200);
    let config: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (&config["architecture"], &config["os"]),
        (&"wasm".into(), &"wasip2".into())
    );
    assert_eq!(config["layerDigests"][0], inspected["layer"]);
    let exports = config["component"]["exports"].as_array().unwrap();
    assert!(
        exports.contains(&"toolhost:plugin/plugin@0.1.0".into()),
        "{config}"
    );

    // lock: the manifest's reference pinned to the pushed digest and signer.
    let manifest = setup.manifest(&reference);
    let trust = setup.trusting();
    let (code, _, stderr) =
        setup.toolhost(&["lock", manifest.to_str().unwrap(), "--trust-key", &trust]);
    assert_eq!(code, 0, "{stderr}");
    let lock = pins(&setup.path("toolhost.lock"));
    let pinned = &lock["plugin"].as_array().unwrap()[0];
    assert_eq!(pinned["reference"].as_str(), Some(reference.as_str()));
    assert_eq!(pinned["digest"].as_str(), Some(digest.as_str()));
    assert_eq!(pinned["signer"], signers[0].as_str().unwrap().into());

    // pull and call, through the manifest and --locked.
    let (code, stdout, stderr) = setup.echo(
        manifest.to_str().unwrap(),
        &["--locked", "--trust-key", &trust],
    );
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
    assert_eq!(setup.compiled(), 1);

    // By digest, the same component: from the compile cache.
    let pinned = format!("oci://{}@{digest}", setup.repository());
    let (code, stdout, stderr) = setup.echo(&pinned, &["--trust-key", &trust, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let outcome: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(outcome["status"], "completed", "{outcome}");
    assert_eq!(setup.compiled(), 1);
}

#[test]
fn r41_a_tampered_layer_is_refused_before_compiling() {
    let setup = Setup::new();
    let digest = setup.push(TEXT_TOOLS, "1.0", Some("trusted"));
    let layer = setup.layer("1.0");
    let file = setup.registry.blob_file(&layer);
    let mut bytes = std::fs::read(&file).expect("the stored layer");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();

    let reference = setup.reference("1.0");
    let (code, _, stderr) = setup.echo(&reference, &["--trust-key", &setup.trusting()]);
    assert_eq!(code, 2, "{stderr}");
    // Toolhost's own check, naming both digests (not the client library's
    // or the registry's words).
    let error = format!(
        "{reference}: digest mismatch in its layer: expected {layer}, got {}; the registry served other content than the digest names, so it was refused",
        sha256(&bytes)
    );
    assert!(stderr.contains(&error), "{stderr}");
    assert_eq!(setup.compiled(), 0, "nothing compiled");
    // Nothing of it kept: the manifest may be, the layer is not.
    let stored = setup
        .path("state/oci/blobs/sha256")
        .join(layer.trim_start_matches("sha256:"));
    assert!(!stored.exists());
    let manifest = setup
        .path("state/oci/blobs/sha256")
        .join(digest.trim_start_matches("sha256:"));
    assert!(manifest.is_file(), "the verified manifest is kept");
}

#[test]
fn r41_a_manifest_swapped_under_the_tag_with_a_copied_signature_is_refused() {
    let setup = Setup::new();
    let signed = setup.push(TEXT_TOOLS, "1.0", Some("trusted"));
    // Another component under the same tag, unsigned, given the first
    // one's signature manifest.
    let swapped = setup.push(crate::FS_TOOLS, "1.0", None);
    assert_ne!(signed, swapped);
    let tag = |d: &str| d.replacen(':', "-", 1) + ".sig";
    let (status, signature) = setup.http(
        "GET",
        &format!("/v2/{REPOSITORY}/manifests/{}", tag(&signed)),
        None,
    );
    assert_eq!(status, 200);
    let (status, _) = setup.http(
        "PUT",
        &format!("/v2/{REPOSITORY}/manifests/{}", tag(&swapped)),
        Some(&signature),
    );
    assert_eq!(status, 201);

    let reference = setup.reference("1.0");
    let (code, _, stderr) = setup.echo(&reference, &["--trust-key", &setup.trusting()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{reference} ({swapped}) was refused: bad signature"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("signs {signed}, another manifest")),
        "{stderr}"
    );
    assert_eq!(setup.compiled(), 0, "nothing compiled");
}

#[test]
fn r41_a_signature_by_another_key_is_refused_before_compiling() {
    let setup = Setup::new();
    let digest = setup.push(TEXT_TOOLS, "1.0", Some("stranger"));
    let reference = setup.reference("1.0");
    let (code, _, stderr) = setup.echo(&reference, &["--trust-key", &setup.trusting()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("{reference} ({digest}) was refused: wrong signer")),
        "{stderr}"
    );
    assert_eq!(setup.compiled(), 0, "nothing compiled");
}

#[test]
fn r41_a_signature_made_for_another_repository_is_refused_unless_its_rule_allows_any_reference() {
    let setup = Setup::new();
    let registry = setup.registry.address();
    // Signed in the sandbox repository, then copied with its signature to
    // the production one (as `cosign copy` does); the digest is the same.
    let sandbox = format!("oci://{registry}/tools/sandbox-tool:1.0");
    let digest = setup.push_to(TEXT_TOOLS, &sandbox, Some("trusted"));
    let prod = format!("oci://{registry}/tools/prod-tool:1.0");
    assert_eq!(setup.push_to(TEXT_TOOLS, &prod, None), digest);
    let tag = digest.replacen(':', "-", 1) + ".sig";
    let (status, signatures) = setup.http(
        "GET",
        &format!("/v2/tools/sandbox-tool/manifests/{tag}"),
        None,
    );
    assert_eq!(status, 200);
    let manifest: serde_json::Value = serde_json::from_slice(&signatures).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    for blob in layers.iter().chain([&manifest["config"]]) {
        let blob = blob["digest"].as_str().unwrap();
        let mount =
            format!("/v2/tools/prod-tool/blobs/uploads/?mount={blob}&from=tools/sandbox-tool");
        assert_eq!(setup.http("POST", &mount, None).0, 201);
    }
    let (status, _) = setup.http(
        "PUT",
        &format!("/v2/tools/prod-tool/manifests/{tag}"),
        Some(&signatures),
    );
    assert_eq!(status, 201);

    // One key trusted for both repositories.
    let trust = format!("{registry}/tools/*={}", setup.path("trusted.pub").display());
    let (code, _, stderr) = setup.echo(&prod, &["--trust-key", &trust]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{prod} ({digest}) was refused: bad signature: the signature is valid but was made for {registry}/tools/sandbox-tool, not {registry}/tools/prod-tool"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("any-reference = true"), "{stderr}");
    assert_eq!(setup.compiled(), 0, "nothing compiled");
    let (code, stdout, stderr) =
        setup.toolhost(&["inspect", &prod, "--json", "--trust-key", &trust]);
    assert_eq!(code, 0, "{stderr}");
    let inspected: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        inspected["signatures"],
        serde_json::json!([null]),
        "not shown as trusted: {inspected}"
    );

    // Where it was signed, it loads.
    let (code, stdout, stderr) = setup.echo(&sandbox, &["--trust-key", &trust]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");

    // A rule that accepts signatures made for any repository: it loads.
    let policy = setup.path("copies.toml");
    std::fs::write(
        &policy,
        format!(
            "[[trust]]\nrepository = \"{registry}/tools/prod-*\"\nkeys = [\"trusted.pub\"]\nany-reference = true\n"
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = setup.echo(&prod, &["--trust", policy.to_str().unwrap()]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
}

#[test]
fn r41_an_unsigned_plugin_is_refused_unless_its_repository_is_allowed_unsigned() {
    let setup = Setup::new();
    let digest = setup.push(TEXT_TOOLS, "1.0", None);
    let reference = setup.reference("1.0");

    let (code, _, stderr) = setup.echo(&reference, &["--trust-key", &setup.trusting()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("{reference} ({digest}) was refused: no signature")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("--allow-unsigned {}", setup.repository())),
        "{stderr}"
    );

    // No key trusted for it at all: refused too.
    let (code, _, stderr) = setup.echo(&reference, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no trusted key or keyless signer is configured"),
        "{stderr}"
    );
    assert_eq!(setup.compiled(), 0, "nothing compiled");

    // Allowed unsigned, explicitly: it loads.
    let (code, stdout, stderr) = setup.echo(&reference, &["--allow-unsigned", &setup.repository()]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
    assert_eq!(setup.compiled(), 1);
}

#[test]
fn r41_locked_refuses_a_moved_tag_naming_both_digests() {
    let setup = Setup::new();
    let locked = setup.push(TEXT_TOOLS, "1.0", Some("trusted"));
    let reference = setup.reference("1.0");
    let manifest = setup.manifest(&reference);
    let trust = setup.trusting();
    let (code, _, stderr) =
        setup.toolhost(&["lock", manifest.to_str().unwrap(), "--trust-key", &trust]);
    assert_eq!(code, 0, "{stderr}");
    let moved = setup.push(crate::FS_TOOLS, "1.0", Some("trusted"));

    let (code, _, stderr) = setup.toolhost(&[
        "list",
        manifest.to_str().unwrap(),
        "--locked",
        "--trust-key",
        &trust,
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{reference} moved: the lock file pins {locked}, the registry now has {moved}"
        )),
        "{stderr}"
    );
    assert_eq!(setup.compiled(), 0, "nothing compiled");

    // A reference the lock file does not name is refused under --locked.
    let other = setup.reference("2.0");
    let (code, _, stderr) = setup.toolhost(&["list", &other, "--locked", "--trust-key", &trust]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("{other} is not in the lock file")),
        "{stderr}"
    );
}

#[test]
fn r41_a_locked_pulled_digest_loads_with_the_registry_stopped() {
    let setup = Setup::new();
    let digest = setup.push(TEXT_TOOLS, "1.0", Some("trusted"));
    let reference = setup.reference("1.0");
    let manifest = setup.manifest(&reference);
    let trust = setup.trusting();
    let (code, _, stderr) =
        setup.toolhost(&["lock", manifest.to_str().unwrap(), "--trust-key", &trust]);
    assert_eq!(code, 0, "{stderr}");

    setup.registry.stop();
    let (code, stdout, stderr) = setup.echo(
        manifest.to_str().unwrap(),
        &["--locked", "--trust-key", &trust],
    );
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
    // Pinned by digest, offline too; its signature is checked again from
    // the content store.
    let pinned = format!("oci://{}@{digest}", setup.repository());
    let (code, stdout, stderr) = setup.echo(&pinned, &["--trust-key", &trust]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
    let (code, _, stderr) = setup.echo(
        &pinned,
        &[
            "--trust-key",
            &format!(
                "{}={}",
                setup.repository(),
                setup.path("stranger.pub").display()
            ),
        ],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("wrong signer"), "{stderr}");
    // A tag not locked and not reachable: refused, naming why.
    let (code, _, stderr) = setup.echo(&reference, &["--trust-key", &trust]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("{reference}: the registry is unreachable")),
        "{stderr}"
    );
}

#[test]
fn r41_pulls_over_tls_with_a_private_ca_and_basic_auth() {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, &ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let setup = Setup::with(Options {
        tls: Some((leaf.pem(), leaf_key.serialize_pem())),
        user: Some(("alice".into(), "s3cret".into())),
    });
    let ca_file = setup.path("ca.pem");
    std::fs::write(&ca_file, ca_cert.pem()).unwrap();
    let ca = ca_file.to_str().unwrap();
    let reference = setup.reference("1.0");
    let key = setup.path("trusted.key");
    let hosts = format!("example.test,{}", setup.registry.address());
    let credentials = [
        ("TOOLHOST_REGISTRY_USERNAME", "alice"),
        ("TOOLHOST_REGISTRY_PASSWORD", "s3cret"),
        ("TOOLHOST_REGISTRY_HOSTS", hosts.as_str()),
    ];

    // Credentials from the environment for no registry in particular: not
    // used, and the CLI says once what to set.
    let key_file = key.to_str().unwrap();
    let push = [
        "push",
        TEXT_TOOLS,
        &reference,
        "--sign",
        key_file,
        "--http-ca",
        ca,
    ];
    let (code, _, stderr) = setup.toolhost_env(&push, &credentials[..2]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("401"), "{stderr}");
    let warning = "TOOLHOST_REGISTRY_USERNAME and TOOLHOST_REGISTRY_PASSWORD are not used: set TOOLHOST_REGISTRY_HOSTS";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");

    // Pushed over HTTPS with credentials from the environment, for the
    // registries TOOLHOST_REGISTRY_HOSTS names.
    let (code, stdout, stderr) = setup.toolhost_env(&push, &credentials);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with(&format!("pushed {reference}@sha256:")),
        "{stdout}"
    );
    assert!(!stderr.contains(warning), "{stderr}");

    // Another registry, one a reference names (an attacker's, say), asking
    // for credentials: it gets none of them.
    let (other, heads) = challenger();
    let elsewhere = format!("oci://{other}/{REPOSITORY}:1.0");
    let unsigned = format!("{other}/{REPOSITORY}");
    let (code, _, stderr) = setup.toolhost_env(
        &["call", &elsewhere, "echo", "--allow-unsigned", &unsigned],
        &credentials,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("401"), "{stderr}");
    let heads = heads.lock().unwrap();
    assert!(
        heads.iter().any(|h| h.contains("/manifests/")),
        "asked: {heads:?}"
    );
    let sent: Vec<&String> = heads
        .iter()
        .filter(|h| h.to_ascii_lowercase().contains("\nauthorization:"))
        .collect();
    assert!(sent.is_empty(), "credentials sent to {other}: {sent:?}");

    // Without credentials: refused by the registry.
    let trust = setup.trusting();
    let (code, _, stderr) = setup.echo(&reference, &["--http-ca", ca, "--trust-key", &trust]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("401"), "{stderr}");

    // Without the CA: the certificate is not trusted, and that is what
    // the error says (not that the registry is offline).
    let (code, _, stderr) = setup.toolhost_env(
        &["call", &reference, "echo", "--trust-key", &trust],
        &credentials,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");
    assert!(!stderr.contains("unreachable"), "{stderr}");
    assert_eq!(setup.compiled(), 0);

    // Credentials from Docker's config.json, the CA from --http-ca: pulled
    // and called.
    let docker = setup.path(".docker");
    std::fs::create_dir(&docker).unwrap();
    std::fs::write(
        docker.join("config.json"),
        format!(
            r#"{{"auths": {{"{}": {{"auth": "YWxpY2U6czNjcmV0"}}}}}}"#,
            setup.registry.address()
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = setup.echo(&reference, &["--http-ca", ca, "--trust-key", &trust]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
}

/// A registry on loopback that answers every request with 401 and a basic
/// challenge, recording each request's head: an attacker's, hoping for
/// credentials. Its address and the heads.
fn challenger() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().unwrap().to_string();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                // A TLS hello (the HTTPS probe) or a hang-up: next.
                if stream.read(&mut byte).unwrap_or(0) == 0 || (head.is_empty() && byte[0] == 0x16)
                {
                    break;
                }
                head.push(byte[0]);
            }
            if !head.ends_with(b"\r\n\r\n") {
                continue;
            }
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            let _ = stream.write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"registry\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (address, heads)
}

/// Runs `script` with the `python3` on `PATH` (the venv's, under `cargo
/// xtask test`), in `dir`; its stdout.
fn python(script: &str, dir: &Path) -> String {
    let out = Command::new("python3")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .expect("runs python3");
    let (code, stdout, stderr) = exited(out);
    assert_eq!(code, 0, "python failed:\n{stderr}");
    stdout
}

#[test]
#[ignore = "needs the oras Python SDK: `cargo xtask test` runs it with target/venv on PATH"]
fn r41_artifacts_interoperate_with_the_oras_python_sdk() {
    let setup = Setup::new();
    let registry = setup.registry.address();
    let wasm = std::fs::read(TEXT_TOOLS).unwrap();
    std::fs::write(setup.path("plugin.wasm"), &wasm).unwrap();
    std::fs::write(
        setup.path("config.json"),
        r#"{"architecture": "wasm", "os": "wasip2"}"#,
    )
    .unwrap();

    // Pushed by oras in the wasm layout: Toolhost loads it.
    python(
        &format!(
            "import oras.client\n\
             c = oras.client.OrasClient(insecure=True)\n\
             c.push(target='{registry}/{REPOSITORY}:oras', files=['plugin.wasm:application/wasm'], \
             manifest_config='config.json:application/vnd.wasm.config.v0+json', quiet=True)\n"
        ),
        setup.dir.path(),
    );
    let (code, stdout, stderr) = setup.echo(
        &setup.reference("oras"),
        &["--allow-unsigned", &setup.repository()],
    );
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");

    // Pushed (and signed) by Toolhost: oras pulls the same component.
    setup.push(TEXT_TOOLS, "1.0", Some("trusted"));
    let pulled = python(
        &format!(
            "import oras.client\n\
             c = oras.client.OrasClient(insecure=True)\n\
             print('\\n'.join(c.pull(target='{registry}/{REPOSITORY}:1.0', outdir='pulled')))\n"
        ),
        setup.dir.path(),
    );
    let files: Vec<&str> = pulled.lines().collect();
    assert_eq!(files.len(), 1, "{pulled}");
    assert_eq!(std::fs::read(setup.path(files[0])).unwrap(), wasm);
}

#[test]
fn r41_locked_refuses_a_signer_other_than_the_locked_one() {
    let setup = Setup::new();
    let digest = setup.push(TEXT_TOOLS, "1.0", Some("trusted"));
    let reference = setup.reference("1.0");
    let manifest = setup.manifest(&reference);
    let (code, _, stderr) = setup.toolhost(&[
        "lock",
        manifest.to_str().unwrap(),
        "--trust-key",
        &setup.trusting(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    // The same manifest (pushes are deterministic), signed by another key
    // too, which is the only one trusted now.
    assert_eq!(setup.push(TEXT_TOOLS, "1.0", Some("stranger")), digest);
    let stranger = format!(
        "{}={}",
        setup.repository(),
        setup.path("stranger.pub").display()
    );
    let (code, _, stderr) = setup.echo(
        manifest.to_str().unwrap(),
        &["--locked", "--trust-key", &stranger],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{reference} ({digest}) was refused: wrong signer: the lock file names signer sha256:"
        )),
        "{stderr}"
    );
    assert_eq!(setup.compiled(), 0, "nothing compiled");
    // Without --locked the stranger's signature is enough for its policy.
    let (code, stdout, stderr) = setup.echo(&reference, &["--trust-key", &stranger]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
}

/// Runs `wkg` (on `PATH`: target/tools/bin under `cargo xtask test`) with
/// `args` in the working directory, no credentials.
fn wkg(setup: &Setup, args: &[&str]) {
    let out = Command::new("wkg")
        .args(args)
        .current_dir(setup.dir.path())
        .env("HOME", setup.dir.path())
        .output()
        .expect("runs wkg (cargo install wkg)");
    let (code, _, stderr) = exited(out);
    assert_eq!(code, 0, "wkg {args:?} failed:\n{stderr}");
}

#[test]
#[ignore = "needs wkg: `cargo xtask test` installs it into target/tools and runs it"]
fn r41_artifacts_interoperate_with_wkg() {
    let setup = Setup::new();
    let registry = setup.registry.address();
    let wasm = std::fs::read(TEXT_TOOLS).unwrap();

    // Pushed by wkg: Toolhost loads it.
    let pushed_by_wkg = format!("{registry}/{REPOSITORY}:wkg");
    wkg(
        &setup,
        &[
            "oci",
            "push",
            "--insecure",
            &registry,
            &pushed_by_wkg,
            TEXT_TOOLS,
        ],
    );
    let (code, stdout, stderr) = setup.echo(
        &setup.reference("wkg"),
        &["--allow-unsigned", &setup.repository()],
    );
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");

    // Pushed by Toolhost: wkg pulls the same component.
    setup.push(TEXT_TOOLS, "1.0", Some("trusted"));
    let pushed_by_us = format!("{registry}/{REPOSITORY}:1.0");
    wkg(
        &setup,
        &[
            "oci",
            "pull",
            "--insecure",
            &registry,
            &pushed_by_us,
            "-o",
            "pulled.wasm",
        ],
    );
    assert_eq!(std::fs::read(setup.path("pulled.wasm")).unwrap(), wasm);
}

#[test]
fn r41_serve_watch_serves_an_oci_plugin() {
    let setup = Setup::new();
    setup.push(TEXT_TOOLS, "1.0", Some("trusted"));
    let reference = setup.reference("1.0");
    let trust = setup.trusting();
    let mut served = crate::stdio::Served::start(
        &[&reference, "--watch", "--trust-key", &trust],
        setup.dir.path(),
        |command| {
            command
                .current_dir(setup.dir.path())
                .env("HOME", setup.dir.path());
        },
    );
    let reply = served.call(1, "echo", serde_json::json!({"message": "watched"}));
    assert_eq!(reply["result"]["content"][0]["text"], "watched", "{reply}");
}

/// The identity and issuer the keyless tests trust.
const RELEASER: (&str, &str) = ("release@acme.test", "https://issuer.acme.test");

impl Setup {
    /// Writes the instance's trusted root and a policy trusting `signer`
    /// keylessly for the repository; the policy's path.
    fn keyless_policy(&self, instance: &Instance, signer: (&str, &str)) -> String {
        std::fs::write(self.path("trusted_root.json"), instance.trusted_root()).unwrap();
        let policy = self.path("keyless.toml");
        std::fs::write(&policy, self.keyless_rule("trusted_root.json", signer)).unwrap();
        policy.display().to_string()
    }

    /// A `[[trust]]` rule trusting `signer` keylessly for the repository
    /// under the trusted root in `root` (relative to the policy).
    fn keyless_rule(&self, root: &str, (identity, issuer): (&str, &str)) -> String {
        format!(
            "[[trust]]\nrepository = \"{}\"\nkeyless = [{{ identity = \"{identity}\", issuer = \"{issuer}\" }}]\ntrusted-root = \"{root}\"\n",
            self.repository()
        )
    }

    /// The manifest bytes of `tag` (`inspect --manifest`), signed keylessly
    /// by `signer` of `instance` and attached with `toolhost sign --bundle`.
    fn sign_keyless(&self, tag: &str, instance: &Instance, (identity, issuer): (&str, &str)) {
        let reference = self.reference(tag);
        let file = self.path("manifest.json");
        let (code, _, stderr) =
            self.toolhost(&["inspect", &reference, "--manifest", file.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        let bundle = instance.sign(&std::fs::read(&file).unwrap(), identity, issuer);
        std::fs::write(self.path("bundle.json"), bundle).unwrap();
        let bundle = self.path("bundle.json");
        let (code, _, stderr) =
            self.toolhost(&["sign", &reference, "--bundle", bundle.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
    }
}

#[test]
fn r41_a_keyless_signature_by_the_trusted_identity_loads_and_is_locked_and_checked_offline() {
    let setup = Setup::new();
    let instance = Instance::new();
    let digest = setup.push(TEXT_TOOLS, "1.0", None);
    setup.sign_keyless("1.0", &instance, RELEASER);
    let policy = setup.keyless_policy(&instance, RELEASER);
    let reference = setup.reference("1.0");
    let signer = format!("{}#{}", RELEASER.1, RELEASER.0);

    let (code, stdout, stderr) = setup.toolhost(&["inspect", &reference, "--trust", &policy]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("signed keylessly by trusted {signer}")),
        "{stdout}"
    );
    assert_eq!(setup.compiled(), 0, "inspect compiles nothing");

    let (code, stdout, stderr) = setup.echo(&reference, &["--trust", &policy]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");

    let manifest = setup.manifest(&reference);
    let (code, _, stderr) =
        setup.toolhost(&["lock", manifest.to_str().unwrap(), "--trust", &policy]);
    assert_eq!(code, 0, "{stderr}");
    let lock = pins(&setup.path("toolhost.lock"));
    let pin = &lock["plugin"].as_array().unwrap()[0];
    assert_eq!(pin["reference"].as_str(), Some(reference.as_str()), "{pin}");
    assert_eq!(pin["digest"].as_str(), Some(digest.as_str()), "{pin}");
    assert_eq!(pin["signer"].as_str(), Some(signer.as_str()), "{pin}");

    // Offline: the stored bundle is verified again, against the same root.
    setup.registry.stop();
    let (code, stdout, stderr) = setup.echo(
        manifest.to_str().unwrap(),
        &["--locked", "--trust", &policy],
    );
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
}

#[test]
fn r41_a_keyless_signature_by_another_identity_or_issuer_is_refused_before_compiling() {
    let setup = Setup::new();
    let instance = Instance::new();
    let policy = setup.keyless_policy(&instance, RELEASER);
    for (tag, signer) in [
        ("other-identity", ("intruder@acme.test", RELEASER.1)),
        ("other-issuer", (RELEASER.0, "https://issuer.evil.test")),
    ] {
        let digest = setup.push(TEXT_TOOLS, tag, None);
        setup.sign_keyless(tag, &instance, signer);
        let reference = setup.reference(tag);
        let (code, _, stderr) = setup.echo(&reference, &["--trust", &policy]);
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains(&format!("{reference} ({digest}) was refused: wrong signer")),
            "{stderr}"
        );
        let named = if tag == "other-identity" {
            signer.0
        } else {
            signer.1
        };
        assert!(
            stderr.contains(named),
            "the error names who signed: {stderr}"
        );
    }
    assert_eq!(setup.compiled(), 0, "nothing compiled");
}

#[test]
fn r41_a_keyless_bundle_from_an_untrusted_instance_or_for_another_manifest_is_refused() {
    let setup = Setup::new();
    let (trusted, stranger) = (Instance::new(), Instance::new());
    let policy = setup.keyless_policy(&trusted, RELEASER);
    let digest = setup.push(TEXT_TOOLS, "1.0", None);
    setup.sign_keyless("1.0", &stranger, RELEASER);
    let reference = setup.reference("1.0");
    let (code, _, stderr) = setup.echo(&reference, &["--trust", &policy]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{reference} ({digest}) was refused: bad signature: bad bundle"
        )),
        "{stderr}"
    );
    assert_eq!(setup.compiled(), 0, "nothing compiled");

    // Rules may name different roots: the second one's bundle verifies.
    std::fs::write(setup.path("stranger_root.json"), stranger.trusted_root()).unwrap();
    let both = setup.path("both.toml");
    let rules = setup.keyless_rule("trusted_root.json", RELEASER)
        + &setup.keyless_rule("stranger_root.json", RELEASER);
    std::fs::write(&both, rules).unwrap();
    let (code, stdout, stderr) = setup.echo(&reference, &["--trust", both.to_str().unwrap()]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");

    // A bundle of other bytes is not attached at all.
    let bundle = setup.path("other.json");
    std::fs::write(
        &bundle,
        trusted.sign(b"another manifest", RELEASER.0, RELEASER.1),
    )
    .unwrap();
    let (code, _, stderr) =
        setup.toolhost(&["sign", &reference, "--bundle", bundle.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not this manifest"), "{stderr}");

    // Nor is one past the bundle bound, which is not even parsed.
    std::fs::write(&bundle, vec![b' '; 300 << 10]).unwrap();
    let (code, _, stderr) =
        setup.toolhost(&["sign", &reference, "--bundle", bundle.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("more than a Sigstore bundle can be"),
        "{stderr}"
    );
}

#[test]
fn r41_a_keyless_attestation_for_another_repository_is_refused_unless_any_reference() {
    let setup = Setup::new();
    let instance = Instance::new();
    let digest = setup.push(TEXT_TOOLS, "1.0", None);
    let reference = setup.reference("1.0");
    let repository = setup.repository();
    // An in-toto attestation (build provenance, say) by the trusted
    // identity, of this manifest as an artifact of `name`.
    let attested = |name: &str| {
        let statement = serde_json::json!({
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": name, "digest": {"sha256": digest.trim_start_matches("sha256:")}}],
            "predicateType": "https://slsa.dev/provenance/v1",
            "predicate": {},
        });
        instance.attest(&statement.to_string(), RELEASER.0, RELEASER.1)
    };
    let policy = setup.keyless_policy(&instance, RELEASER);

    // Made for the sandbox repository of the same registry.
    let sandbox = format!("{}/tools/sandbox-tool", setup.registry.address());
    setup.attach(&digest, &attested(&sandbox));
    let (code, _, stderr) = setup.echo(&reference, &["--trust", &policy]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{reference} ({digest}) was refused: bad signature: bad bundle: the attestation is valid but was made for {sandbox}, not {repository}"
        )),
        "{stderr}"
    );
    assert_eq!(setup.compiled(), 0, "nothing compiled");

    // Its rule accepting any reference: it loads.
    let any = setup.path("any.toml");
    let rule = setup.keyless_rule("trusted_root.json", RELEASER) + "any-reference = true\n";
    std::fs::write(&any, rule).unwrap();
    let (code, stdout, stderr) = setup.echo(&reference, &["--trust", any.to_str().unwrap()]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");

    // Made for this repository: it loads under the strict rule too.
    setup.attach(&digest, &attested(&repository));
    let (code, stdout, stderr) = setup.echo(&reference, &["--trust", &policy]);
    assert_eq!((code, stdout.trim()), (0, "hi"), "{stderr}");
}
