//! Property tests (R28): settlement of arbitrary tool responses never
//! panics, always ends in one of the four outcomes, and never shows the
//! model more text than its bounds while losing none of it.

use proptest::prelude::*;
use serde_json::{Value, json};
use toolhost::config::OutputBounds;
use toolhost::{Call, ContentPart, Outcome, Tool, ToolResponse};
use toolhost_tests::{builder, context};

/// Arbitrary JSON, a few levels deep.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,30}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn part() -> impl Strategy<Value = ContentPart> {
    prop_oneof![
        4 => proptest::collection::vec("\\PC{0,60}", 0..60).prop_map(|l| ContentPart::text(l.join("\n"))),
        1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(|data| ContentPart::Media {
            mime_type: "application/octet-stream".into(),
            data,
            name: None,
        }),
    ]
}

fn response() -> impl Strategy<Value = ToolResponse> {
    (
        proptest::option::of(value()),
        proptest::option::of(proptest::collection::vec(part(), 0..8)),
        proptest::option::of(value()),
    )
        .prop_map(|(output, content, metadata)| ToolResponse {
            output,
            content,
            metadata,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn r28_settling_any_response_ends_in_one_of_four_outcomes_within_bounds(
        response in response(),
        with_schema in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let outputs = tempfile::tempdir().unwrap();
        let bounds = OutputBounds { max_lines: 20, max_bytes: 2_000, ..OutputBounds::default() };
        let host = builder(&outputs).bounds(bounds).build().unwrap();
        let location = host.location("/properties");
        let returned = response.clone();
        let schema = with_schema.then(|| json!({"type": "object"}));
        let tool = Tool::native("returns anything", json!({}), schema, move |_, _| {
            let r = returned.clone();
            async move { Ok(r) }
        }).unwrap();
        let _r = location.register([("anything", tool)]).unwrap();
        let s = runtime.block_on(location.snapshot().settle(Call::new("anything", "{}", context("p"))));
        if let Outcome::Completed(c) = &s.outcome {
            prop_assert!(!c.content.is_empty());
            let texts: Vec<&str> = c.content.iter().filter_map(|p| match p {
                ContentPart::Text { text } => Some(text.as_str()),
                ContentPart::Media { .. } => None,
            }).collect();
            let bytes: usize = texts.iter().map(|t| t.len()).sum();
            let lines: usize = texts.iter().map(|t| t.lines().count()).sum();
            prop_assert!(bytes <= bounds.max_bytes, "{bytes} bytes shown");
            prop_assert!(lines <= bounds.max_lines, "{lines} lines shown");
            // Everything cut away is retained, in full.
            let given: usize = response.content.iter().flatten().map(|p| match p {
                ContentPart::Text { text } => text.len(),
                ContentPart::Media { .. } => 0,
            }).sum();
            let retained: usize = c.retained.iter().map(|r| {
                let text = runtime.block_on(host.retained(&s.context.session_id, &r.reference));
                text.unwrap().expect("kept").len()
            }).sum();
            if c.retained.is_empty() && response.content.is_some() {
                prop_assert_eq!(bytes, given);
            } else if response.content.is_some() {
                prop_assert!(retained + bytes >= given, "{retained} retained, {bytes} shown, {given} given");
            }
        }
    }
}
