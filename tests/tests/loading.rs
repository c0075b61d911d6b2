//! Loading: every bad plugin file is a clear, typed error, never a panic;
//! a plugin of an incompatible WIT version is refused before instantiation.

use toolhost::{Error, LoadError, PluginOptions};
use toolhost_tests::{CHAOS, FUTURE_VERSION, OTHER_WORLD, TEXT_TOOLS, host, load, settle};

fn load_error(path: &std::path::Path) -> LoadError {
    let (host, _out) = host();
    match host.load(path) {
        Err(Error::Load(e)) => e,
        other => panic!("{}: expected a load error, got {other:?}", path.display()),
    }
}

#[test]
fn bad_files_are_typed_load_errors_that_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.wasm");
    std::fs::write(&text, "not wasm").unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let truncated = dir.path().join("truncated.wasm");
    let bytes = std::fs::read(TEXT_TOOLS).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();

    assert!(matches!(
        load_error(&dir.path().join("missing.wasm")),
        LoadError::Read { .. }
    ));
    assert!(matches!(load_error(&text), LoadError::NotWasm { .. }));
    let e = load_error(&core);
    assert!(matches!(e, LoadError::CoreModule { .. }));
    assert!(e.to_string().contains("wasm32-wasip2"), "{e}");
    assert!(matches!(load_error(&truncated), LoadError::Invalid { .. }));
}

#[test]
fn a_component_of_another_world_is_refused() {
    let e = load_error(OTHER_WORLD.as_ref());
    match &e {
        LoadError::WrongWorld { exports, .. } => {
            assert!(exports.contains("example:greeter/greet@1.0.0"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_incompatible_wit_version_is_refused_with_both_versions_named() {
    let e = load_error(FUTURE_VERSION.as_ref());
    match &e {
        LoadError::IncompatibleVersion {
            found, expected, ..
        } => {
            assert_eq!(found, "toolhost:plugin/plugin@0.2.0");
            assert_eq!(*expected, "0.1.0");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("rebuild the plugin"), "{e}");
}

#[tokio::test]
async fn plugin_identity_and_configuration() {
    let (host, _out) = host();
    let plugin = host.load(TEXT_TOOLS).unwrap();
    let info = plugin.info();
    assert_eq!(info.name, "text_tools");
    assert_eq!(info.digest.len(), 64);
    assert_eq!(info.version, format!("blake3:{}", &info.digest[..12]));
    assert!(!info.from_cache);

    // The configuration reaches activate and every call, though each call
    // runs in a fresh instance.
    let config = serde_json::json!({"base_url": "https://tools.invalid", "retries": [1, 2]});
    let options = PluginOptions {
        config: config.clone(),
        ..Default::default()
    };
    let location = host.location("/identity");
    let _activation = location.load(CHAOS, &options).await.unwrap();
    let s = settle(&location.snapshot(), "read_config", serde_json::json!({})).await;
    match s.outcome {
        toolhost::Outcome::Completed(c) => {
            assert_eq!(c.output, Some(serde_json::json!({ "config": config })))
        }
        other => panic!("{other:?}"),
    }
    // Without configuration a plugin sees an empty object.
    let other = host.location("/identity-default");
    let _default = load(&other, CHAOS).await;
    let s = settle(&other.snapshot(), "read_config", serde_json::json!({})).await;
    match s.outcome {
        toolhost::Outcome::Completed(c) => {
            assert_eq!(c.output, Some(serde_json::json!({"config": {}})))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_compile_cache_is_used_and_a_corrupt_entry_is_rebuilt() {
    let outputs = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let host = toolhost::Host::builder()
        .output_dir(outputs.path())
        .cache_dir(cache.path())
        .build()
        .unwrap();
    assert!(!host.load(TEXT_TOOLS).unwrap().info().from_cache);
    assert!(host.load(TEXT_TOOLS).unwrap().info().from_cache);
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    std::fs::write(&entry, &bytes).unwrap();
    assert!(
        !host.load(TEXT_TOOLS).unwrap().info().from_cache,
        "corrupt entries are never trusted"
    );
    assert!(
        host.load(TEXT_TOOLS).unwrap().info().from_cache,
        "and are rebuilt"
    );
    std::fs::write(&entry, b"garbage").unwrap();
    assert!(!host.load(TEXT_TOOLS).unwrap().info().from_cache);
}
