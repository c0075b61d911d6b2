//! TypeScript-style declarations of the tools a program can call, generated
//! from their JSON Schemas, for `execute`'s description.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::model::tool::ToolDefinition;

/// Schema nesting rendered as types; deeper parts become `unknown`, so a
/// hostile schema cannot make the description grow without bound.
const MAX_TYPE_DEPTH: usize = 6;

/// Characters of a tool's description kept in its doc comment (the first
/// line only): the full text is in the tool's own definition.
const MAX_DOC_CHARS: usize = 160;

/// Members of an object, an enum or a union rendered; the rest become
/// `...` (objects) or `unknown` (unions).
const MAX_MEMBERS: usize = 32;

/// The declarations of `tools` (every advertised tool but `execute`), as
/// a TypeScript namespace `tools` with one function per tool.
pub(crate) fn declarations(tools: &[ToolDefinition]) -> String {
    let mut out = String::from("declare namespace tools {\n");
    for tool in tools {
        if let Some(doc) = doc_line(&tool.description) {
            let _ = writeln!(out, "  /** {doc} */");
        }
        let output = match &tool.output_schema {
            Some(schema) => Types { root: schema }.of(schema, 0),
            None => "string".into(),
        };
        let _ = writeln!(
            out,
            "  function {}(input: {}): Promise<{output}>;",
            tool.name,
            Types {
                root: &tool.input_schema
            }
            .of(&tool.input_schema, 0)
        );
    }
    out.push('}');
    out
}

/// The description's first line, shortened, safe inside a doc comment.
fn doc_line(description: &str) -> Option<String> {
    let line = description.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut doc: String = line.chars().take(MAX_DOC_CHARS).collect();
    if doc.len() < line.len() {
        doc.push('…');
    }
    Some(doc.replace("*/", "* /"))
}

/// Renders the types of one schema document, whose local `$ref`s
/// (`#/$defs/...`, `#/definitions/...`) resolve against `root`.
struct Types<'a> {
    root: &'a Value,
}

impl<'a> Types<'a> {
    /// The TypeScript type a JSON Schema describes, as closely as the
    /// common keywords allow; anything else is `unknown`.
    fn of(&self, schema: &'a Value, depth: usize) -> String {
        let Some(schema) = schema.as_object() else {
            // `true` (anything) or `false` (nothing).
            return if schema == &Value::Bool(false) {
                "never".into()
            } else {
                "unknown".into()
            };
        };
        if depth >= MAX_TYPE_DEPTH {
            return "unknown".into();
        }
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            return match self.resolve(target) {
                Some(target) => self.of(target, depth + 1),
                None => "unknown".into(),
            };
        }
        if let Some(value) = schema.get("const") {
            return literal(value);
        }
        if let Some(Value::Array(values)) = schema.get("enum") {
            return union(values.iter().map(literal));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = schema.get(key) {
                return union(options.iter().map(|s| self.of(s, depth + 1)));
            }
        }
        if let Some(Value::Array(parts)) = schema.get("allOf") {
            let parts: Vec<String> = parts.iter().map(|s| self.of(s, depth + 1)).collect();
            return parts.join(" & ");
        }
        match schema.get("type") {
            Some(Value::String(name)) => self.named(name, schema, depth),
            Some(Value::Array(names)) => union(
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|name| self.named(name, schema, depth)),
            ),
            _ if schema.contains_key("properties") => self.object(schema, depth),
            _ => "unknown".into(),
        }
    }

    /// A local reference's target: a JSON Pointer into the root.
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        self.root.pointer(reference.strip_prefix('#')?)
    }

    fn named(&self, name: &str, schema: &'a Map<String, Value>, depth: usize) -> String {
        match name {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => match schema.get("items") {
                Some(items) => format!("Array<{}>", self.of(items, depth + 1)),
                None => "unknown[]".into(),
            },
            "object" => self.object(schema, depth),
            _ => "unknown".into(),
        }
    }

    fn object(&self, schema: &'a Map<String, Value>, depth: usize) -> String {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut members = Vec::new();
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (name, property) in properties.iter().take(MAX_MEMBERS) {
                let optional = if required.contains(&name.as_str()) {
                    ""
                } else {
                    "?"
                };
                members.push(format!(
                    "{}{optional}: {}",
                    property_name(name),
                    self.of(property, depth + 1)
                ));
            }
            if properties.len() > MAX_MEMBERS {
                members.push("...".into());
            }
        }
        match schema.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            Some(extra @ Value::Object(_)) => {
                members.push(format!("[key: string]: {}", self.of(extra, depth + 1)));
            }
            _ if members.is_empty() => members.push("[key: string]: unknown".into()),
            _ => {}
        }
        if members.is_empty() {
            return "{}".into();
        }
        format!("{{{}}}", members.join(", "))
    }
}

/// A property name as TypeScript accepts it: bare when it is an
/// identifier, else quoted.
fn property_name(name: &str) -> String {
    let mut chars = name.chars();
    let identifier = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if identifier {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

fn literal(value: &Value) -> String {
    match value {
        Value::Object(_) | Value::Array(_) => "unknown".into(),
        other => other.to_string(),
    }
}

fn union(types: impl Iterator<Item = String>) -> String {
    let mut types: Vec<String> = types.collect();
    if types.is_empty() {
        return "never".into();
    }
    if types.len() > MAX_MEMBERS {
        return "unknown".into();
    }
    types.dedup();
    types.join(" | ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use serde_json::Value;

    use super::Types;

    fn ts_type(schema: &Value) -> String {
        Types { root: schema }.of(schema, 0)
    }

    #[test]
    fn common_keywords_become_types() {
        let schema = json!({
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "mode": {"enum": ["a", "b"]},
                "limit": {"type": ["integer", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "odd key": {"type": "boolean"}
            },
            "required": ["text"]
        });
        assert_eq!(
            ts_type(&schema),
            r#"{limit?: number | null, mode?: "a" | "b", "odd key"?: boolean, tags?: Array<string>, text: string}"#
        );
    }

    #[test]
    fn local_references_resolve_and_recursion_ends() {
        let schema = json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/node"}},
            "required": ["node"],
            "$defs": {"node": {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/node"}}
            }}
        });
        assert_eq!(ts_type(&schema), "{node: {next?: {next?: unknown}}}");
    }

    #[test]
    fn deep_or_unknown_schemas_become_unknown() {
        let mut schema = json!({"type": "string"});
        for _ in 0..20 {
            schema = json!({"type": "array", "items": schema});
        }
        let rendered = ts_type(&schema);
        assert!(rendered.ends_with("Array<unknown>>>>>>"), "{rendered}");
        assert_eq!(ts_type(&json!({"$ref": "#/x"})), "unknown");
        assert_eq!(ts_type(&json!(false)), "never");
    }
}
