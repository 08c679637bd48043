//! A minimal JSON value that fits a JSON schema, for structured-output
//! requests (session titles and the like).
//!
//! Claude Code and Codex ask for a session title as JSON that must fit a
//! schema; a reply that does not parse or fit makes them log errors or retry.
//! The instance is the smallest one that fits: objects hold their required
//! properties (every property when the schema lists none as required),
//! strings are `"Mock title"` for a property named `title` and `"mock"`
//! otherwise, numbers 0, booleans false, arrays empty. `const`, `enum`,
//! `anyOf`/`oneOf` (first choice), `allOf` (merged), local `$ref`s, bounds
//! (`minimum`, `minLength`, `minItems`, ...) and a few string formats are
//! honoured.

use serde_json::{json, Map, Value};

const MAX_DEPTH: usize = 32;

/// A minimal instance of `schema`.
pub fn instance(schema: &Value) -> Value {
    generate(schema, schema, None, 0)
}

fn generate(schema: &Value, root: &Value, name: Option<&str>, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    let s = match schema {
        Value::Object(s) => s,
        Value::Bool(false) => return Value::Null,
        _ => return string(&Map::new(), name),
    };
    if let Some(target) = s
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve(root, r))
    {
        return generate(target, root, name, depth + 1);
    }
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(first) = s.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return generate(first, root, name, depth + 1);
        }
    }
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        let merged = merge(s, all, root);
        return generate(&Value::Object(merged), root, name, depth + 1);
    }
    match type_of(s).as_str() {
        "object" => object(s, root, depth),
        "array" => array(s, root, name, depth),
        "integer" | "number" => number(s),
        "boolean" => Value::Bool(false),
        "null" => Value::Null,
        _ => string(s, name),
    }
}

/// The schema's type: the first non-null one when it lists several, else
/// inferred from the keywords it uses.
fn type_of(s: &Map<String, Value>) -> String {
    match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            let pick = names.iter().find(|t| **t != "null").or(names.first());
            pick.map_or("string", |t| t).to_string()
        }
        _ if s.contains_key("properties") || s.contains_key("required") => "object".into(),
        _ if s.contains_key("items") || s.contains_key("prefixItems") => "array".into(),
        _ => "string".into(),
    }
}

fn object(s: &Map<String, Value>, root: &Value, depth: usize) -> Value {
    let empty = Map::new();
    let props = s
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let names: Vec<&str> = match s.get("required").and_then(Value::as_array) {
        Some(req) => req.iter().filter_map(Value::as_str).collect(),
        None => props.keys().map(String::as_str).collect(),
    };
    let mut out = Map::new();
    for n in names {
        let sub = props.get(n).unwrap_or(&Value::Bool(true));
        out.insert(n.to_string(), generate(sub, root, Some(n), depth + 1));
    }
    Value::Object(out)
}

fn array(s: &Map<String, Value>, root: &Value, name: Option<&str>, depth: usize) -> Value {
    let min = s.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
    let tuple = s
        .get("prefixItems")
        .or_else(|| s.get("items").filter(|i| i.is_array()))
        .and_then(Value::as_array);
    let items = s.get("items").filter(|i| !i.is_array());
    let any = Value::Bool(true);
    (0..min.min(1000))
        .map(|i| {
            let sub = tuple.and_then(|t| t.get(i)).or(items).unwrap_or(&any);
            generate(sub, root, name, depth + 1)
        })
        .collect()
}

fn number(s: &Map<String, Value>) -> Value {
    let integer = type_of(s) == "integer";
    let f = |k: &str| s.get(k).and_then(Value::as_f64);
    let mut v = 0.0_f64;
    if let Some(m) = f("minimum") {
        v = v.max(m);
    }
    if let Some(m) = f("exclusiveMinimum") {
        if v <= m {
            v = if integer { m.floor() + 1.0 } else { m + 1.0 };
        }
    }
    if let Some(m) = f("maximum") {
        v = v.min(m);
    }
    if let Some(m) = f("exclusiveMaximum") {
        if v >= m {
            v = if integer { m.ceil() - 1.0 } else { m - 1.0 };
        }
    }
    if integer {
        json!(v.ceil() as i64)
    } else if v.fract() == 0.0 && v.abs() < 9.0e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

fn string(s: &Map<String, Value>, name: Option<&str>) -> Value {
    let mut text = match s.get("format").and_then(Value::as_str) {
        Some("date-time") => "1970-01-01T00:00:00Z".to_string(),
        Some("date") => "1970-01-01".to_string(),
        Some("time") => "00:00:00Z".to_string(),
        Some("email") => "mock@example.com".to_string(),
        Some("uri") | Some("url") => "http://127.0.0.1/".to_string(),
        Some("uuid") => "00000000-0000-0000-0000-000000000000".to_string(),
        _ if name == Some("title") => "Mock title".to_string(),
        _ => "mock".to_string(),
    };
    let len = |k: &str| s.get(k).and_then(Value::as_u64).map(|n| n as usize);
    if let Some(min) = len("minLength") {
        while text.chars().count() < min.min(10_000) {
            text.push('x');
        }
    }
    if let Some(max) = len("maxLength") {
        text = text.chars().take(max).collect();
    }
    Value::String(text)
}

/// A local reference (`#/$defs/Name`, `#/definitions/Name`, `#`).
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

/// `allOf` folded into one schema: properties merged, required lists joined.
fn merge(base: &Map<String, Value>, all: &[Value], root: &Value) -> Map<String, Value> {
    let mut out = base.clone();
    out.remove("allOf");
    for part in all {
        let part = match part.get("$ref").and_then(Value::as_str) {
            Some(r) => resolve(root, r).unwrap_or(part),
            None => part,
        };
        let Some(part) = part.as_object() else {
            continue;
        };
        for (k, v) in part {
            match (k.as_str(), out.get_mut(k)) {
                ("properties", Some(Value::Object(mine))) => {
                    if let Value::Object(theirs) = v {
                        mine.extend(theirs.clone());
                    }
                }
                ("required", Some(Value::Array(mine))) => {
                    if let Value::Array(theirs) = v {
                        mine.extend(theirs.iter().cloned());
                    }
                }
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_schema() {
        let s = json!({"type": "object", "properties": {"title": {"type": "string"}},
            "required": ["title"], "additionalProperties": false});
        assert_eq!(instance(&s), json!({"title": "Mock title"}));
    }

    #[test]
    fn scalars_and_required_only() {
        let s = json!({"type": "object",
            "properties": {"a": {"type": "string"}, "n": {"type": "integer"},
                "x": {"type": "number"}, "b": {"type": "boolean"},
                "l": {"type": "array", "items": {"type": "string"}},
                "opt": {"type": "string"}},
            "required": ["a", "n", "x", "b", "l"]});
        assert_eq!(
            instance(&s),
            json!({"a": "mock", "n": 0, "x": 0, "b": false, "l": []})
        );
    }

    #[test]
    fn no_required_means_every_property() {
        let s = json!({"properties": {"title": {}, "k": {"type": ["null", "boolean"]}}});
        assert_eq!(instance(&s), json!({"title": "Mock title", "k": false}));
    }

    #[test]
    fn refs_enums_unions_and_bounds() {
        let s = json!({
        "$defs": {"Item": {"type": "object", "required": ["kind", "n"],
            "properties": {"kind": {"enum": ["a", "b"]},
                "n": {"type": "integer", "minimum": 3}}}},
        "type": "object", "required": ["items", "c", "u", "s", "t", "p"],
        "properties": {
            "items": {"type": "array", "minItems": 2, "items": {"$ref": "#/$defs/Item"}},
            "c": {"const": 42},
            "u": {"anyOf": [{"type": "number", "exclusiveMinimum": 0.5}, {"type": "null"}]},
            "s": {"type": "string", "minLength": 6},
            "t": {"type": "string", "format": "date-time"},
            "p": {"allOf": [{"properties": {"q": {"type": "boolean"}}, "required": ["q"]}]}
        }});
        assert_eq!(
            instance(&s),
            json!({"items": [{"kind": "a", "n": 3}, {"kind": "a", "n": 3}], "c": 42,
                "u": 1.5, "s": "mockxx", "t": "1970-01-01T00:00:00Z", "p": {"q": false}})
        );
    }

    #[test]
    fn recursion_is_bounded() {
        let s = json!({"$ref": "#"});
        assert_eq!(instance(&s), Value::Null);
    }
}
