//! Versioned WIT: the host keeps loading plugins of every world version it
//! has released. Each kept version (`wit/vX.Y`) has a fixture built against
//! that directory directly, not through the SDK, which stays here for as
//! long as the version is kept (see `wit/README.md`).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use toolhost::config::PluginOptions;
use toolhost::outcome::ErrorKind;
use toolhost::permission::{Effect, Rule, Rules};
use toolhost::{ContentPart, Outcome, Settlement};
use toolhost_tests::{host, settle};

use crate::WIT_V0_1;

/// A completed call's parts; panics naming any other outcome.
fn completed(s: &Settlement) -> &toolhost::Completed {
    match &s.outcome {
        Outcome::Completed(c) => c,
        other => panic!("{}: expected completed, got {other:?}", s.tool),
    }
}

/// `value` as the JSON object metadata is.
fn object(value: Value) -> Option<serde_json::Map<String, Value>> {
    value.as_object().cloned()
}

#[tokio::test]
async fn a_plugin_built_against_wit_0_1_loads_and_every_function_works() {
    let (host, _out) = host();
    let location = host.location("/wit-v0-1");
    let options = PluginOptions {
        config: json!({"greeting": "hello"}),
        rules: Rules(vec![Rule::new("read", "granted/*", Effect::Allow)]),
        ..Default::default()
    };
    // `activate` also checks that `execute` was refused as an invalid name
    // and that the registration holds the normalized names.
    let _activation = location
        .load(WIT_V0_1, &options)
        .await
        .unwrap_or_else(|e| panic!("a 0.1 plugin must load: {e}"));
    let snapshot = location.snapshot();
    let definitions = snapshot.definitions();
    let names: Vec<&str> = definitions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["v0_1_ask", "v0_1_content", "v0_1_echo", "v0_1_fail"]
    );
    let echo = definitions.iter().find(|d| d.name == "v0_1_echo").unwrap();
    assert_eq!(echo.input_schema["required"], json!(["text"]));
    assert!(echo.output_schema.is_some());

    // The output (validated), the configuration through `call.config`, the
    // call's context, and content derived from the output.
    let s = settle(&snapshot, "v0_1_echo", json!({"text": "hi"})).await;
    let c = completed(&s);
    let output = json!({"text": "hi", "config": {"greeting": "hello"}, "call_id": "v0_1_echo"});
    assert_eq!(c.output.as_ref(), Some(&output));
    assert_eq!(
        c.metadata,
        object(json!({"world": "toolhost:plugin@0.1.0"}))
    );
    assert!(
        matches!(&c.content[..], [ContentPart::Text { text }] if serde_json::from_str::<Value>(text).unwrap() == output),
        "{:?}",
        c.content
    );

    // Text and media content parts.
    let s = settle(&snapshot, "v0_1_content", json!({})).await;
    match &completed(&s).content[..] {
        [
            ContentPart::Text { text },
            ContentPart::Media {
                mime_type,
                data,
                name,
            },
        ] => {
            assert_eq!(text, "a picture");
            assert_eq!(mime_type, "image/png");
            assert_eq!(data, b"\x89PNG\r\n\x1a\n");
            assert_eq!(name.as_deref(), Some("dot.png"));
        }
        other => panic!("{other:?}"),
    }

    // `call.request-permission`, allowed by a rule and denied without one.
    let s = settle(&snapshot, "v0_1_ask", json!({"text": "granted/notes"})).await;
    assert_eq!(
        completed(&s).content,
        [ContentPart::Text {
            text: "read granted/notes".into()
        }]
    );
    let s = settle(&snapshot, "v0_1_ask", json!({"text": "secret"})).await;
    assert!(
        matches!(&s.outcome, Outcome::Error { message, .. } if message == "Permission denied: read secret"),
        "{:?}",
        s.outcome
    );

    // A tool failure with metadata; the last progress is its partial snapshot.
    let s = settle(&snapshot, "v0_1_fail", json!({})).await;
    match &s.outcome {
        Outcome::Error {
            message,
            kind,
            partial,
            metadata,
        } => {
            assert_eq!(message, "failed on purpose");
            assert_eq!(*kind, ErrorKind::ToolFailure);
            assert_eq!(partial.as_ref(), Some(&json!({"stage": "failing"})));
            assert_eq!(*metadata, object(json!({"code": 7})));
        }
        other => panic!("{other:?}"),
    }
}

/// The version directories (`vX.Y`) under `dir`.
fn versions(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with('v'))
        .collect()
}

#[test]
fn every_kept_world_is_in_the_host_and_has_a_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let kept = versions(&root.join("wit"));
    assert!(kept.contains("v0.1"), "{kept:?}");
    assert_eq!(
        versions(&root.join("host/runtime/wit")),
        kept,
        "host/runtime/wit must hold every kept world of wit/ (the host loads them all), and no other"
    );
    let sdk = versions(&root.join("guest-sdk/wit"));
    assert!(
        sdk.len() == 1 && sdk.is_subset(&kept),
        "guest-sdk/wit holds the one kept world the SDK targets: {sdk:?}"
    );
    for version in &kept {
        let fixture = format!("example-plugins/fixtures/wit-{}", version.replace('.', "-"));
        assert!(
            root.join(&fixture).join("Cargo.toml").is_file(),
            "wit/{version} is kept, so {fixture} must build a plugin against it"
        );
    }
}
