//! The exact text `k`/`km` print: JSON as Python's `json.dumps` writes it
//! (`", "` and `": "` separators, non-ASCII kept) and names as Python's
//! `repr` quotes them, because agent-tty's users parse exactly that.

use agent_comms_core::socket::protocol::{CellReply, CellState};

/// A JSON object with keys in the given order, in `json.dumps` style.
pub fn json_object(pairs: &[(&str, serde_json::Value)]) -> String {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}: {}", json_string(k), json_value(v)))
        .collect();
    format!("{{{}}}", body.join(", "))
}

fn json_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => json_string(s),
        other => other.to_string(),
    }
}

/// What `json.dumps(ensure_ascii=False)` escapes — quote, backslash, and C0
/// controls (short forms for \b\f\n\r\t) — and, as all our JSON does
/// (`display::json`), C1 and bidirectional controls as `\uNNNN`: the same
/// string to any JSON reader, harmless on a terminal.
fn json_string(s: &str) -> String {
    agent_comms_core::display::json(s).expect("strings serialize")
}

/// A cell reply as `k` prints it.
pub fn cell_json(reply: &CellReply) -> String {
    let mut pairs: Vec<(&str, serde_json::Value)> = Vec::new();
    if let Some(id) = &reply.cell_id {
        pairs.push(("cell_id", id.clone().into()));
    }
    pairs.push(("status", reply.status.as_str().into()));
    if !matches!(reply.status, CellState::Fired | CellState::Running) {
        pairs.push(("output", reply.output.clone().unwrap_or_default().into()));
    }
    if let (CellState::Done, Some(code)) = (reply.status, reply.exit_code) {
        pairs.push(("exit_code", code.into()));
    }
    json_object(&pairs)
}

pub fn error_json(message: &str) -> String {
    json_object(&[("status", "error".into()), ("output", message.into())])
}

/// Python's `repr()` of a string.
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_matches_python_dumps() {
        let reply = CellReply {
            cell_id: Some("0123456789ab".into()),
            status: CellState::Done,
            output: Some("a\n\"b\" ü\t\u{1}".into()),
            exit_code: Some(0),
        };
        assert_eq!(
            cell_json(&reply),
            r#"{"cell_id": "0123456789ab", "status": "done", "output": "a\n\"b\" ü\t\u0001", "exit_code": 0}"#
        );
        assert_eq!(
            error_json("invalid cell_id"),
            r#"{"status": "error", "output": "invalid cell_id"}"#
        );
    }

    #[test]
    fn repr_matches_python() {
        assert_eq!(py_repr("a/b"), "'a/b'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("x\ny"), "'x\\ny'");
        assert_eq!(py_repr("(gdb)"), "'(gdb)'");
    }
}
