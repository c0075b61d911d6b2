//! `#[input]` and `#[output]` on every kind of type they accept, with
//! serde and schemars attributes, in a crate with no serde or schemars
//! dependency of its own.
#![deny(missing_docs, warnings)]

use toolhost_sdk::prelude::*;

/// Options, with defaults and renames.
#[input]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Options {
    /// How many.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_count: Option<u32>,
    /// Skipped in the schema and the input.
    #[serde(skip)]
    pub skipped: bool,
}

/// A tagged enum, both ways.
#[input]
#[output]
#[serde(tag = "kind")]
pub enum Shape {
    /// A circle.
    Circle {
        /// Its radius.
        radius: f64,
    },
    /// A square.
    Square {
        /// Its side.
        side: f64,
    },
}

/// A generic wrapper.
#[toolhost_sdk::output]
pub struct Page<T> {
    /// The items of this page.
    pub items: Vec<T>,
}

/// A unit-like and a tuple struct.
#[output]
pub struct Empty;

/// A newtype.
#[toolhost_sdk::prelude::input]
pub struct Meters(pub f64);

fn main() {
    let options: Options = serde_json::from_str(r#"{"maxCount": 3}"#).unwrap();
    assert_eq!((options.max_count, options.skipped), (Some(3), false));
    let shape: Shape = serde_json::from_str(r#"{"kind": "Circle", "radius": 1.0}"#).unwrap();
    let page = Page { items: vec![shape] };
    assert_eq!(
        serde_json::to_string(&page).unwrap(),
        r#"{"items":[{"kind":"Circle","radius":1.0}]}"#
    );
    let _ = (Empty, Meters(1.0).0);
}
