//! `agent-comms send` and `agent-comms message …` (alias `invocation`):
//! messages between agents. Every field from the store is printed through
//! [`display`]: a body or a sender name is someone else's text.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use agent_comms_core::control::messages::{self, InvocationView, Nudged};
use agent_comms_core::control::registration::ACP;
use agent_comms_core::control::{host::host_id, open_store, ControlError};
use agent_comms_core::display;
use agent_comms_core::ids::Id;
use agent_comms_core::store::{Invocation, InvocationFilter, InvocationStatus, Store};
use anyhow::{bail, Context};

use super::{follow, look};
use clap::{Args, Subcommand};

#[derive(Args)]
#[command(after_help = "Examples:
  agent-comms --actor alice send --to bob 'the build is green'
  agent-comms --actor alice send --to bob --body-file review.md
  agent-comms --actor alice send --to bob --wait 60 'are the tests done?'
  agent-comms --actor alice send --to bob --json 'ping' | jq -r .id

Exit status (whether to send a message again depends on it):
  0  stored (and, with --wait, delivered)
  1  stored, not delivered within --wait, or not waited for because no
     runtime of the agent is online (the line says how to start one); or
     refused before anything was stored (an empty message, an unknown
     agent …). A message not delivered stays queued unless the line says
     otherwise: do not send it again
  3  not stored: the store could not be reached or refused it, said as
     soon as that is known (4 s to connect), not at the end of --wait;
     send it again once the store answers
  4  stored as ID, outcome not known yet: the store went out of reach
     during --wait (read again for up to 4 s after it); do not send it
     again: it is delivered once the store and its runtime are back
     (agent-comms message show ID). Also when the store stopped answering
     as it stored the message: the line says how to look before sending
     it again")]
pub struct SendArgs {
    /// The recipient agent (it must have a runtime record).
    #[arg(long, value_name = "AGENT")]
    to: String,
    /// Read the message from FILE instead of TEXT.
    #[arg(long, value_name = "FILE", conflicts_with = "text")]
    body_file: Option<PathBuf>,
    /// Wait until the notification was delivered (or the attempt failed),
    /// at most this many seconds.
    #[arg(long, value_name = "SECONDS")]
    wait: Option<u64>,
    /// Print the message as JSON: {"id", "from", "to", "status",
    /// "created", "delivered", "reason", "attempts", "stored": true,
    /// "outcome_known"}; outcome_known is false when --wait could not learn
    /// what became of it (exit 4). Not stored (exit 3): {"stored": false,
    /// "error"}.
    #[arg(long)]
    json: bool,
    /// The message; it may be long and span lines: only a short
    /// notification naming it is typed into the recipient's prompt.
    #[arg(required_unless_present = "body_file")]
    text: Option<String>,
}

#[derive(Subcommand)]
pub enum MessageCommand {
    /// List messages, oldest first.
    #[command(after_help = "Examples:
  agent-comms message list
  agent-comms message list --to bob --status pending
  agent-comms message list --follow --to bob   # each change as it happens (Ctrl-C stops)
  agent-comms message list --json | jq -r '.[] | select(.status == \"FAILED\") | .id'")]
    List {
        /// Only messages in this state (any case).
        #[arg(long, value_name = "STATUS", value_parser = ["PENDING", "DELIVERING", "DELIVERED", "UNAVAILABLE", "FAILED"], ignore_case = true)]
        status: Option<String>,
        /// Only messages to this agent.
        #[arg(long, value_name = "AGENT")]
        to: Option<String>,
        /// Only messages from this agent.
        #[arg(long, value_name = "AGENT")]
        from: Option<String>,
        /// Keep running: print each message again whenever its state
        /// changes (stored, DELIVERING, DELIVERED, FAILED …), as it
        /// happens. With --json, one object a line, with `seen`: when the
        /// change was seen.
        #[arg(long)]
        follow: bool,
        /// One JSON array of messages: {"id", "from", "to", "status",
        /// "created", "delivered", "reason", "attempts"} (with --follow,
        /// one such object a line).
        #[arg(long)]
        json: bool,
    },
    /// Show messages with their bodies and every delivery attempt, in the
    /// order given. Control characters from the store are shown escaped
    /// (`\x1b`).
    #[command(after_help = "Examples:
  agent-comms message show inv_3f2a9c1d0b7e
  agent-comms message show inv_3f2a9c1d0b7e inv_91c04e2d5a6f   # several, one after another
  agent-comms message show inv_3f2a9c1d0b7e --json             # one JSON object per message, a line each
  agent-comms message show inv_3f2a9c1d0b7e --raw > body.txt   # the body exactly as sent")]
    Show {
        /// The messages' ids (inv_…), one or more.
        #[arg(required = true, num_args = 1.., value_name = "ID")]
        ids: Vec<String>,
        /// One JSON object per message, a line each.
        #[arg(long, conflicts_with = "raw")]
        json: bool,
        /// Print only the body, exactly as it was sent (escape sequences
        /// and all); one message only.
        #[arg(long)]
        raw: bool,
    },
    /// Queue a message for delivery again and nudge its runtime.
    #[command(after_help = "Examples:
  agent-comms message redeliver inv_3f2a9c1d0b7e
  agent-comms message redeliver inv_3f2a9c1d0b7e --json")]
    #[command(mut_arg("id", |a| a.help("The message's id (inv_…; `--id ID` is accepted too).")))]
    Redeliver {
        #[command(flatten)]
        id: super::subject::Subject,
        /// Print the message as `message list --json` does.
        #[arg(long)]
        json: bool,
    },
    /// Take a waiting message (PENDING, UNAVAILABLE or FAILED) out of its
    /// agent's queue for good: it becomes FAILED, "cancelled by ACTOR".
    #[command(after_help = "Examples:
  agent-comms --actor alice message cancel inv_3f2a9c1d0b7e
  agent-comms message cancel inv_3f2a9c1d0b7e --json")]
    #[command(mut_arg("id", |a| a.help("The message's id (inv_…; `--id ID` is accepted too).")))]
    Cancel {
        #[command(flatten)]
        id: super::subject::Subject,
        /// Print the message as `message list --json` does.
        #[arg(long)]
        json: bool,
    },
}

pub fn send(mut args: SendArgs, actor: Option<Id>) -> anyhow::Result<i32> {
    let from = actor.ok_or(ControlError::NoActor {
        what: "send a message".into(),
    })?;
    let to = Id::agent(&args.to)?;
    let body = body(args.body_file.as_deref(), args.text.take())?;
    let host = host_id()?;
    // Every store error up to the insert means nothing was stored.
    let store = match open_store() {
        Ok(store) => store,
        Err(ControlError::Store(e)) => return not_stored(e, args.json),
        Err(e) => return Err(e.into()),
    };
    let store = store.as_ref();
    let mut line = super::waiting::WaitLine::on_terminal();
    let telling = line.is_some();
    let mut show = |wait: Option<&_>| {
        if let Some(line) = line.as_mut() {
            line.show(wait);
        }
    };
    let sent = messages::send(
        store,
        &host,
        &from,
        &to,
        &body,
        args.wait.map(Duration::from_secs),
        telling.then_some(&mut show),
    );
    let sent = match sent {
        Ok(sent) => sent,
        Err(ControlError::Store(e)) => return not_stored(e, args.json),
        Err(e @ ControlError::PerhapsStored { .. }) => {
            if args.json {
                let said = serde_json::json!({"stored": null, "error": e.to_string()});
                println!("{}", agent_comms_core::display::json(&said)?);
            }
            eprintln!("agent-comms: {}", display::one_line(&e.to_string()));
            return Ok(UNKNOWN);
        }
        Err(e) => return Err(e.into()),
    };
    report_sent(store, sent, &args)
}

/// The message's text: from `--body-file` or as given.
fn body(file: Option<&std::path::Path>, text: Option<String>) -> anyhow::Result<String> {
    Ok(match (file, text) {
        (Some(path), _) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("cannot read the message from {}", path.display()))?;
            String::from_utf8(bytes).map_err(|e| {
                anyhow::anyhow!(
                    "{} is not UTF-8 text (at byte {}); send text",
                    path.display(),
                    e.utf8_error().valid_up_to()
                )
            })?
        }
        (None, Some(text)) => text,
        (None, None) => bail!("give the message as TEXT or --body-file FILE"),
    })
}

/// Says what became of a stored message; its exit status.
fn report_sent(store: &dyn Store, sent: messages::Sent, args: &SendArgs) -> anyhow::Result<i32> {
    let inv = sent.invocation;
    if args.json {
        // The message, and what is known of it: outcome_known is false
        // when --wait could not learn what became of it.
        let mut view = serde_json::to_value(InvocationView::new(&inv))?;
        view["stored"] = true.into();
        view["outcome_known"] = sent.unknown.is_none().into();
        println!("{}", agent_comms_core::display::json(&view)?);
    }
    if let Some(why) = &sent.unknown {
        eprintln!(
            "agent-comms: {}",
            outcome_unknown(&inv, sent.nudge.as_ref(), why)
        );
        return Ok(UNKNOWN);
    }
    let waited = args
        .wait
        .filter(|_| inv.status != InvocationStatus::Delivered);
    if let Some(secs) = waited {
        // The wait ran out or the attempt failed: say what was waited for,
        // where the message stands and what to do.
        let start = match sent.nudge {
            Some(_) => None,
            // The line is said even if the store stopped answering.
            None => start_command(store, &inv.to).ok(),
        };
        eprintln!(
            "agent-comms: {}",
            wait_ended(&inv, sent.nudge.as_ref(), start.as_deref(), secs)
        );
        return Ok(1);
    }
    if !args.json {
        println!(
            "{} to {}: {}",
            inv.id,
            inv.to,
            how_sent(&inv, sent.nudge.as_ref())
        );
    }
    Ok(0)
}

/// `send`'s exit status when the message was not stored.
const NOT_STORED: i32 = 3;
/// `send`'s exit status when it is stored (or may be) but what became of
/// it could not be learned.
const UNKNOWN: i32 = 4;

/// The store failed before the message was stored: one line saying so,
/// exit [`NOT_STORED`].
fn not_stored(e: agent_comms_core::store::StoreError, json: bool) -> anyhow::Result<i32> {
    // A damaged file is named, as every other command names it.
    let e = e.at(&agent_comms_core::control::store_path());
    let said = format!("not stored: {e}; nothing was stored: send it again once the store answers");
    if json {
        let view = serde_json::json!({"stored": false, "error": said});
        println!("{}", agent_comms_core::display::json(&view)?);
    }
    eprintln!(
        "{}",
        super::look::error(&format!("agent-comms: {}", display::one_line(&said)))
    );
    Ok(NOT_STORED)
}

/// The one line of a `send --wait` that could not learn what became of its
/// stored message: the id, what was waited for, why, and the next step.
fn outcome_unknown(inv: &Invocation, nudge: Option<&(String, Nudged)>, why: &str) -> String {
    let id = &inv.id;
    let waited = match nudge {
        Some((runtime, Nudged::ByItsHost(_))) => {
            format!("runtime {runtime}, on another host, delivers it")
        }
        Some((runtime, _)) => format!("runtime {runtime} delivers it"),
        None => format!("a runtime of {} delivers it", inv.to),
    };
    format!(
        "stored as {id}, outcome not known yet: the store did not answer at the end of the wait ({}); do not send it again: {waited} once the store is back; follow it with: agent-comms message show {id}",
        display::one_line(why)
    )
}

/// What became of a message just stored, for its one line.
fn how_sent(inv: &Invocation, nudge: Option<&(String, Nudged)>) -> String {
    let reason = || display::one_line(inv.reason.as_deref().unwrap_or("")).into_owned();
    match (nudge, inv.status) {
        (_, InvocationStatus::Delivered) => "delivered".to_owned(),
        (_, InvocationStatus::Unavailable) => format!("unavailable: {}", reason()),
        (Some((runtime, Nudged::Unreachable(why))), _) => format!(
            "queued; runtime {runtime} could not be reached ({}); the message waits in the store and is delivered when the runtime is back",
            display::one_line(why)
        ),
        (Some((runtime, Nudged::ByItsHost(_))), _) => format!(
            "queued; runtime {runtime} runs on another host, which delivers it from the shared store"
        ),
        (Some((runtime, _)), _) => format!("queued; runtime {runtime} was nudged"),
        (None, _) => format!(
            "queued; agent {} has no runtime online, it is delivered when one starts",
            inv.to
        ),
    }
}

/// The command that starts agent `to`'s runtime (the first one of this
/// host, as the kind it is), for a message nothing online can deliver.
fn start_command(store: &dyn Store, to: &str) -> anyhow::Result<String> {
    let host = host_id()?;
    let runtimes = store.runtimes()?;
    let mine = runtimes
        .iter()
        .filter(|r| r.agent == to)
        .find(|r| r.host.as_deref().is_none_or(|h| h == host));
    let (id, acp) = mine.map_or((to, false), |r| (r.id.as_str(), r.kind == ACP));
    Ok(if acp {
        format!("agent-comms --actor {to} runtime acp-serve {id} -- <ACP command>")
    } else {
        format!("agent-comms --actor {to} runtime interactive-serve {id} -- <provider command>")
    })
}

/// Why `send --wait SECS` ends without a delivery, where the message
/// stands, and the next step; `start` is how to start a runtime when none
/// is online.
fn wait_ended(
    inv: &Invocation,
    nudge: Option<&(String, Nudged)>,
    start: Option<&str>,
    secs: u64,
) -> String {
    let id = &inv.id;
    let what = match nudge {
        Some((runtime, Nudged::Woken(Some(_)))) => {
            format!("the delivery attempt by runtime {runtime} did not deliver {id}")
        }
        Some((runtime, Nudged::Woken(None) | Nudged::NoOutcome(_))) => {
            format!("waited {secs} s for runtime {runtime} to deliver {id}")
        }
        Some((runtime, Nudged::ByItsHost(Some(_)))) => {
            format!("the delivery attempt by runtime {runtime}, on another host, did not deliver {id}")
        }
        Some((runtime, Nudged::ByItsHost(None))) => {
            format!("waited {secs} s for runtime {runtime}, on another host, to deliver {id}")
        }
        Some((runtime, Nudged::Unreachable(why))) => format!(
            "did not wait: runtime {runtime} could not be reached ({})",
            display::one_line(why)
        ),
        None => format!(
            "did not wait: agent {} has no runtime online here, and nothing can deliver {id} until one starts; start one with: {}",
            inv.to,
            start.unwrap_or("agent-comms runtime list")
        ),
    };
    let reason = inv
        .reason
        .as_deref()
        .map(|r| format!(" ({})", display::one_line(r)))
        .unwrap_or_default();
    let next = match inv.status {
        InvocationStatus::Delivering => {
            "its runtime is still on it, typing it once the program is idle".to_owned()
        }
        InvocationStatus::Pending if inv.reason.is_none() => {
            "it is queued; its runtime announces it once the program is idle".to_owned()
        }
        InvocationStatus::Pending => "it stays queued and is tried again".to_owned(),
        InvocationStatus::Failed => {
            format!("it was given up; to try again: agent-comms message redeliver {id}")
        }
        _ => "it is not delivered from here".to_owned(),
    };
    format!(
        "{what}; it is {}{reason}: {next}; follow it with: agent-comms message show {id}; or take it back: agent-comms message cancel {id}",
        inv.status
    )
}

pub fn message(cmd: MessageCommand, actor: Option<Id>) -> anyhow::Result<i32> {
    let store = open_store()?;
    let store = store.as_ref();
    match cmd {
        MessageCommand::List {
            status,
            to,
            from,
            follow,
            json,
        } => {
            let status = status.map(|s| s.parse::<InvocationStatus>()).transpose()?;
            let to = to.as_deref().map(Id::agent).transpose()?;
            let from = from.as_deref().map(Id::agent).transpose()?;
            let filter = InvocationFilter {
                status,
                to: to.as_ref().map(Id::as_str),
                from: from.as_ref().map(Id::as_str),
            };
            if follow {
                follow::follow(&filter, json)?;
                return Ok(0);
            }
            let views = messages::list(store, &filter)?;
            if json {
                println!("{}", agent_comms_core::display::json(&views)?);
            } else if views.is_empty() {
                println!("no invocations");
            } else {
                println!(
                    "{:<17} {:<12} {:<12} {:<11} {:<13} DELIVERED",
                    "ID", "FROM", "TO", "STATUS", "CREATED"
                );
                let colour = look::colour(false);
                for v in &views {
                    println!(
                        "{:<17} {:<12} {:<12} {} {:<13} {}",
                        display::one_line(&v.id),
                        display::one_line(&v.from),
                        display::one_line(&v.to),
                        look::state(&format!("{:<11}", v.status), colour),
                        look::ago_iso(&v.created),
                        v.delivered.as_deref().map_or("-".into(), look::ago_iso)
                    );
                }
            }
        }
        MessageCommand::Show { ids, json, raw } => show(store, &ids, json, raw)?,
        MessageCommand::Redeliver { id, json } => {
            let inv = messages::redeliver(store, &host_id()?, &Id::message(id.id()?)?)?;
            if json {
                println!(
                    "{}",
                    agent_comms_core::display::json(&InvocationView::new(&inv))?
                );
            } else {
                let to = display::one_line(&inv.to);
                println!("{} queued for delivery to {to} again", inv.id);
            }
        }
        MessageCommand::Cancel { id, json } => {
            let inv = messages::cancel(store, &Id::message(id.id()?)?, actor.as_ref())?;
            if json {
                println!(
                    "{}",
                    agent_comms_core::display::json(&InvocationView::new(&inv))?
                );
            } else {
                let reason = display::one_line(inv.reason.as_deref().unwrap_or_default());
                println!(
                    "{} to {}: FAILED, {reason}",
                    inv.id,
                    display::one_line(&inv.to)
                );
            }
        }
    }
    Ok(0)
}

/// `message show ID...`: every message in the order given.
fn show(store: &dyn Store, ids: &[String], json: bool, raw: bool) -> anyhow::Result<()> {
    if raw && ids.len() > 1 {
        bail!("--raw prints one body exactly as sent; give one id (or drop --raw)");
    }
    // Every id is checked before anything is printed: a typo in the third
    // is said before the first two scroll by.
    let ids = ids
        .iter()
        .map(|id| Id::message(id))
        .collect::<Result<Vec<_>, _>>()?;
    let views = ids
        .iter()
        .map(|id| messages::show(store, id))
        .collect::<Result<Vec<_>, _>>()?;
    for (n, view) in views.iter().enumerate() {
        if json {
            println!("{}", agent_comms_core::display::json(view)?);
        } else if raw {
            let body = view.body.as_deref().unwrap_or_default();
            std::io::stdout().write_all(body.as_bytes())?;
        } else {
            if n > 0 {
                println!();
            }
            print_full(view);
        }
    }
    Ok(())
}

/// Every field from the store escaped; the body keeps its line breaks.
fn print_full(v: &InvocationView) {
    let line = display::one_line;
    println!("id:        {}", line(&v.id));
    println!("from:      {}", line(&v.from));
    println!("to:        {}", line(&v.to));
    println!(
        "status:    {}",
        look::state(&v.status.to_string(), look::colour(false))
    );
    println!("created:   {} ({})", v.created, look::ago_iso(&v.created));
    if let Some(d) = &v.delivered {
        println!("delivered: {d} ({})", look::ago_iso(d));
    }
    if let Some(r) = &v.reason {
        println!("reason:    {}", line(r));
    }
    for a in v.delivery_attempts.iter().flatten() {
        let what = match &a.evidence {
            Some(e) if e.style == "prompt" => format!(
                "prompt sent {}, first update {}, turn ended {} ({})",
                e.entered,
                e.echoed,
                e.submitted,
                line(e.stop_reason.as_deref().unwrap_or("no stop reason"))
            ),
            Some(e) => format!(
                "echoed {}, entered {}, submitted {} ({} Enter, {})",
                e.echoed,
                e.entered,
                e.submitted,
                e.enter_presses,
                line(&e.style)
            ),
            None => line(a.reason.as_deref().unwrap_or_default()).into_owned(),
        };
        println!(
            "attempt {} via {} at {}: {} {what}",
            a.id,
            line(&a.runtime),
            a.started,
            a.outcome
        );
    }
    println!();
    println!("{}", display::block(v.body.as_deref().unwrap_or("")));
}
