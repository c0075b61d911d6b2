//! Session placement, rule R35: a session's registrations are seen only in
//! its snapshots, shadow the location's and the application's, and close
//! when the session ends; R3-R7 hold within and across placements.

use crate::TEXT_TOOLS;
use serde_json::json;
use toolhost::registry::Level;
use toolhost::{Location, Outcome, RegistrationError};
use toolhost_tests::{host, load, names, output, settle, tagged};

/// What `search` answers in a fresh snapshot of `view`.
async fn search(view: &Location) -> serde_json::Value {
    output(&settle(&view.snapshot(), "search", json!({})).await)
}

#[tokio::test]
async fn r35_session_registrations_are_visible_only_in_that_sessions_snapshots() {
    let (host, _out) = host();
    let location = host.location("/r35/visible");
    let alice = location.session("alice");
    assert_eq!(alice.session_id(), Some("alice"));
    let _plugin = load(&alice, TEXT_TOOLS).await;
    let _notes = alice.register([("notes", tagged("alice"))]).unwrap();

    let expected = ["echo", "notes", "regex_search", "word_count"];
    assert_eq!(names(&alice.snapshot()), expected);
    // The same id on the same location is the same session.
    assert_eq!(names(&location.session("alice").snapshot()), expected);
    let s = settle(&alice.snapshot(), "echo", json!({"message": "mine"})).await;
    assert_eq!(output(&s), json!({"message": "mine"}));

    // Neither another session, nor the bare location, nor the same id on
    // another location sees any of it.
    let bob = location.session("bob");
    assert!(names(&bob.snapshot()).is_empty());
    assert!(names(&location.snapshot()).is_empty());
    assert!(names(&host.location("/r35/other").session("alice").snapshot()).is_empty());
    let s = settle(&bob.snapshot(), "echo", json!({"message": "hers"})).await;
    assert!(
        matches!(&s.outcome, Outcome::Error { message, .. } if message == "Unknown tool: echo"),
        "{:?}",
        s.outcome
    );

    // Sessions do not nest: a session's `session` is a sibling.
    let _b = bob.register([("notes", tagged("bob"))]).unwrap();
    assert_eq!(alice.session("bob").session_id(), Some("bob"));
    let s = settle(&alice.session("bob").snapshot(), "notes", json!({})).await;
    assert_eq!(output(&s), json!({"source": "bob"}));
}

#[tokio::test]
async fn r35_session_shadows_location_and_application_and_closing_reveals_them() {
    let (host, _out) = host();
    let app = host
        .application()
        .register([("search", tagged("app"))])
        .unwrap();
    let location = host.location("/r35/shadow");
    let session = location.session("s1");
    let location_search = location.register([("search", tagged("location"))]).unwrap();
    let first = session.register([("search", tagged("first"))]).unwrap();
    let second = session.register([("search", tagged("second"))]).unwrap();

    // Latest wins within the session (R3); the session shadows both lower
    // levels, and the bare location still sees its own.
    assert_eq!(search(&session).await, json!({"source": "second"}));
    assert_eq!(search(&location).await, json!({"source": "location"}));

    let catalog = session.catalog();
    let rows: Vec<(Level, u64, bool)> = catalog
        .iter()
        .map(|e| (e.level, e.registration, e.shadowed))
        .collect();
    assert_eq!(
        rows,
        [
            (Level::Session, second.id(), false),
            (Level::Session, first.id(), true),
            (Level::Location, location_search.id(), true),
            (Level::Application, app.id(), true),
        ]
    );
    assert_eq!(serde_json::to_value(Level::Session).unwrap(), "session");

    // Closing reveals the next-latest, then the location's (R4).
    second.close();
    assert_eq!(search(&session).await, json!({"source": "first"}));
    first.close();
    first.close();
    assert_eq!(search(&session).await, json!({"source": "location"}));
    location_search.close();
    assert_eq!(search(&session).await, json!({"source": "app"}));
}

#[tokio::test]
async fn r35_ending_a_session_closes_its_registrations_but_not_earlier_snapshots() {
    let (host, _out) = host();
    let location = host.location("/r35/end");
    let _location_search = location.register([("search", tagged("location"))]).unwrap();
    let session = location.session("s1");
    let activation = load(&session, TEXT_TOOLS).await;
    let registration = session.register([("search", tagged("session"))]).unwrap();
    let scope = session.scope();
    let _scoped = scope.register([("scoped", tagged("scoped"))]).unwrap();
    let before = session.snapshot();

    session.end_session();
    session.end_session();

    // The next snapshot has none of the session's tools: the location's
    // `search` shows through again.
    assert_eq!(names(&session.snapshot()), ["search"]);
    assert_eq!(search(&session).await, json!({"source": "location"}));
    // The earlier snapshot still settles what it captured (R6, R9).
    let s = settle(&before, "echo", json!({"message": "captured"})).await;
    assert_eq!(output(&s), json!({"message": "captured"}));
    assert_eq!(
        output(&settle(&before, "search", json!({})).await),
        json!({"source": "session"})
    );

    // Every scope of the ended session is closed (R7): the activation's,
    // a native scope, and the session's own.
    assert!(activation.is_unloaded());
    assert!(registration.is_closed());
    assert!(scope.is_closed());
    let err = scope.register([("late", tagged("late"))]).unwrap_err();
    assert!(matches!(err, RegistrationError::ScopeClosed), "{err:?}");
    let err = session.register([("late", tagged("late"))]).unwrap_err();
    assert!(matches!(err, RegistrationError::ScopeClosed), "{err:?}");
    // A plugin activated through the ended session cannot register.
    let err = session
        .load(TEXT_TOOLS, &toolhost::config::PluginOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("scope is closed"), "{err}");
}

#[tokio::test]
async fn r35_a_session_opened_again_after_its_end_is_fresh() {
    let (host, _out) = host();
    let location = host.location("/r35/fresh");
    let old = location.session("s1");
    let _old_tool = old.register([("search", tagged("old"))]).unwrap();
    old.end_session();

    let fresh = location.session("s1");
    assert!(names(&fresh.snapshot()).is_empty());
    let _fresh_tool = fresh.register([("search", tagged("fresh"))]).unwrap();
    // Ending the old view again leaves the new session with that id alone.
    old.end_session();
    assert_eq!(search(&fresh).await, json!({"source": "fresh"}));
    assert!(names(&old.snapshot()).is_empty());

    // Ending does nothing on a view that is not a session.
    let _kept = location.register([("kept", tagged("location"))]).unwrap();
    location.end_session();
    assert_eq!(names(&location.snapshot()), ["kept"]);
    assert_eq!(location.session_id(), None);
}
