//! Tool schemas every client's validator reads without complaint.
//!
//! schemars writes a Rust number's width as a `format` (`uint32`, `uint64`,
//! `int64`, `double` …), which JSON Schema does not define. Validators
//! ignore an unknown format, but ajv (in the MCP TypeScript SDK) also warns
//! about each one on standard error, and opencode 1.18 lets those lines
//! land on its TUI, over its prompt. The width says nothing a client needs
//! (unsigned numbers also carry `minimum: 0`), so the published schemas
//! keep only the formats JSON Schema 2020-12 defines.

use rmcp::model::JsonObject;
use serde_json::Value;

/// The formats JSON Schema 2020-12 defines (its "Defined Formats").
pub(crate) const DEFINED_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords whose values are data, not schemas: left as they are.
const DATA_KEYWORDS: &[&str] = &["const", "default", "enum", "examples"];

/// Removes every `format` that JSON Schema does not define from `schema`
/// and the schemas inside it.
pub(crate) fn drop_undefined_formats(schema: &mut JsonObject) {
    let undefined = schema
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !DEFINED_FORMATS.contains(&f));
    if undefined {
        schema.remove("format");
    }
    for (key, value) in schema.iter_mut() {
        if !DATA_KEYWORDS.contains(&key.as_str()) {
            in_value(value);
        }
    }
}

/// A keyword's value: a schema, or a map or list of schemas.
fn in_value(value: &mut Value) {
    match value {
        Value::Object(map) => drop_undefined_formats(map),
        Value::Array(items) => items.iter_mut().for_each(in_value),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_defined_formats_stay() {
        let Value::Object(mut schema) = json!({
            "type": "object",
            "properties": {
                "pid": {"type": "integer", "format": "uint32", "minimum": 0},
                "at": {"type": "string", "format": "date-time"},
                "format": {"type": "string", "default": "text"},
                "either": {"anyOf": [{"type": "number", "format": "double"}, {"type": "null"}]},
            },
            "$defs": {"Row": {"type": "integer", "format": "uint"}},
            "examples": [{"format": "uint8"}],
        }) else {
            unreachable!()
        };
        drop_undefined_formats(&mut schema);
        assert_eq!(
            Value::Object(schema),
            json!({
                "type": "object",
                "properties": {
                    "pid": {"type": "integer", "minimum": 0},
                    "at": {"type": "string", "format": "date-time"},
                    "format": {"type": "string", "default": "text"},
                    "either": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                },
                "$defs": {"Row": {"type": "integer"}},
                "examples": [{"format": "uint8"}],
            })
        );
    }
}
