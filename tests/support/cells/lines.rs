//! The reply lines of `k -j` and the event lines of `km`, exactly as the
//! cells contract writes them, for tests that compare whole lines.

use serde_json::Value;

/// `"…"` as `json.dumps` writes a string.
pub fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

pub fn done_line(id: &str, output: &str, exit_code: Option<i64>) -> String {
    let exit = exit_code.map_or(String::new(), |c| format!(", \"exit_code\": {c}"));
    format!(
        "{{\"cell_id\": \"{id}\", \"status\": \"done\", \"output\": {}{exit}}}\n",
        js(output)
    )
}

pub fn fired_line(id: &str) -> String {
    format!("{{\"cell_id\": \"{id}\", \"status\": \"fired\"}}\n")
}

pub fn running_line(id: &str) -> String {
    format!("{{\"cell_id\": \"{id}\", \"status\": \"running\"}}\n")
}

pub fn timeout_line(id: &str, output: &str) -> String {
    format!(
        "{{\"cell_id\": \"{id}\", \"status\": \"timeout\", \"output\": {}}}\n",
        js(output)
    )
}

pub fn error_line(message: &str) -> String {
    format!("{{\"status\": \"error\", \"output\": {}}}\n", js(message))
}

pub fn cell_error_line(id: &str, message: &str) -> String {
    format!(
        "{{\"cell_id\": \"{id}\", \"status\": \"error\", \"output\": {}}}\n",
        js(message)
    )
}

/// True for `YYYY-MM-DDTHH:MM:SS[.fff…](Z|+00:00)`: UTC ISO 8601.
pub fn is_utc_iso8601(ts: &str) -> bool {
    let b = ts.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !(digits(0..4) && digits(5..7) && digits(8..10))
        || !(digits(11..13) && digits(14..16) && digits(17..19))
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return false;
    }
    let mut rest = &ts[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    rest == "Z" || rest == "+00:00"
}

/// The `ts` of a km line, checked to be UTC ISO 8601.
#[track_caller]
pub fn ts_of(line: &str) -> String {
    let v: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("km printed no JSON ({e}): {line}"));
    let ts = v["ts"].as_str().unwrap_or_else(|| panic!("no ts: {line}"));
    assert!(is_utc_iso8601(ts), "ts is not UTC ISO 8601: {line}");
    ts.to_owned()
}

/// A km cell event line, exactly.
pub fn km_cell(id: &str, session: &str, status: &str, ts: &str) -> String {
    format!(
        "{{\"cell_id\": \"{id}\", \"session\": \"{session}\", \"status\": \"{status}\", \"ts\": \"{ts}\"}}"
    )
}

pub fn km_notify(session: &str, from: &str, message: &str, ts: &str) -> String {
    format!(
        "{{\"session\": \"{session}\", \"status\": \"notify\", \"from\": {}, \"message\": {}, \"ts\": \"{ts}\"}}",
        js(from),
        js(message)
    )
}

pub fn km_closed(session: &str, ts: &str) -> String {
    format!("{{\"session\": \"{session}\", \"status\": \"closed\", \"ts\": \"{ts}\"}}")
}
