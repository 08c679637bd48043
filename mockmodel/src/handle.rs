//! One connection's requests: routing, body decoding, the request log
//! entry, and the answer (streamed, whole, or an error).

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::http::{Conn, ReadError, Request};
use crate::log::{Api, LoggedRequest, RequestLog, HEADERS_OF_INTEREST};
use crate::pacing::{self, Overrides, Pacing};
use crate::server::Config;
use crate::sse::{self, EventSource, Mark, Reply};
use crate::tools::{self, Answer, Knob};
use crate::{anthropic, chat, responses, schema};

/// What every connection of one server shares.
pub(crate) struct State {
    pub config: Config,
    pub log: Arc<RequestLog>,
    /// Numbers the reply ids.
    pub next_reply: AtomicU64,
}

pub(crate) async fn connection(stream: TcpStream, state: Arc<State>) {
    let mut conn = Conn::new(stream);
    loop {
        match conn.read_request().await {
            Ok(Some(req)) => match handle(&mut conn, &req, &state).await {
                Ok(true) => {}
                _ => return,
            },
            Ok(None) | Err(ReadError::Io(_)) => return,
            Err(ReadError::Bad(why)) => {
                let req = Request {
                    method: "GET".into(),
                    target: "/".into(),
                    http10: false,
                    headers: vec![("connection".into(), "close".into())],
                    body: Vec::new(),
                };
                let body = error_body("invalid_request_error", why);
                let _ = conn
                    .respond(&req, 400, "application/json", &[], body.as_bytes())
                    .await;
                return;
            }
        }
    }
}

/// What a model request's body says about the reply it wants.
#[derive(Default)]
struct Seen {
    /// Text of the last user message that has text.
    prompt: Option<String>,
    /// The schema of a structured-output request.
    schema: Option<Value>,
    /// The tools the client offers to run.
    tools: Vec<String>,
    /// The tool result the last message carries.
    tool_result: Option<String>,
    /// The tools offered inside Responses namespaces: the name in `tools`,
    /// and the namespace its call names.
    namespaced: Vec<(String, String)>,
}

impl Seen {
    fn of(api: Api, body: &Value) -> Seen {
        let (prompt, schema, tools, tool_result) = match api {
            Api::AnthropicMessages => (
                anthropic::prompt(body),
                anthropic::schema(body),
                anthropic::tools(body),
                anthropic::tool_result(body),
            ),
            Api::OpenaiResponses => (
                responses::prompt(body),
                responses::schema(body),
                responses::tools(body),
                responses::tool_result(body),
            ),
            Api::OpenaiChat => (
                chat::prompt(body),
                chat::schema(body),
                chat::tools(body),
                chat::tool_result(body),
            ),
            _ => return Seen::default(),
        };
        let namespaced = match api {
            Api::OpenaiResponses => responses::namespaced(body),
            _ => Vec::new(),
        };
        Seen {
            prompt,
            schema,
            tools,
            tool_result,
            namespaced,
        }
    }

    /// Structured output first, then the text after a tool result, then a
    /// tool call the prompt asks for (see [`tools`]), then text.
    fn answer(&self, overrides: &Overrides, default_reply: &str, call_id: String) -> Answer {
        if let Some(s) = &self.schema {
            return Answer::Text(schema::instance(s).to_string());
        }
        if let Some(result) = &self.tool_result {
            return Answer::Text(tools::follow_up(result));
        }
        let knob = self.prompt.as_deref().and_then(Knob::parse);
        knob.and_then(|k| tools::call(&k, &self.tools, call_id))
            .map(|answer| match answer {
                Answer::Tool(mut call) => {
                    call.namespace = self
                        .namespaced
                        .iter()
                        .find(|(name, _)| *name == call.name)
                        .map(|(_, ns)| ns.clone());
                    Answer::Tool(call)
                }
                text => text,
            })
            .unwrap_or_else(|| {
                Answer::Text(overrides.reply.clone().unwrap_or(default_reply.to_string()))
            })
    }
}

fn error_body(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
}

fn route(path: &str) -> Api {
    if path == "/" {
        return Api::Root;
    }
    // Base URLs with and without `/v1` both work.
    let p = path.strip_prefix("/v1").filter(|p| p.starts_with('/'));
    match p.unwrap_or(path).trim_end_matches('/') {
        "/messages" => Api::AnthropicMessages,
        "/messages/count_tokens" => Api::AnthropicCountTokens,
        "/responses" => Api::OpenaiResponses,
        "/chat/completions" => Api::OpenaiChat,
        "/models" => Api::Models,
        _ => Api::Unknown,
    }
}

fn allowed(api: Api, method: &str) -> bool {
    match api {
        Api::Root | Api::Models => method == "GET" || method == "HEAD",
        Api::Unknown => true,
        _ => method == "POST",
    }
}

/// The JSON body, or why there is none to read.
fn decode_body(req: &Request) -> (Option<Value>, Option<String>) {
    if req.body.is_empty() {
        return (None, None);
    }
    let encoding = req.header("content-encoding").map(str::trim);
    if let Some(enc) = encoding.filter(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity")) {
        return (None, Some(format!("unsupported content-encoding: {enc}")));
    }
    match serde_json::from_slice(&req.body) {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(format!("invalid JSON body: {e}"))),
    }
}

fn logged_headers(req: &Request) -> BTreeMap<String, String> {
    req.headers
        .iter()
        .filter(|(n, _)| HEADERS_OF_INTEREST.contains(&n.as_str()))
        .map(|(n, v)| {
            let secret = n == "authorization" || n == "x-api-key";
            let v = if secret {
                "<redacted>".into()
            } else {
                v.clone()
            };
            (n.clone(), v)
        })
        .collect()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Answers one request; `Ok(true)` when the connection stays open.
async fn handle(conn: &mut Conn, req: &Request, state: &State) -> io::Result<bool> {
    let received = Instant::now();
    let log = &state.log;
    let api = route(req.path());
    let (body, body_error) = decode_body(req);
    let model_api = matches!(
        api,
        Api::AnthropicMessages | Api::OpenaiResponses | Api::OpenaiChat
    );
    let seen = body.as_ref().map(|b| Seen::of(api, b)).unwrap_or_default();
    // The CLIs always stream; a body that could not be read is taken to.
    let stream = model_api
        && body
            .as_ref()
            .is_none_or(|b| b.get("stream").and_then(Value::as_bool) == Some(true));
    let include_usage = body.as_ref().is_some_and(chat::include_usage);
    let overrides = Overrides::parse(seen.prompt.as_deref().unwrap_or_default());
    let pacing = overrides.apply(state.config.pacing);
    let n = state.next_reply.fetch_add(1, Ordering::Relaxed);
    let call_id = match api {
        Api::AnthropicMessages => format!("toolu_mock_{n}"),
        _ => format!("call_mock_{n}"),
    };
    let answer = seen.answer(&overrides, &state.config.reply, call_id);
    let status = match (api, allowed(api, &req.method)) {
        (_, false) => 405,
        (Api::Unknown, _) => 404,
        _ => 200,
    };
    let model = body
        .as_ref()
        .and_then(|b| b.get("model"))
        .and_then(Value::as_str)
        .map(String::from);
    let id = log.push(LoggedRequest {
        id: 0,
        method: req.method.clone(),
        path: req.path().to_string(),
        query: req.query().map(String::from),
        headers: logged_headers(req),
        body,
        body_error,
        api,
        model: model.clone(),
        structured: seen.schema.is_some(),
        stream: stream && status == 200,
        pacing,
        reply: match &answer {
            Answer::Text(t) if model_api && status == 200 => Some(t.clone()),
            _ => None,
        },
        tool_call: match &answer {
            Answer::Tool(c) if model_api && status == 200 => Some(c.clone()),
            _ => None,
        },
        tool_result: seen.tool_result.clone(),
        prompt: seen.prompt.clone(),
        status,
        received_at: log.wall(received.into_std()),
        first_delta_at: None,
        last_delta_at: None,
        finished_at: None,
        completed: false,
        aborted: false,
    });

    let (text, tool) = match answer {
        Answer::Text(t) => (t, None),
        Answer::Tool(c) => (c.arguments.to_string(), Some(c)),
    };
    let reply = Reply {
        id: match api {
            Api::OpenaiResponses => format!("resp_mock_{n}"),
            Api::OpenaiChat => format!("chatcmpl-mock-{n}"),
            _ => format!("msg_mock_{n}"),
        },
        model: model.unwrap_or_else(|| "mock-1".into()),
        text,
        tool,
        input_tokens: (req.body.len() as u64).div_ceil(4),
        created: unix_now(),
    };
    let at_once = seen.schema.is_some();
    let result = if status != 200 {
        let message = format!("{} {} is not served here", req.method, req.path());
        let kind = if status == 404 {
            "not_found_error"
        } else {
            "invalid_request_error"
        };
        let body = error_body(kind, &message);
        conn.respond(req, status, "application/json", &[], body.as_bytes())
            .await
    } else if stream {
        let mut src: Box<dyn EventSource> = match api {
            Api::AnthropicMessages => Box::new(anthropic::Stream(reply.clone())),
            Api::OpenaiResponses => Box::new(responses::Stream::new(reply.clone())),
            _ => Box::new(chat::Stream::new(reply.clone(), include_usage)),
        };
        let pieces = if at_once {
            vec![reply.text.clone()]
        } else {
            pacing::split(&reply.text, pacing.deltas)
        };
        let mut mark = |m: Mark, at: Instant| {
            let wall = log.wall(at.into_std());
            log.update(id, |e| match m {
                Mark::FirstDelta => e.first_delta_at = Some(wall),
                Mark::LastDelta => e.last_delta_at = Some(wall),
            });
        };
        let extra = request_id_header(api, &reply.id);
        match conn.start_stream(req, "text/event-stream", &extra).await {
            Ok(()) => {
                sse::stream(
                    conn,
                    src.as_mut(),
                    &pieces,
                    pacing,
                    at_once,
                    received,
                    &mut mark,
                )
                .await
            }
            Err(e) => Err(e),
        }
    } else {
        answer_whole(conn, req, api, &reply, pacing, at_once, received, id, log).await
    };
    let done = log.wall(std::time::Instant::now());
    let ok = result.is_ok();
    log.update(id, |e| {
        e.finished_at = Some(done);
        e.completed = ok;
        e.aborted = !ok;
    });
    result?;
    Ok(req.keep_alive() && !(stream && status == 200 && req.http10))
}

fn request_id_header(api: Api, id: &str) -> Vec<(&'static str, String)> {
    match api {
        Api::OpenaiResponses | Api::OpenaiChat => vec![("x-request-id", format!("req_{id}"))],
        _ => vec![("request-id", format!("req_{id}"))],
    }
}

/// A reply sent whole (no `"stream": true`), after the think and slow time
/// unless it is structured output, and the other endpoints' answers.
#[allow(clippy::too_many_arguments)]
async fn answer_whole(
    conn: &mut Conn,
    req: &Request,
    api: Api,
    reply: &Reply,
    pacing: Pacing,
    at_once: bool,
    received: Instant,
    id: u64,
    log: &RequestLog,
) -> io::Result<()> {
    let body = match api {
        Api::Root => {
            return conn
                .respond(req, 200, "text/plain", &[], b"mock model server\n")
                .await
        }
        Api::Models => models(),
        Api::AnthropicCountTokens => anthropic::count_tokens(reply.input_tokens),
        Api::AnthropicMessages => anthropic::message(reply),
        Api::OpenaiResponses => responses::complete(reply),
        _ => chat::complete(reply),
    };
    let model_api = matches!(
        api,
        Api::AnthropicMessages | Api::OpenaiResponses | Api::OpenaiChat
    );
    if model_api {
        if !at_once {
            conn.pause_until(received + pacing.think + pacing.slow)
                .await?;
        }
        let wall = log.wall(std::time::Instant::now());
        log.update(id, |e| {
            e.first_delta_at = Some(wall);
            e.last_delta_at = Some(wall);
        });
    }
    let extra = request_id_header(api, &reply.id);
    let bytes = body.to_string();
    conn.respond(req, 200, "application/json", &extra, bytes.as_bytes())
        .await
}

/// `GET /v1/models`: `mock-1`, in a shape both the OpenAI and the
/// Anthropic SDKs accept.
fn models() -> Value {
    json!({
        "object": "list",
        "data": [{"id": "mock-1", "object": "model", "type": "model", "created": 0,
            "created_at": "1970-01-01T00:00:00Z", "owned_by": "mock",
            "display_name": "Mock 1"}],
        "has_more": false,
        "first_id": "mock-1",
        "last_id": "mock-1",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("/"), Api::Root);
        assert_eq!(route("/v1/messages"), Api::AnthropicMessages);
        assert_eq!(route("/messages"), Api::AnthropicMessages);
        assert_eq!(
            route("/v1/messages/count_tokens"),
            Api::AnthropicCountTokens
        );
        assert_eq!(route("/v1/responses"), Api::OpenaiResponses);
        assert_eq!(route("/v1/chat/completions/"), Api::OpenaiChat);
        assert_eq!(route("/v1/models"), Api::Models);
        assert_eq!(route("/v1"), Api::Unknown);
        assert_eq!(route("/v1x/models"), Api::Unknown);
    }
}
