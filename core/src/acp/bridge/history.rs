//! What a client sees of the transcript, replayed or live.
//!
//! The tap holds every line between the supervisor and its agent, so the
//! bridge needs no second record: a client is shown the agent's
//! `session/update` notifications exactly as the agent sent them, and every
//! prompt sent in the session — the runtime's own deliveries and every
//! client's — as `user_message_chunk` updates, which is how ACP agents
//! replay a user's turns on `session/load`. Each update carries its
//! transcript position in `_meta.agentComms.seq`, so a client that lost its
//! connection can name where it stopped and get exactly what followed.
//!
//! Pure functions over entries: no I/O, so they are tested and fuzzed alone.

use std::borrow::Borrow;

use serde_json::{json, Map, Value};

use crate::acp::transcript::{Direction, Entry};

/// The `_meta` key under which agent-comms says what it adds to a message.
pub const META_KEY: &str = "agentComms";

/// How much of the past a joining client is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    /// The whole transcript (`session/load`).
    Full,
    /// Only the running turn, from its prompt (and, to a controller, the
    /// permission requests still unanswered).
    PendingOnly,
    /// Nothing: live updates from now on (`session/resume`).
    None,
}

impl History {
    pub fn parse(text: &str) -> Option<History> {
        match text {
            "full" => Some(History::Full),
            "pending_only" => Some(History::PendingOnly),
            "none" => Some(History::None),
            _ => None,
        }
    }
}

/// Which seat sent a prompt, as the bridge marks it (`client-N`); none for
/// the runtime's own deliveries.
pub fn prompt_origin(params: &Value) -> Option<&str> {
    params.get("_meta")?.get(META_KEY)?.get("from")?.as_str()
}

/// Marks prompt `params` as sent by `from`, keeping the client's own
/// `_meta`.
pub fn mark_origin(meta: &mut Option<Map<String, Value>>, from: &str) {
    meta.get_or_insert_with(Map::new)
        .insert(META_KEY.into(), json!({ "from": from }));
}

/// The `session/update` params that `entry` shows a client of session
/// `session`: none, one (an update of the agent's), or one per content
/// block of a prompt. `skip_from` leaves out the prompts that seat sent
/// itself (live, it shows its own prompt already).
pub fn updates(entry: &Entry, session: &str, skip_from: Option<&str>) -> Vec<Value> {
    let Some(msg) = &entry.msg else {
        return Vec::new();
    };
    let method = msg.get("method").and_then(Value::as_str);
    let Some(params) = msg.get("params").filter(|p| in_session(p, session)) else {
        return Vec::new();
    };
    match (entry.dir, method) {
        (Direction::FromAgent, Some("session/update")) => {
            let mut params = params.clone();
            stamp(&mut params, entry.seq);
            vec![params]
        }
        (Direction::ToAgent, Some("session/prompt")) => {
            if skip_from.is_some() && prompt_origin(params) == skip_from {
                return Vec::new();
            }
            let blocks = params.get("prompt").and_then(Value::as_array);
            blocks
                .into_iter()
                .flatten()
                .map(|block| {
                    let mut update = json!({
                        "sessionId": session,
                        "update": { "sessionUpdate": "user_message_chunk", "content": block },
                    });
                    stamp(&mut update, entry.seq);
                    update
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Where a replay starts for `history`: the first position shown, given the
/// transcript's `entries` (read once, in order) and `mark`, the position
/// the live stream starts at.
pub fn replay_start<E: Borrow<Entry>>(
    entries: impl IntoIterator<Item = E>,
    history: History,
    mark: u64,
) -> u64 {
    match history {
        History::Full => 0,
        History::None => mark,
        History::PendingOnly => running_prompt(entries).unwrap_or(mark),
    }
}

/// The position of the prompt whose response has not come: the running
/// turn's start.
fn running_prompt<E: Borrow<Entry>>(entries: impl IntoIterator<Item = E>) -> Option<u64> {
    let mut running: Option<(u64, Value)> = None;
    for entry in entries {
        let entry = entry.borrow();
        let Some(msg) = &entry.msg else { continue };
        match entry.dir {
            Direction::ToAgent if msg.get("method") == Some(&json!("session/prompt")) => {
                running = msg.get("id").map(|id| (entry.seq, id.clone()));
            }
            Direction::FromAgent
                if msg.get("method").is_none()
                    && running
                        .as_ref()
                        .is_some_and(|(_, id)| msg.get("id") == Some(id)) =>
            {
                running = None;
            }
            _ => {}
        }
    }
    running.map(|(seq, _)| seq)
}

fn in_session(params: &Value, session: &str) -> bool {
    params.get("sessionId").and_then(Value::as_str) == Some(session)
}

/// Adds `_meta.agentComms.seq` to a notification's params, keeping the
/// agent's own `_meta` keys. A `_meta` that is not an object (ACP says it
/// is one) gives way: the position is what a client reconnects with.
fn stamp(params: &mut Value, seq: u64) {
    let Some(params) = params.as_object_mut() else {
        return;
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let ours = meta
        .as_object_mut()
        .expect("made an object")
        .entry(META_KEY)
        .or_insert_with(|| json!({}));
    if !ours.is_object() {
        *ours = json!({});
    }
    ours.as_object_mut()
        .expect("made an object")
        .insert("seq".into(), json!(seq));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, dir: Direction, msg: Value) -> Entry {
        Entry {
            seq,
            ts: String::new(),
            dir,
            msg: Some(msg),
            text: None,
        }
    }

    fn prompt(seq: u64, id: u64, from: Option<&str>) -> Entry {
        let mut params = json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]});
        if let Some(from) = from {
            params["_meta"] = json!({ META_KEY: { "from": from } });
        }
        entry(
            seq,
            Direction::ToAgent,
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": params}),
        )
    }

    fn update(seq: u64, session: &str) -> Entry {
        entry(
            seq,
            Direction::FromAgent,
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "yo"}}, "_meta": {"agent": 1}}}),
        )
    }

    fn response(seq: u64, id: u64) -> Entry {
        entry(
            seq,
            Direction::FromAgent,
            json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}),
        )
    }

    #[test]
    fn an_update_is_shown_as_sent_with_its_position() {
        let shown = updates(&update(7, "s1"), "s1", None);
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0]["update"]["content"]["text"], "yo");
        assert_eq!(shown[0]["_meta"]["agent"], 1, "the agent's own meta stays");
        assert_eq!(shown[0]["_meta"][META_KEY]["seq"], 7);
        assert!(updates(&update(7, "other"), "s1", None).is_empty());
    }

    #[test]
    fn a_prompt_is_shown_as_user_chunks_except_to_its_sender_live() {
        let shown = updates(&prompt(3, 0, Some("client-2")), "s1", None);
        let texts: Vec<&Value> = shown
            .iter()
            .map(|u| &u["update"]["content"]["text"])
            .collect();
        assert_eq!(texts, ["hi", "there"]);
        assert_eq!(shown[0]["update"]["sessionUpdate"], "user_message_chunk");
        assert!(updates(&prompt(3, 0, Some("client-2")), "s1", Some("client-2")).is_empty());
        assert_eq!(
            updates(&prompt(3, 0, Some("client-2")), "s1", Some("client-5")).len(),
            2
        );
        assert_eq!(
            updates(&prompt(3, 0, None), "s1", Some("client-5")).len(),
            2
        );
    }

    #[test]
    fn pending_only_starts_at_the_running_turn() {
        let done = [prompt(0, 1, None), update(1, "s1"), response(2, 1)];
        assert_eq!(replay_start(&done, History::PendingOnly, 3), 3);
        let running = [
            prompt(0, 1, None),
            response(1, 1),
            prompt(2, 2, None),
            update(3, "s1"),
        ];
        assert_eq!(replay_start(&running, History::PendingOnly, 4), 2);
        assert_eq!(replay_start(&running, History::Full, 4), 0);
        assert_eq!(replay_start(&running, History::None, 4), 4);
    }
}
