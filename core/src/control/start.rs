//! What a serve starts: the command, where, and on which conversation
//! (the provider's own session or thread; a *session* is our supervised PTY).
//!
//! Three ways to know the conversation before the provider runs: a takeover
//! discovers the one the old process is on; the command names one; or the
//! command asks to continue and the runtime has a bound conversation, which is
//! pinned in place of "the most recent one". A known conversation then passes
//! the collision guard. An unknown one is discovered after start, from the
//! new process, and bound to the runtime for next time.

use std::path::PathBuf;

use super::ControlError;
use crate::adapter::Entry;
use crate::store::RuntimeRecord;
use crate::takeover::{self, ConversationDiscovery, ProviderEnv};

/// `--takeover-pid` and what goes with it.
#[derive(Debug, Clone)]
pub struct TakeoverOptions {
    pub pid: u32,
    /// The user says which conversation, when discovery cannot.
    pub conversation: Option<String>,
    /// Skip the "is it the provider" check.
    pub force: bool,
}

/// The provider start, decided before anything is touched.
#[derive(Debug, Clone)]
pub struct StartPlan {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The conversation, when known before start.
    pub conversation: Option<String>,
    /// The process to end first (a takeover).
    pub replaces: Option<u32>,
    /// Said to the user before the provider starts.
    pub notes: Vec<String>,
}

pub struct StartRequest<'a> {
    pub argv: &'a [String],
    pub cwd: PathBuf,
    pub adapter: Option<&'a Entry>,
    pub discovery: Option<&'a dyn ConversationDiscovery>,
    pub takeover: Option<&'a TakeoverOptions>,
    pub allow_shared: bool,
    /// The runtime as stored (its bound conversation).
    pub runtime: &'a RuntimeRecord,
}

pub fn plan_start(req: &StartRequest<'_>) -> Result<StartPlan, ControlError> {
    let mut plan = StartPlan {
        argv: req.argv.to_vec(),
        cwd: req.cwd.clone(),
        conversation: None,
        replaces: None,
        notes: Vec::new(),
    };
    let Some(entry) = req.adapter else {
        if req.takeover.is_some() {
            return Err(takeover::TakeoverError::NoDiscovery("(no)".into()).into());
        }
        return Ok(plan);
    };
    let profile = &entry.profile;
    if let Some(t) = req.takeover {
        let found = takeover::plan(&takeover::Request {
            pid: t.pid,
            argv: req.argv,
            profile,
            discovery: req.discovery,
            force: t.force,
            conversation: t.conversation.as_deref(),
        })?;
        plan.notes.push(format!(
            "taking over process {} on {} conversation {} in {}",
            t.pid,
            profile.name,
            found.conversation.id,
            found.cwd.display()
        ));
        plan.argv = found.argv;
        plan.cwd = found.cwd;
        plan.conversation = Some(found.conversation.id);
        plan.replaces = Some(t.pid);
    } else if let Some(named) = profile.named_conversation(req.argv) {
        plan.conversation = Some(named);
    } else if let Some(bound) = req.runtime.conversation_id.as_deref() {
        if let Some(pinned) = profile.pin_resume(req.argv, bound) {
            plan.notes.push(format!(
                "continuing conversation {bound}, the one bound to runtime {} (not the most recent one)",
                req.runtime.id
            ));
            plan.argv = pinned;
            plan.conversation = Some(bound.to_owned());
        }
    }
    if let (Some(id), Some(discovery)) = (&plan.conversation, req.discovery) {
        let env = ProviderEnv::current();
        let takeover_command = |pid: u32| {
            format!(
                "agent-comms --actor {} runtime interactive-serve {} --takeover-pid {pid} -- {}",
                req.runtime.agent,
                req.runtime.id,
                req.argv.join(" ")
            )
        };
        if let Some(note) = takeover::guard(
            profile,
            discovery,
            id,
            &env,
            req.allow_shared,
            plan.replaces,
            takeover_command,
        )? {
            plan.notes.push(note);
        }
    }
    Ok(plan)
}
