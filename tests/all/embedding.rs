//! An embedder's host with the defaults does no I/O it was not asked for
//! and leaves no process-wide state: nothing written under `HOME` or any
//! `XDG_*` directory, no rustls crypto provider installed, while outcomes
//! are still recorded once and replayed, and outputs retained (in memory).
//!
//! Each test runs its body in a child process of this test binary (the
//! same test, selected by name, `CHILD` set), so the environment it sets
//! and the process-wide state it checks are its own, whatever other tests
//! of this binary do meanwhile.

use std::path::Path;
use std::process::Command;

use toolhost::{Call, Host, Outcome};
use toolhost_tests::{context, load, retained};

use crate::{BULK_OUTPUT, TEXT_TOOLS};

/// Set in the child process: run the test's body.
const CHILD: &str = "TOOLHOST_TEST_EMBEDDING_CHILD";

/// Whether this is the child process of the test `name`.
fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs the test `name` (its path in this binary) again in a child process
/// whose `HOME` and `XDG_*` directories all lie in `home`, which the
/// child never creates; fails with the child's output if it fails.
fn run_child(name: &str, home: &Path) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_RUNTIME_DIR", home.join("run"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the child ran no test:\n{stdout}"
    );
}

/// A private empty directory under `target/`, as the child's home.
fn private_home() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("embedding-home-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// Builds a host with the defaults and settles calls on it: a replay and
/// a retained output work, from the store in memory.
async fn default_host_calls() {
    let host = Host::builder().build().unwrap();
    let location = host.location("/embedder/project");
    let _text = load(&location, TEXT_TOOLS).await;
    let _bulk = load(&location, BULK_OUTPUT).await;
    let snapshot = location.snapshot();
    let ids = context("echo");
    let first = snapshot
        .settle(Call::new("echo", r#"{"message":"hi"}"#, ids.clone()))
        .await;
    assert!(matches!(first.outcome, Outcome::Completed(_)), "{first:?}");
    let again = snapshot
        .settle(Call::new("echo", r#"{"message":"hi"}"#, ids))
        .await;
    assert!(again.replayed, "the outcome is recorded and replayed");
    let big = snapshot
        .settle(Call::new(
            "generate",
            r#"{"bytes": 300000}"#,
            context("generate"),
        ))
        .await;
    assert_eq!(retained(&host, &big, 0).await.len(), 300_000);
}

#[test]
fn r38_a_host_given_no_store_keeps_it_in_memory_and_writes_nothing_under_home() {
    if in_child() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(default_host_calls());
        return;
    }
    let home = private_home();
    run_child(
        "embedding::r38_a_host_given_no_store_keeps_it_in_memory_and_writes_nothing_under_home",
        home.path(),
    );
    let written: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(written.is_empty(), "written under HOME: {written:?}");
}

#[test]
fn a_host_installs_no_process_wide_crypto_provider() {
    if in_child() {
        assert!(rustls::crypto::CryptoProvider::get_default().is_none());
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(default_host_calls());
        assert!(
            rustls::crypto::CryptoProvider::get_default().is_none(),
            "building a host and calling installed a rustls crypto provider"
        );
        return;
    }
    let home = private_home();
    run_child(
        "embedding::a_host_installs_no_process_wide_crypto_provider",
        home.path(),
    );
}
