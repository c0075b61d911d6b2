//! Registry rules R1-R12, through the real engine and real plugins.

use crate::{SEARCH_ONE, SEARCH_TWO, TEXT_TOOLS};
use serde_json::json;
use toolhost::config::PluginOptions;
use toolhost::outcome::{ErrorKind, FINAL_STEP_MESSAGE};
use toolhost::permission::{Effect, Rule, Rules};
use toolhost::registry::{Level, NameError, SnapshotOptions};
use toolhost::schema::Schema;
use toolhost::{ContentPart, Outcome, RegistrationError};
use toolhost_tests::{host, load, names, output, settle, tagged};

#[test]
fn r01_names_are_normalized_and_reserved_names_rejected() {
    let (host, _out) = host();
    let location = host.location("/r01");
    let _r = location.register([("read.file v2", tagged("a"))]).unwrap();
    assert_eq!(names(&location.snapshot()), ["read_file_v2"]);

    let err = location.register([("execute", tagged("b"))]).unwrap_err();
    assert!(
        matches!(&err, RegistrationError::InvalidName { tool, source: NameError::Reserved } if tool == "execute"),
        "{err:?}"
    );
    let long = "x".repeat(65);
    let err = location
        .register([(long.clone(), tagged("c"))])
        .unwrap_err();
    assert!(matches!(&err, RegistrationError::InvalidName { tool, .. } if *tool == long));
    assert!(err.to_string().contains("at most 64"), "{err}");
    let err = location.register([("", tagged("d"))]).unwrap_err();
    assert!(matches!(
        err,
        RegistrationError::InvalidName {
            source: NameError::Empty,
            ..
        }
    ));
}

#[test]
fn r02_register_is_atomic_and_rejects_colliding_names() {
    let (host, _out) = host();
    let location = host.location("/r02");
    let err = location
        .register([("good", tagged("a")), ("execute", tagged("b"))])
        .unwrap_err();
    assert!(matches!(err, RegistrationError::InvalidName { .. }));
    assert!(
        names(&location.snapshot()).is_empty(),
        "a failed register must change nothing"
    );

    let err = location
        .register([("a.b", tagged("a")), ("a_b", tagged("b"))])
        .unwrap_err();
    assert!(
        matches!(&err, RegistrationError::DuplicateName { tool, name } if tool == "a_b" && name == "a_b"),
        "{err:?}"
    );
    assert!(names(&location.snapshot()).is_empty());

    // Schemas must compile as JSON Schema before anything is registered.
    let err = Schema::compile(json!({"type": 12})).unwrap_err();
    assert!(err.to_string().contains("not a valid JSON Schema"), "{err}");
}

#[tokio::test]
async fn r03_latest_active_registration_wins() {
    let (host, _out) = host();
    let location = host.location("/r03");
    let _first = location.register([("search", tagged("first"))]).unwrap();
    let _second = location.register([("search", tagged("second"))]).unwrap();
    let s = settle(&location.snapshot(), "search", json!({})).await;
    assert_eq!(output(&s), json!({"source": "second"}));
}

#[tokio::test]
async fn r04_closing_reveals_the_next_latest_and_is_idempotent() {
    let (host, _out) = host();
    let location = host.location("/r04");
    let first = location.register([("search", tagged("first"))]).unwrap();
    let second = location.register([("search", tagged("second"))]).unwrap();
    let third = location.register([("search", tagged("third"))]).unwrap();
    // Closing a middle registration removes exactly it.
    second.close();
    let s = settle(&location.snapshot(), "search", json!({})).await;
    assert_eq!(output(&s), json!({"source": "third"}));
    third.close();
    third.close();
    assert!(third.is_closed());
    let s = settle(&location.snapshot(), "search", json!({})).await;
    assert_eq!(output(&s), json!({"source": "first"}));
    drop(first);
    assert!(names(&location.snapshot()).is_empty());
}

#[tokio::test]
async fn r05_location_registrations_shadow_application_ones() {
    let (host, _out) = host();
    let _app = host
        .application()
        .register([("search", tagged("app"))])
        .unwrap();
    let here = host.location("/r05/a");
    let _loc = here.register([("search", tagged("location"))]).unwrap();
    let s = settle(&here.snapshot(), "search", json!({})).await;
    assert_eq!(output(&s), json!({"source": "location"}));
    // Another location still sees the application's tool.
    let there = host.location("/r05/b");
    let s = settle(&there.snapshot(), "search", json!({})).await;
    assert_eq!(output(&s), json!({"source": "app"}));
    let catalog = here.catalog();
    assert_eq!(catalog.len(), 2);
    assert_eq!(
        (catalog[0].level, catalog[0].shadowed),
        (Level::Location, false)
    );
    assert_eq!(
        (catalog[1].level, catalog[1].shadowed),
        (Level::Application, true)
    );
}

#[tokio::test]
async fn r06_registrations_are_captured_by_value() {
    let (host, _out) = host();
    let location = host.location("/r06");
    let mut tools = vec![("search".to_owned(), tagged("original"))];
    let _r = location.register(tools.clone()).unwrap();
    // Changing the registrant's record afterwards changes nothing.
    tools[0] = ("search".to_owned(), tagged("changed"));
    tools.push(("other".to_owned(), tagged("other")));
    assert_eq!(names(&location.snapshot()), ["search"]);
    let s = settle(&location.snapshot(), "search", json!({})).await;
    assert_eq!(output(&s), json!({"source": "original"}));

    // A plugin's registration captures its code and definitions: replacing
    // the file on disk afterwards changes neither.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plugin.wasm");
    std::fs::copy(TEXT_TOOLS, &file).unwrap();
    let plugin_location = host.location("/r06-plugin");
    let _a = load(&plugin_location, file.to_str().unwrap()).await;
    let before = plugin_location.snapshot();
    std::fs::copy(SEARCH_ONE, &file).unwrap();
    let after = plugin_location.snapshot();
    assert_eq!(after.definitions(), before.definitions());
    let s = settle(&after, "echo", json!({"message": "same code"})).await;
    assert_eq!(output(&s), json!({"message": "same code"}));
}

#[tokio::test]
async fn r07_unloading_closes_every_registration_and_closed_scopes_reject() {
    let (host, _out) = host();
    let location = host.location("/r07");
    let activation = load(&location, TEXT_TOOLS).await;
    assert_eq!(
        names(&location.snapshot()),
        ["echo", "regex_search", "word_count"]
    );
    activation.unload();
    activation.unload();
    assert!(activation.is_unloaded());
    assert!(names(&location.snapshot()).is_empty());

    let scope = location.scope();
    let registration = scope.register([("search", tagged("scoped"))]).unwrap();
    scope.close();
    assert!(registration.is_closed());
    assert!(names(&location.snapshot()).is_empty());
    let err = scope.register([("search", tagged("late"))]).unwrap_err();
    assert!(matches!(err, RegistrationError::ScopeClosed));
}

#[tokio::test]
async fn r08_snapshot_pairs_sorted_definitions_with_captured_tools() {
    let (host, _out) = host();
    let location = host.location("/r08");
    let _a = load(&location, TEXT_TOOLS).await;
    let _n = location.register([("alpha", tagged("native"))]).unwrap();
    let snapshot = location.snapshot();
    let defs: Vec<&str> = snapshot
        .definitions()
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(defs, ["alpha", "echo", "regex_search", "word_count"]);
    for d in snapshot.definitions() {
        let tool = snapshot
            .tool(&d.name)
            .expect("each definition has its captured tool");
        assert_eq!(tool.description(), d.description);
        assert_eq!(tool.input_schema().document(), &d.input_schema);
    }
    let echo = &snapshot.definitions()[1];
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");
    assert!(echo.output_schema.is_some());
}

#[tokio::test]
async fn r09_calls_run_the_captured_tool_after_changes_and_unload() {
    let (host, _out) = host();
    let location = host.location("/r09");
    let activation = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot();
    // The registry changes and the plugin unloads after the snapshot...
    let _native = location.register([("echo", tagged("native"))]).unwrap();
    activation.unload();
    drop(activation);
    // ...but the call executes the wasm echo captured in the snapshot.
    let s = settle(&snapshot, "echo", json!({"message": "still here"})).await;
    assert_eq!(output(&s), json!({"message": "still here"}));
    // A new snapshot sees the change.
    let s = settle(&location.snapshot(), "echo", json!({"message": "x"})).await;
    assert_eq!(output(&s), json!({"source": "native"}));
}

#[tokio::test]
async fn r10_unknown_tools_are_rejected_per_call() {
    let (host, _out) = host();
    let location = host.location("/r10");
    let _a = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot();
    let (unknown, known) = tokio::join!(
        settle(&snapshot, "nope", json!({})),
        settle(&snapshot, "echo", json!({"message": "fine"})),
    );
    match unknown.outcome {
        Outcome::Error { message, kind, .. } => {
            assert_eq!(message, "Unknown tool: nope");
            assert_eq!(kind, ErrorKind::UnknownTool);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        unknown.usage.wall_time,
        std::time::Duration::ZERO,
        "nothing executed"
    );
    assert_eq!(output(&known), json!({"message": "fine"}));
}

#[tokio::test]
async fn r11_final_step_keeps_definitions_and_rejects_every_call() {
    let (host, _out) = host();
    let location = host.location("/r11");
    let _a = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot_with(&SnapshotOptions {
        final_step: true,
        ..Default::default()
    });
    assert!(snapshot.is_final_step());
    assert_eq!(snapshot.definitions().len(), 3);
    for tool in ["echo", "nope"] {
        let s = settle(&snapshot, tool, json!({"message": "hi"})).await;
        match s.outcome {
            Outcome::Error { message, kind, .. } => {
                assert_eq!(message, FINAL_STEP_MESSAGE);
                assert_eq!(message, "Tools are disabled after the maximum agent steps");
                assert_eq!(kind, ErrorKind::Disabled);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn r12_permission_filtering_is_visibility_only() {
    let (host, _out) = host();
    let location = host.location("/r12");
    let _a = load(&location, TEXT_TOOLS).await;
    let snapshot = location.snapshot_with(&SnapshotOptions {
        visibility: Some(Rules(vec![Rule::new("echo", "*", Effect::Deny)])),
        ..Default::default()
    });
    let defs: Vec<&str> = snapshot
        .definitions()
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(defs, ["regex_search", "word_count"]);
    // Hidden is not forbidden: a call that reaches settlement still runs.
    let s = settle(&snapshot, "echo", json!({"message": "hidden but callable"})).await;
    match &s.outcome {
        Outcome::Completed(c) => assert_eq!(c.content, [ContentPart::text("hidden but callable")]),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn later_plugin_wins_and_unloading_it_brings_the_first_back() {
    let (host, _out) = host();
    let location = host.location("/search");
    let one = load(&location, SEARCH_ONE).await;
    let two = load(&location, SEARCH_TWO).await;
    let s = settle(&location.snapshot(), "search", json!({"query": "q"})).await;
    assert_eq!(output(&s), json!({"source": "two"}));
    let catalog = location.catalog();
    assert_eq!(catalog.len(), 2);
    assert_eq!(catalog[0].tool.plugin().unwrap().name, "search_two");
    assert!(catalog[1].shadowed);
    two.unload();
    let s = settle(&location.snapshot(), "search", json!({"query": "q"})).await;
    assert_eq!(output(&s), json!({"source": "one"}));
    drop(one);
}

#[tokio::test]
async fn hot_reload_overlays_then_closes_the_old_activation() {
    let (host, _out) = host();
    let location = host.location("/reload");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("text_tools.wasm");
    std::fs::copy(TEXT_TOOLS, &copy).unwrap();
    let old = location
        .load(&copy, &PluginOptions::default())
        .await
        .unwrap();
    let before = location.snapshot();
    // A changed file: the same plugin with another version label.
    let options = PluginOptions {
        version: Some("2.0.0".into()),
        ..Default::default()
    };
    let new = location.reload(&old, &copy, &options).await.unwrap();
    assert!(old.is_unloaded());
    let after = location.snapshot();
    assert_eq!(after.definitions(), before.definitions());
    assert_eq!(
        after.tool("echo").unwrap().plugin().unwrap().version,
        "2.0.0"
    );
    let s = settle(&before, "echo", json!({"message": "old snapshot"})).await;
    assert_eq!(output(&s), json!({"message": "old snapshot"}));
    drop(new);
}
