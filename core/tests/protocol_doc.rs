//! docs/protocol.md lists every message `type` of protocol v1, and no other.
//!
//! The lists come from serde, not from a copy kept here that could drift
//! with the code: a payload whose `type` names no variant is refused with
//! "unknown variant `…`, expected one of `a`, `b`, …", and that list is the
//! derived one, so a variant added to `Request`, `Response` or `Event`
//! without a row in the doc fails this test, and so does a row for a type
//! that no longer exists.

use agent_comms_core::socket::protocol::{Event, Request, Response};
use serde::de::DeserializeOwned;

/// Every `type` that `T` accepts on the wire.
fn wire_types<T: DeserializeOwned + std::fmt::Debug>() -> Vec<String> {
    let refused = serde_json::from_str::<T>(r#"{"type": "no such type"}"#)
        .expect_err("no variant is named 'no such type'")
        .to_string();
    let (_, list) = refused
        .split_once(", expected ")
        .unwrap_or_else(|| panic!("serde's error names no variants: {refused}"));
    // "one of `a`, `b`, `c` at line 1 column 24" (or "`a` or `b`"): the
    // names are the quoted parts.
    let types: Vec<String> = list
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    for t in &types {
        // Read each name back: a unit variant parses, one with fields misses
        // them; neither is an unknown variant, which would mean the list
        // above was read wrong.
        if let Err(e) = serde_json::from_value::<T>(serde_json::json!({ "type": t })) {
            assert!(!e.to_string().contains("unknown variant"), "{t}: {e}");
        }
    }
    types
}

/// The first cells (`` `type` ``) of the table under `## {section}`.
fn documented(doc: &str, section: &str) -> Vec<String> {
    let heading = format!("## {section}\n");
    let (_, rest) = doc
        .split_once(&heading)
        .unwrap_or_else(|| panic!("docs/protocol.md has no '## {section}' section"));
    let body = rest.split("\n## ").next().unwrap_or(rest);
    body.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(t, _)| t.to_owned()))
        .filter(|t| t != "type")
        .collect()
}

fn check(section: &str, mut code: Vec<String>) {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md"))
        .expect("docs/protocol.md");
    let mut doc = documented(&doc, section);
    assert!(!code.is_empty(), "no {section} found in the code");
    code.sort();
    doc.sort();
    let missing: Vec<_> = code.iter().filter(|t| !doc.contains(t)).collect();
    let stale: Vec<_> = doc.iter().filter(|t| !code.contains(t)).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/protocol.md, '## {section}': add rows for {missing:?}, remove rows for {stale:?}"
    );
}

#[test]
fn every_request_is_documented() {
    let types = wire_types::<Request>();
    assert!(types.iter().any(|t| t == "activity"), "{types:?}");
    check("Requests", types);
}

#[test]
fn every_response_is_documented() {
    check("Responses", wire_types::<Response>());
}

#[test]
fn every_event_is_documented() {
    check("Events", wire_types::<Event>());
}
