//! Tool calls on demand: a prompt knob that makes one reply a tool call,
//! and the text reply once the tool's result comes back.
//!
//! Tests need permission requests and tool turns from the real CLIs, and
//! the CLIs only run a tool when the model asks for one. The last user
//! message may therefore hold `TOOL=<name>` and either `ARGS=<JSON object
//! without spaces>` or `ARGS64=<base64 of a JSON object>` (base64 survives
//! any quoting a CLI wraps the prompt in); no arguments means `{}`. The
//! reply to that request is then a call of that tool, in the shape of the
//! request's API.
//!
//! The call happens only on the request that carries the prompt:
//!
//! - a request whose last message is a tool's result (an Anthropic
//!   `tool_result` block, a Responses `function_call_output` item, a Chat
//!   `role: "tool"` message) is answered with text, [`follow_up`], which
//!   names the result, so a test sees that the result reached the model and
//!   the turn cannot loop;
//! - a request that offers no tools (a session title, Claude Code's
//!   side requests) or asks for structured output is answered as usual;
//! - a request that offers tools, but not the named one, or whose
//!   arguments do not decode, gets a text reply saying what is wrong, so
//!   the mistake shows in the CLI's transcript instead of a silent reply.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call the prompt asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct Knob {
    /// The tool's name, as the request's tool definitions spell it.
    pub name: String,
    /// The arguments (a JSON object), or why the `ARGS`/`ARGS64` value is
    /// unusable.
    pub arguments: Result<Value, String>,
}

impl Knob {
    /// Reads `TOOL=`, `ARGS=` and `ARGS64=` from a prompt; the last
    /// occurrence of each wins. `None` without a usable `TOOL=`.
    pub fn parse(prompt: &str) -> Option<Knob> {
        let mut name = None;
        let mut arguments = Ok(Value::Object(Default::default()));
        for word in prompt.split_whitespace() {
            let Some((key, value)) = word.split_once('=') else {
                continue;
            };
            match key {
                "TOOL" => {
                    let n = leading(value, |c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if !n.is_empty() {
                        name = Some(n.to_string());
                    }
                }
                "ARGS" => arguments = json_object(value).map_err(|why| format!("ARGS {why}")),
                "ARGS64" => arguments = base64_json(value).map_err(|why| format!("ARGS64 {why}")),
                _ => {}
            }
        }
        Some(Knob {
            name: name?,
            arguments,
        })
    }
}

/// The tokens that ask for a call of `name` with `arguments` (a JSON
/// object): `TOOL=<name> ARGS64=<base64>`, to put in a prompt.
pub fn knob(name: &str, arguments: &Value) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(arguments.to_string());
    format!("TOOL={name} ARGS64={encoded}")
}

/// The longest prefix of `value` whose characters all pass `ok` (so the
/// quotes or full stop a CLI or a typist puts after a token do not count).
fn leading(value: &str, ok: impl Fn(char) -> bool) -> &str {
    let end = value.find(|c| !ok(c)).unwrap_or(value.len());
    &value[..end]
}

/// The JSON object at the start of `text` (what follows it is ignored).
fn json_object(text: &str) -> Result<Value, String> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match values.next() {
        Some(Ok(v @ Value::Object(_))) => Ok(v),
        Some(Ok(_)) => Err("is not a JSON object".into()),
        Some(Err(e)) => Err(format!("is not JSON ({e})")),
        None => Err("is empty".into()),
    }
}

/// Standard or URL-safe base64, padded or not.
fn base64_json(value: &str) -> Result<Value, String> {
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let text = leading(value, |c| c.is_ascii_alphanumeric() || "+/-_=".contains(c));
    let alphabet = if text.contains(['-', '_']) {
        &alphabet::URL_SAFE
    } else {
        &alphabet::STANDARD
    };
    let bytes = GeneralPurpose::new(alphabet, config)
        .decode(text.trim_end_matches('='))
        .map_err(|e| format!("is not base64 ({e})"))?;
    let text = String::from_utf8(bytes).map_err(|_| "does not decode to UTF-8".to_string())?;
    json_object(&text)
}

/// A tool call as sent, and as the request log records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id (`tool_use_id` / `call_id`), which its result names.
    pub id: String,
    /// The tool's name as the knob gives it (for a tool offered inside a
    /// Responses namespace, `<namespace>__<name>`).
    pub name: String,
    /// The Responses namespace that holds the tool, when it is offered in
    /// one ([`crate::responses`]): the call then names the namespace and
    /// the tool's own name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The arguments (a JSON object).
    pub arguments: Value,
}

/// What a model request is answered with.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Text(String),
    Tool(ToolCall),
}

/// The answer to a request that offers the tools `offered` and whose prompt
/// asked for `knob`; `call_id` names the call. `None` when the request
/// offers no tools (it is answered as if there were no knob).
pub fn call(knob: &Knob, offered: &[String], call_id: String) -> Option<Answer> {
    if offered.is_empty() {
        return None;
    }
    if !offered.contains(&knob.name) {
        return Some(Answer::Text(format!(
            "mock-model-server: TOOL={} is not a tool of this request; it offers: {}",
            knob.name,
            offered.join(", ")
        )));
    }
    Some(match &knob.arguments {
        Ok(arguments) => Answer::Tool(ToolCall {
            id: call_id,
            name: knob.name.clone(),
            namespace: None,
            arguments: arguments.clone(),
        }),
        Err(why) => Answer::Text(format!(
            "mock-model-server: {why}; give ARGS=<a JSON object without spaces> or ARGS64=<base64 of one>"
        )),
    })
}

/// How many characters of a tool's result the follow-up text quotes.
pub const QUOTED_CHARS: usize = 200;

/// The text reply to a request that carries a tool's result:
/// `tool result received: ` and the result's first [`QUOTED_CHARS`]
/// characters, with runs of white space made one space.
pub fn follow_up(result: &str) -> String {
    let flat = result.split_whitespace().collect::<Vec<_>>().join(" ");
    let quoted: String = flat.chars().take(QUOTED_CHARS).collect();
    format!("tool result received: {quoted}")
}

/// The text of a tool result's content: a string, or the `text` of its
/// parts, joined by line breaks (empty when it has none).
pub(crate) fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Names of the tools a request offers: those whose `type` `kind` accepts,
/// named at the JSON pointer `name_at` of each tool. Each API spells its
/// tools its own way; this is the walk they share.
pub fn offered(body: &Value, kind: impl Fn(Option<&str>) -> bool, name_at: &str) -> Vec<String> {
    let Some(tools) = body.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter(|t| kind(t.get("type").and_then(Value::as_str)))
        .filter_map(|t| Some(t.pointer(name_at)?.as_str()?.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn knob_tokens() {
        assert_eq!(Knob::parse("say hi REPLY=x"), None);
        let k = Knob::parse("please TOOL=Write. now").unwrap();
        assert_eq!(k.name, "Write");
        assert_eq!(k.arguments, Ok(json!({})));
        let k = Knob::parse(r#""run TOOL=bash ARGS={"command":"ls"}""#).unwrap();
        assert_eq!(k.name, "bash");
        assert_eq!(k.arguments, Ok(json!({"command": "ls"})));
        let args = r#"{"filePath":"/tmp/a b","content":"hi\nthere"}"#;
        let k = Knob::parse(&format!("TOOL=write ARGS64={}\"", b64(args))).unwrap();
        assert_eq!(
            k.arguments,
            Ok(json!({"filePath": "/tmp/a b", "content": "hi\nthere"}))
        );
        // Unpadded and URL-safe base64 work too.
        let url = b64(r#"{"a":"??>"}"#).replace('+', "-").replace('/', "_");
        let k = Knob::parse(&format!("TOOL=t ARGS64={}", url.trim_end_matches('='))).unwrap();
        assert_eq!(k.arguments, Ok(json!({"a": "??>"})));
    }

    #[test]
    fn knob_round_trip() {
        let args = json!({"cmd": "printf 'a b' > \"/x y\""});
        let k = Knob::parse(&format!("do it {}.", knob("exec_command", &args))).unwrap();
        assert_eq!((k.name.as_str(), k.arguments), ("exec_command", Ok(args)));
    }

    #[test]
    fn bad_arguments_are_reported() {
        let why = |p: &str| Knob::parse(p).unwrap().arguments.unwrap_err();
        assert_eq!(why("TOOL=t ARGS=[1]"), "ARGS is not a JSON object");
        assert!(why("TOOL=t ARGS={\"a\":").starts_with("ARGS is not JSON ("));
        assert_eq!(why("TOOL=t ARGS64=!!"), "ARGS64 is empty");
        assert!(why("TOOL=t ARGS64=QQ=A").starts_with("ARGS64 is not base64 ("));
        assert!(why(&format!("TOOL=t ARGS64={}", b64("nope"))).starts_with("ARGS64 is not JSON"));
        let answer = call(
            &Knob::parse("TOOL=t ARGS=1").unwrap(),
            &["t".into()],
            "c".into(),
        );
        let Some(Answer::Text(t)) = answer else {
            panic!("{answer:?}")
        };
        assert!(
            t.contains("ARGS is not a JSON object") && t.contains("ARGS64="),
            "{t}"
        );
    }

    #[test]
    fn calls_only_offered_tools() {
        let knob = Knob::parse("TOOL=write ARGS={\"x\":1}").unwrap();
        assert_eq!(call(&knob, &[], "c1".into()), None);
        assert_eq!(
            call(&knob, &["bash".into(), "write".into()], "c1".into()),
            Some(Answer::Tool(ToolCall {
                id: "c1".into(),
                name: "write".into(),
                namespace: None,
                arguments: json!({"x": 1}),
            }))
        );
        let Some(Answer::Text(t)) = call(&knob, &["bash".into(), "read".into()], "c1".into())
        else {
            panic!()
        };
        assert_eq!(
            t,
            "mock-model-server: TOOL=write is not a tool of this request; it offers: bash, read"
        );
    }

    #[test]
    fn follow_up_quotes_the_result() {
        assert_eq!(
            follow_up("wrote\n  /tmp/x   ok"),
            "tool result received: wrote /tmp/x ok"
        );
        let long = "é".repeat(300);
        assert_eq!(
            follow_up(&long).chars().count(),
            "tool result received: ".len() + QUOTED_CHARS
        );
        assert_eq!(
            result_text(Some(
                &json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
            )),
            "a\nb"
        );
    }
}
