//! A view of a `serde_json::Value` for `jsonschema` that stops showing the
//! instance once enough violations are built (R28).
//!
//! `jsonschema`'s `iter_errors` builds every error before it yields the
//! first (one buffer, ~350 bytes an error): a 50 MB input with millions of
//! violations took gigabytes. Its public `Json` trait lets the instance be
//! any representation, so this one counts the errors built (each takes its
//! instance through `Node::to_value`) and, past the budget, ends every
//! array and object walk: the validator finishes at once.
//!
//! What was built before the stop is exact: the view showed all of the
//! instance until then. What is built after may be wrong (the walks were cut
//! short), so those errors carry an owned placeholder instead of the value,
//! which tells them apart ([`exact`]).

use std::borrow::Cow;
use std::cell::Cell;

use jsonschema::ValidationError;
use jsonschema::json::{Array, Json, Node, NodeIdentity, Object, SerdeJson, cmp, unique};
use jsonschema::types::JsonType;
use serde_json::{Map, Number, Value};

thread_local! {
    /// Errors this thread's validation may still build exactly; `None`
    /// when no budget is set (a plain walk).
    static LEFT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The representation: `serde_json` values under this thread's budget.
#[derive(Debug)]
pub(super) struct Probed;

/// One value of the instance.
#[derive(Debug, Clone, Copy)]
pub(super) struct Probe<'a>(pub(super) &'a Value);

/// Runs `f` with `errors` exact errors to build, and says whether the
/// budget ran out (so later errors are not [`exact`]).
pub(super) fn within<T>(errors: usize, f: impl FnOnce() -> T) -> (T, bool) {
    let budget = Budget(LEFT.replace(Some(errors)));
    let value = f();
    let stopped = stopped();
    drop(budget);
    (value, stopped)
}

/// Puts back the budget before, even if validation panics: a later walk on
/// this thread must see all of its instance.
struct Budget(Option<usize>);

impl Drop for Budget {
    fn drop(&mut self) {
        LEFT.set(self.0);
    }
}

/// Whether an error was built before the budget ran out.
pub(super) fn exact(error: &ValidationError<'_>) -> bool {
    matches!(error.instance(), Cow::Borrowed(_))
}

fn stopped() -> bool {
    LEFT.get() == Some(0)
}

/// Counts one error built; the placeholder once the budget is spent.
fn built<'a>(value: &'a Value) -> Cow<'a, Value> {
    match LEFT.get() {
        Some(0) => Cow::Owned(Value::Null),
        Some(n) => {
            LEFT.set(Some(n - 1));
            Cow::Borrowed(value)
        }
        None => Cow::Borrowed(value),
    }
}

impl Json for Probed {
    type Node<'a> = Probe<'a>;
    type PreparedKey = String;
    type StringBuffer = ();

    const KEYS_PER_LOOKUP: usize = SerdeJson::KEYS_PER_LOOKUP;
    const ACYCLIC: bool = SerdeJson::ACYCLIC;

    fn prepare_key(key: &str) -> String {
        SerdeJson::prepare_key(key)
    }

    fn with_string_node<T>((): &mut (), string: &str, f: impl FnOnce(Probe<'_>) -> T) -> T {
        SerdeJson::with_string_node(&mut (), string, |value| f(Probe(value)))
    }
}

/// `serde_json`'s own node, for the answers this view does not change.
type Plain<'a> = &'a Value;

impl<'a> Node<'a, Probed> for Probe<'a> {
    type Object = Members<'a>;
    type Array = Elements<'a>;
    type Number = &'a Number;

    fn as_object(&self) -> Option<Members<'a>> {
        self.0.as_object().map(Members)
    }

    fn as_array(&self) -> Option<Elements<'a>> {
        self.0.as_array().map(|a| Elements(a))
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        self.0.as_str().map(Cow::Borrowed)
    }

    fn as_number(&self) -> Option<&'a Number> {
        self.0.as_number()
    }

    fn as_boolean(&self) -> Option<bool> {
        self.0.as_bool()
    }

    fn is_null(&self) -> bool {
        self.0.is_null()
    }

    fn is_number(&self) -> bool {
        self.0.is_number()
    }

    fn is_string(&self) -> bool {
        self.0.is_string()
    }

    fn json_type(&self) -> JsonType {
        <Plain<'a> as Node<'a, SerdeJson>>::json_type(&self.0)
    }

    fn string_length(&self) -> Option<u64> {
        <Plain<'a> as Node<'a, SerdeJson>>::string_length(&self.0)
    }

    fn string_length_within(&self, min: u64, max: u64) -> Option<bool> {
        <Plain<'a> as Node<'a, SerdeJson>>::string_length_within(&self.0, min, max)
    }

    fn equals_value(&self, expected: &Value) -> bool {
        cmp::equal(self.0, expected)
    }

    fn to_value(&self) -> Cow<'a, Value> {
        built(self.0)
    }

    fn identity(&self) -> Option<NodeIdentity> {
        <Plain<'a> as Node<'a, SerdeJson>>::identity(&self.0)
    }
}

/// An object's members, none once the budget is spent.
pub(super) struct Members<'a>(&'a Map<String, Value>);

/// An array's elements, none once the budget is spent.
pub(super) struct Elements<'a>(&'a [Value]);

/// Walks `inner` until the budget is spent.
pub(super) struct Until<I>(I);

impl<I: Iterator> Iterator for Until<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        if stopped() {
            return None;
        }
        self.0.next()
    }
}

impl<'a> Object<'a, Probed> for Members<'a> {
    type Node = Probe<'a>;
    type MemberName = &'a str;
    type MembersIter = Until<std::iter::Map<serde_json::map::Iter<'a>, Member<'a>>>;

    fn len(&self) -> usize {
        self.0.len()
    }

    fn get(&self, key: &String) -> Option<Probe<'a>> {
        if stopped() {
            return None;
        }
        self.0.get(key).map(Probe)
    }

    fn members(&self) -> Self::MembersIter {
        Until(self.0.iter().map(member as Member<'a>))
    }
}

type Element<'a> = fn(&'a Value) -> Probe<'a>;

type Member<'a> = fn((&'a String, &'a Value)) -> (&'a str, Probe<'a>);

fn member<'a>((name, value): (&'a String, &'a Value)) -> (&'a str, Probe<'a>) {
    (name, Probe(value))
}

impl<'a> Array<'a, Probed> for Elements<'a> {
    type Node = Probe<'a>;
    type ElementsIter = Until<std::iter::Map<std::slice::Iter<'a, Value>, Element<'a>>>;

    fn len(&self) -> usize {
        self.0.len()
    }

    fn elements(&self) -> Self::ElementsIter {
        Until(self.0.iter().map(Probe as Element<'a>))
    }

    fn is_unique(&self) -> bool {
        unique::is_unique(self.0)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn r28_errors_built_after_the_budget_are_told_apart() {
        let validator = jsonschema::options_for::<Probed>()
            .build(&json!({
                "properties": {"a": {"items": {"type": "integer"}, "contains": {"type": "string"}}}
            }))
            .unwrap();
        let instance = json!({"a": ["x", "x", "x"]});
        let (errors, stopped) = within(1, || validator.iter_errors(Probe(&instance)));
        let errors: Vec<(String, bool)> = errors
            .map(|e| (e.instance_path().as_str().to_owned(), exact(&e)))
            .collect();
        assert!(stopped);
        // The first error is real; then the elements are hidden, so
        // `contains` fails where it should not, and says so by not being
        // exact.
        assert_eq!(
            errors,
            [("/a/0".to_owned(), true), ("/a".to_owned(), false)]
        );
        // Without a budget the view is the plain value.
        assert_eq!(validator.iter_errors(Probe(&instance)).count(), 3);
        assert!(validator.is_valid(Probe(&json!({"a": 5}))));
        assert!(!validator.is_valid(Probe(&json!({"a": [1]}))));
    }
}
