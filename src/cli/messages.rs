//! `agent-comms send` and `agent-comms message …` (alias `invocation`):
//! messages between agents.

use std::path::PathBuf;
use std::time::Duration;

use agent_comms_core::control::messages::{self, InvocationView};
use agent_comms_core::control::{host::host_id, open_store, ControlError};
use agent_comms_core::store::{InvocationFilter, InvocationStatus, Store};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};

#[derive(Args)]
pub struct SendArgs {
    /// The recipient agent (it must have a runtime).
    #[arg(long)]
    to: String,
    /// Read the message from FILE instead of TEXT.
    #[arg(long, value_name = "FILE", conflicts_with = "text")]
    body_file: Option<PathBuf>,
    /// Wait until the notification was delivered (or the attempt failed),
    /// at most this many seconds.
    #[arg(long, value_name = "SECONDS")]
    wait: Option<u64>,
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
    List {
        /// PENDING, DELIVERING, DELIVERED, UNAVAILABLE or FAILED.
        #[arg(long)]
        status: Option<String>,
        /// Only messages to this agent.
        #[arg(long)]
        to: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show a message with its body and every delivery attempt.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Queue a message for delivery again and nudge its runtime.
    Redeliver {
        #[arg(long)]
        id: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn send(args: SendArgs, actor: Option<String>) -> anyhow::Result<i32> {
    let from = actor.ok_or(ControlError::NoActor {
        what: "send a message".into(),
    })?;
    let body = match (&args.body_file, args.text) {
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
    };
    let store = open_store()?;
    let sent = messages::send(
        &store,
        &host_id()?,
        &from,
        &args.to,
        &body,
        args.wait.map(Duration::from_secs),
    )?;
    let inv = store
        .invocation(&sent.invocation.id)?
        .unwrap_or(sent.invocation);
    let view = InvocationView::new(&inv);
    if args.json {
        println!("{}", serde_json::to_string(&view)?);
    } else {
        let how = match (&sent.nudged, inv.status) {
            (_, InvocationStatus::Delivered) => "delivered".to_owned(),
            (_, InvocationStatus::Unavailable) => {
                format!("unavailable: {}", inv.reason.as_deref().unwrap_or(""))
            }
            (Some(runtime), _) => format!("queued; runtime {runtime} was nudged"),
            (None, _) => format!(
                "queued; agent {} has no runtime online, it is delivered when one starts",
                inv.to
            ),
        };
        println!("{} to {}: {how}", inv.id, inv.to);
    }
    let failed = args.wait.is_some() && inv.status != InvocationStatus::Delivered;
    Ok(if failed { 1 } else { 0 })
}

pub fn message(cmd: MessageCommand) -> anyhow::Result<i32> {
    let store = open_store()?;
    match cmd {
        MessageCommand::List { status, to, json } => {
            let status = status.map(|s| s.parse::<InvocationStatus>()).transpose()?;
            let views = messages::list(
                &store,
                &InvocationFilter {
                    status,
                    to: to.as_deref(),
                },
            )?;
            if json {
                println!("{}", serde_json::to_string(&views)?);
            } else if views.is_empty() {
                println!("no invocations");
            } else {
                println!(
                    "{:<17} {:<12} {:<12} {:<11} {:<24} DELIVERED",
                    "ID", "FROM", "TO", "STATUS", "CREATED"
                );
                for v in &views {
                    println!(
                        "{:<17} {:<12} {:<12} {:<11} {:<24} {}",
                        v.id,
                        v.from,
                        v.to,
                        v.status.to_string(),
                        v.created,
                        v.delivered.as_deref().unwrap_or("-")
                    );
                }
            }
        }
        MessageCommand::Show { id, json } => {
            let view = messages::show(&store, &id)?;
            if json {
                println!("{}", serde_json::to_string(&view)?);
            } else {
                print_full(&view);
            }
        }
        MessageCommand::Redeliver { id, json } => {
            let inv = messages::redeliver(&store, &host_id()?, &id)?;
            if json {
                println!("{}", serde_json::to_string(&InvocationView::new(&inv))?);
            } else {
                println!("{} queued for delivery to {} again", inv.id, inv.to);
            }
        }
    }
    Ok(0)
}

fn print_full(v: &InvocationView) {
    println!("id:        {}", v.id);
    println!("from:      {}", v.from);
    println!("to:        {}", v.to);
    println!("status:    {}", v.status);
    println!("created:   {}", v.created);
    if let Some(d) = &v.delivered {
        println!("delivered: {d}");
    }
    if let Some(r) = &v.reason {
        println!("reason:    {r}");
    }
    for a in v.delivery_attempts.iter().flatten() {
        let what = match &a.evidence {
            Some(e) => format!(
                "echoed {}, entered {}, submitted {} ({} Enter, {})",
                e.echoed, e.entered, e.submitted, e.enter_presses, e.style
            ),
            None => a.reason.clone().unwrap_or_default(),
        };
        println!(
            "attempt {} via {} at {}: {} {what}",
            a.id, a.runtime, a.started, a.outcome
        );
    }
    println!();
    println!("{}", v.body.as_deref().unwrap_or(""));
}
