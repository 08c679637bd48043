//! TOML profiles: the declarative form of an adapter (schema 1).
//!
//! A profile says everything a host needs to supervise one program: which
//! commands it claims, busy/idle rules over regions of the rendered screen,
//! the window title and OSC sequences, how to type into it, which
//! environment to give it, how to pin a resume to a conversation id, which
//! arguments grant agent-comms itself permission, how it runs headless over
//! the Agent Client Protocol, and — for REPLs — how to set up shell
//! integration. `docs/adapters.md` is the reference. Errors name
//! the file, the line and column, and the field.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::Activity;

/// The schema this build reads.
pub const SCHEMA: u32 = 1;
/// The most programs one profile may claim.
pub const MAX_COMMANDS: usize = 64;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ProfileError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub schema: u32,
    pub name: String,
    /// The adapter's own version.
    pub version: String,
    pub kind: Kind,
    /// Program basenames claimed; a trailing `*` matches any rest.
    pub commands: Vec<String>,
    /// Provider versions this profile was checked against.
    #[serde(default)]
    pub checked: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// A native (`.so`) or Wasm (`.wasm`) plugin for the hooks a profile
    /// cannot express; relative to the profile's directory.
    #[serde(default)]
    pub plugin: Option<PathBuf>,
    /// Files the plugin may read (for conversation discovery), `~` allowed.
    #[serde(default)]
    pub plugin_reads: Vec<String>,
    #[serde(default)]
    pub detect: Option<Detect>,
    #[serde(default)]
    pub input: Input,
    #[serde(default)]
    pub env: EnvChanges,
    #[serde(default)]
    pub resume: Option<Resume>,
    #[serde(default)]
    pub permissions: Option<Permissions>,
    /// `[conversation]`; `[session]`, its old name, is still read.
    #[serde(default, alias = "session")]
    pub conversation: Option<ConversationSpec>,
    #[serde(default)]
    pub repl: Option<Repl>,
    #[serde(default)]
    pub acp: Option<AcpSpec>,
    #[serde(default)]
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Agent,
    Repl,
}

/// Busy/idle detection.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Detect {
    /// Idle is reported only after this long without a busy signal.
    #[serde(default = "default_debounce")]
    pub debounce_ms: u64,
    /// After a submission, how long the program may draw nothing busy yet
    /// (opencode: up to 0.85 s in the recordings): until it shows busy, or
    /// this long, the next delivery waits instead of taking the screen for
    /// idle. 0: it shows busy at once.
    #[serde(default)]
    pub shows_busy_within_ms: u64,
    pub rules: Vec<Rule>,
}

fn default_debounce() -> u64 {
    300
}

/// One signal: when its pattern matches, the program is in `state`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub state: RuleState,
    /// Regex over each row of `region`.
    #[serde(default)]
    pub screen: Option<Spanned<String>>,
    #[serde(default)]
    pub region: Option<Region>,
    /// Regex over the window title.
    #[serde(default)]
    pub title: Option<Spanned<String>>,
    /// Regex over the most recent OSC payload it could apply to: the last
    /// one that starts with `osc_prefix` (e.g. `7501;`).
    #[serde(default)]
    pub osc: Option<Spanned<String>>,
    #[serde(default)]
    pub osc_prefix: Option<String>,
    /// Regex over the command name of the terminal's foreground process
    /// (e.g. busy while a shell runs anything but itself).
    #[serde(default)]
    pub process: Option<Spanned<String>>,
    /// The rule applies when its pattern does *not* match.
    #[serde(default)]
    pub invert: bool,
    /// The program's own exact word on its state (Codex's OSC 7501
    /// `state=done`), not a reading of what it draws: idle by such a rule,
    /// with no other rule saying busy, is taken at once instead of after
    /// the debounce. Only idle rules can be (busy is immediate anyway).
    #[serde(default)]
    pub authoritative: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleState {
    Busy,
    Idle,
}

impl From<RuleState> for Activity {
    fn from(s: RuleState) -> Self {
        match s {
            RuleState::Busy => Activity::Busy,
            RuleState::Idle => Activity::Idle,
        }
    }
}

/// Rows a screen rule may match in, relative to an anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    pub from: Anchor,
    /// Rows away from the anchor: toward the bottom for `top` and `cursor`
    /// (negative goes up), toward the top for `bottom`.
    #[serde(default)]
    pub offset: i32,
    #[serde(default = "one")]
    pub rows: u16,
}

/// A regex error in one line (the crate's own spans several); the policy's
/// title patterns use it too.
pub(crate) fn regex_problem(e: &regex::Error) -> String {
    let last = e.to_string().lines().last().unwrap_or("").trim().to_owned();
    format!("invalid regex: {last}")
}

fn one() -> u16 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Anchor {
    Top,
    /// The last row that holds any text (inline TUIs draw above the cursor,
    /// not at the screen's bottom).
    Bottom,
    /// The cursor's row: the input line.
    Cursor,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    #[serde(default = "default_style")]
    pub style: InputStyle,
    /// What Enter is.
    #[serde(default = "default_enter")]
    pub enter: String,
    /// Pause between the text's echo and Enter (some TUIs treat an Enter in
    /// the same burst as part of a paste).
    #[serde(default = "default_enter_delay")]
    pub enter_delay_ms: u64,
    /// The pause when the text was typed rather than pasted (the style is
    /// `typed`, or the program has not turned bracketed paste on): a TUI
    /// that guesses pastes from key timing may need longer. Absent, the
    /// same as `enter_delay_ms`.
    #[serde(default)]
    pub typed_enter_delay_ms: Option<u64>,
    /// Where the input line is and how to read what it holds. Without it,
    /// the cursor's row is the input line.
    #[serde(default)]
    pub line: Option<InputLine>,
    /// How a delivery that failed after typing removes what it typed.
    #[serde(default)]
    pub clear: Clear,
    /// A regex for the input line holding a paste the program shows
    /// collapsed instead of as text (opencode: `[Pasted ~1 lines]` for over
    /// 150 characters): after a paste, that line is its echo.
    #[serde(default)]
    pub collapsed_paste: Option<Spanned<String>>,
}

impl Default for Input {
    fn default() -> Self {
        Self {
            style: default_style(),
            enter: default_enter(),
            enter_delay_ms: default_enter_delay(),
            typed_enter_delay_ms: None,
            line: None,
            clear: Clear::default(),
            collapsed_paste: None,
        }
    }
}

/// The input line: the last row of `region` that `pattern` matches. Its
/// capture group `text` (or its first group) is what the line holds, read
/// with dim text blanked out, so a placeholder counts as empty.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputLine {
    pub region: Region,
    pub pattern: Spanned<String>,
    /// Rows right below the input line that carry on its text when it
    /// wraps (their capture group is the text); none when absent.
    #[serde(default)]
    pub continuation: Option<Spanned<String>>,
}

impl Input {
    /// The pause before Enter for text pasted (`pasted`) or typed.
    pub fn enter_delay(&self, pasted: bool) -> Duration {
        let ms = match self.typed_enter_delay_ms {
            Some(typed) if !pasted => typed,
            _ => self.enter_delay_ms,
        };
        Duration::from_millis(ms)
    }
}

fn default_style() -> InputStyle {
    InputStyle::Paste
}
fn default_enter() -> String {
    "\r".into()
}
fn default_enter_delay() -> u64 {
    100
}

/// How to remove typed text from the input line (`[input] clear`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clear {
    /// One Backspace (DEL) per character typed, and one per Enter pressed
    /// (an Enter a composer took for a newline): what nearly every line
    /// editor understands.
    #[default]
    Backspaces,
    /// Ctrl-U: the line editor's "kill the line" (readline, most TUIs).
    CtrlU,
    /// The program offers no way: a failure says what was left.
    None,
}

impl Clear {
    /// The keys that remove `chars` typed characters and `enters` Enters.
    pub fn keys(self, chars: usize, enters: usize) -> Vec<u8> {
        match self {
            Self::Backspaces => vec![0x7f; chars + enters],
            Self::CtrlU => vec![0x15],
            Self::None => Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputStyle {
    /// Bracketed paste (`ESC[200~ … ESC[201~`).
    Paste,
    /// Typed as is.
    Typed,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvChanges {
    /// Inherited variables the program must not see.
    #[serde(default)]
    pub remove: Vec<String>,
    #[serde(default)]
    pub set: BTreeMap<String, String>,
}

impl EnvChanges {
    /// The variables to set, as a command's environment takes them.
    pub fn pairs(&self) -> Vec<(String, String)> {
        pairs(&self.set)
    }
}

fn pairs(vars: &BTreeMap<String, String>) -> Vec<(String, String)> {
    vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Resume pinning: "continue the latest conversation" becomes "resume this id".
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resume {
    /// Arguments that mean "continue the most recent conversation".
    pub continue_args: Vec<String>,
    /// What replaces the first of them; `{id}` is the conversation id.
    pub pinned: Vec<String>,
    /// Arguments whose value names a conversation (nothing to rewrite then); a
    /// value that starts with `-` is not a conversation (`resume --last`).
    #[serde(default)]
    pub explicit_args: Vec<String>,
    /// What to add when the command neither continues nor names a conversation
    /// but must resume one (a takeover); `{id}` is the conversation id.
    #[serde(default)]
    pub start: Vec<String>,
}

/// The provider's conversations (its own sessions or threads): how to tell
/// a process of this provider, how to find the conversation it is on, and
/// whether two processes on one conversation harm it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationSpec {
    /// The built-in conversation discovery (code in agent-comms-adapters) that
    /// ties a pid to its conversation: `claude-code`, `codex` or `opencode`.
    #[serde(default)]
    pub discovery: Option<String>,
    /// Strings in a process's first arguments that identify the provider
    /// when it runs under an interpreter (a package path).
    #[serde(default)]
    pub markers: Vec<String>,
    /// Whether a second process may run on a conversation one already holds.
    #[serde(default = "default_sharing")]
    pub shared: Sharing,
    /// Why, for messages.
    #[serde(default)]
    pub shared_reason: String,
}

fn default_sharing() -> Sharing {
    Sharing::Refuse
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sharing {
    /// Two processes on one conversation diverge: refuse the second.
    Refuse,
    /// Both are live clients of one conversation: allow, and say so.
    Allow,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Arguments that let the program run agent-comms; `{exe}` is the
    /// resolved agent-comms path.
    pub args: Vec<String>,
}

/// `[acp]`: how the provider runs headless over the Agent Client Protocol
/// (`runtime acp-serve`). The same program behaves differently over ACP
/// than in its terminal, so the facts that change how a client must drive
/// it are declared here rather than guessed from the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcpSpec {
    /// The command that speaks ACP on its stdio (argv; argv[0] looked up on
    /// PATH), e.g. `["opencode", "acp"]`.
    pub command: Vec<String>,
    /// The agent's version this profile was checked against (like the
    /// profile's `checked`), e.g. `"0.101.0"`.
    #[serde(default)]
    pub checked: Option<String>,
    /// Arguments that make the command print its version (e.g.
    /// `["--version"]`); empty: not checkable.
    #[serde(default)]
    pub version_args: Vec<String>,
    /// Environment changes for the ACP command (same type and semantics as
    /// the profile's `[env]`).
    #[serde(default)]
    pub env: EnvChanges,
    /// Set only when agent-comms runs as root (some agents refuse or change
    /// modes for root unless told they are sandboxed).
    #[serde(default)]
    pub env_as_root: BTreeMap<String, String>,
    #[serde(default)]
    pub quirks: AcpQuirks,
}

/// Where an agent departs from what the protocol leads a client to expect.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcpQuirks {
    /// session/load replays the conversation before it answers.
    #[serde(default)]
    pub load_replays: bool,
    /// A prompt's response is held back while a later prompt runs (so a
    /// response is not a turn's end when prompts overlap).
    #[serde(default)]
    pub holds_back_responses: bool,
    /// A prompt sent during a turn ends the running turn.
    #[serde(default)]
    pub prompt_ends_turn: bool,
    /// Sends fs/write_text_file even when the client declared no fs
    /// capability.
    #[serde(default)]
    pub writes_undeclared: bool,
}

impl AcpSpec {
    /// The variables to set for the agent: `[acp.env] set`, and
    /// `env_as_root` too when agent-comms runs as root.
    pub fn env_set(&self, as_root: bool) -> Vec<(String, String)> {
        let mut vars = self.env.pairs();
        if as_root {
            vars.extend(pairs(&self.env_as_root));
        }
        vars
    }

    /// Whether `argv` runs this ACP command: the same program (by
    /// [`program_name`](super::command::program_name), so
    /// `/opt/bin/codex-acp` is `codex-acp`) and the same leading
    /// arguments (`opencode acp …` is ACP, `opencode run …` is not).
    pub fn runs(&self, argv: &[String]) -> bool {
        use super::command::program_name;
        match (self.command.split_first(), argv.split_first()) {
            (Some((program, args)), Some((run, run_args))) => {
                program_name(program) == program_name(run) && run_args.starts_with(args)
            }
            _ => false,
        }
    }
}

/// Shell integration for a REPL (see core::cells).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repl {
    /// Typed once at start. `{token}` is the session's secret;
    /// `{script_b64}` is `setup_script` in base64; `{setup_file}` a private
    /// file holding `setup_script`.
    pub setup: String,
    #[serde(default)]
    pub setup_script: Option<String>,
    /// Typed to run a cell from a file; `{file}` is its path.
    pub run_file: String,
    pub file_suffix: String,
    /// Line modes (repeat, hook: no integration marks): multi-line code is
    /// written to a private `file_suffix` file and this is typed to run it
    /// (`{file}` is its path). Without it, code is typed line by line.
    #[serde(default)]
    pub line_mode_run_file: Option<String>,
    /// Written at the top of every cell file.
    #[serde(default)]
    pub file_prologue: String,
    /// One-line code without control characters may be typed as is.
    #[serde(default)]
    pub type_simple_lines: bool,
    /// The end mark carries the real status of the cell.
    #[serde(default)]
    pub exit_status: bool,
    /// The start mark is followed by a newline that is not output.
    #[serde(default)]
    pub newline_after_start: bool,
    /// Type the set-up only once the REPL printed this text.
    #[serde(default)]
    pub setup_after: Option<String>,
    /// Typed after an interrupt, once the REPL looks settled: a no-op that
    /// prints `ESC]133;B;{barrier}BEL`. When that mark comes back, whatever
    /// the Ctrl-C did is over, and the next cell is typed. Without one,
    /// the next cell waits for quiet.
    #[serde(default)]
    pub interrupt_barrier: Option<String>,
}

/// A recorded screen and the classification it must get (`adapters check`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    pub name: String,
    /// The screen's rows, as text.
    pub screen: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub osc: Vec<String>,
    /// Defaults to the last row holding text.
    #[serde(default)]
    pub cursor_row: Option<u16>,
    /// The foreground process's command name.
    #[serde(default)]
    pub foreground: String,
    pub expect: Activity,
}

impl Profile {
    /// Parses and validates a profile; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ProfileError> {
        let profile: Self = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map_or((1, 1), |s| line_col(text, s.start));
            ProfileError {
                file: file.to_owned(),
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })?;
        profile.validate(file, text)?;
        Ok(profile)
    }

    fn validate(&self, file: &str, text: &str) -> Result<(), ProfileError> {
        let source = Source { file, text };
        if self.schema != SCHEMA {
            return Err(source.error(
                text.find("schema").unwrap_or(0),
                format!(
                    "schema {} is not supported (this agent-comms reads schema {SCHEMA})",
                    self.schema
                ),
            ));
        }
        if self.commands.is_empty() && self.plugin.is_none() {
            return Err(source.error(
                text.find("commands").unwrap_or(0),
                "commands: list at least one program this profile claims".into(),
            ));
        }
        if self.commands.len() > MAX_COMMANDS {
            // Every command looks its adapter up through every claim: a
            // bound keeps that lookup fast.
            return Err(source.error(
                text.find("commands").unwrap_or(0),
                format!(
                    "commands: {} programs, over the limit of {MAX_COMMANDS} a profile may claim",
                    self.commands.len()
                ),
            ));
        }
        if let Some(detect) = &self.detect {
            validate_rules(&detect.rules, &source)?;
        }
        if let Some(line) = &self.input.line {
            validate_input_line(line, &source)?;
        }
        if let Some(pattern) = &self.input.collapsed_paste {
            if let Err(e) = regex::Regex::new(pattern.get_ref()) {
                return Err(source.error(
                    pattern.span().start,
                    format!("input.collapsed_paste: {}", regex_problem(&e)),
                ));
            }
        }
        if let Some(acp) = &self.acp {
            if acp.command.first().is_none_or(|p| p.is_empty()) {
                let section = text.find("[acp]").unwrap_or(0);
                let field = text[section..]
                    .find("command")
                    .map_or(section, |at| section + at);
                return Err(source.error(
                    field,
                    "acp.command: give the program that speaks ACP on its stdio, e.g. [\"my-agent\", \"acp\"]".into(),
                ));
            }
        }
        if self.kind == Kind::Repl && self.repl.is_none() {
            return Err(source.error(0, "kind = \"repl\" needs a [repl] section".into()));
        }
        Ok(())
    }

    /// Whether this profile claims `program` (a basename).
    pub fn claims(&self, program: &str) -> bool {
        self.commands.iter().any(|c| match c.strip_suffix('*') {
            Some(prefix) => program.starts_with(prefix),
            None => program == c,
        })
    }

    /// `argv` with "continue the latest" replaced by the pinned `id`, or
    /// `None` when nothing asks to continue or an id is already given.
    pub fn pin_resume(&self, argv: &[String], id: &str) -> Option<Vec<String>> {
        let resume = self.resume.as_ref()?;
        if self.named_conversation(argv).is_some() {
            return None;
        }
        let at = argv.iter().position(|a| resume.continue_args.contains(a))?;
        let mut out = argv[..at].to_vec();
        out.extend(resume.pinned.iter().map(|p| p.replace("{id}", id)));
        out.extend_from_slice(&argv[at + 1..]);
        Some(out)
    }

    /// `argv` resuming conversation `id` whatever it asked: "continue" pinned
    /// to `id`, a named conversation kept, and otherwise the resume added.
    pub fn resume_conversation(&self, argv: &[String], id: &str) -> Vec<String> {
        if let Some(pinned) = self.pin_resume(argv, id) {
            return pinned;
        }
        let mut out = argv.to_vec();
        if self.named_conversation(argv).is_none() {
            if let Some(resume) = &self.resume {
                out.extend(resume.start.iter().map(|p| p.replace("{id}", id)));
            }
        }
        out
    }

    /// Whether `argv` asks to continue the most recent conversation.
    pub fn asks_to_continue(&self, argv: &[String]) -> bool {
        self.resume
            .as_ref()
            .is_some_and(|r| argv.iter().any(|a| r.continue_args.contains(a)))
            && self.named_conversation(argv).is_none()
    }

    /// The conversation `argv` names (`--resume ID`, `--session=ID`,
    /// `resume ID`: the provider's own flags).
    pub fn named_conversation(&self, argv: &[String]) -> Option<String> {
        let resume = self.resume.as_ref()?;
        argv.iter().enumerate().find_map(|(i, a)| {
            resume.explicit_args.iter().find_map(|e| {
                if let Some(v) = a.strip_prefix(&format!("{e}=")) {
                    return Some(v.to_owned());
                }
                let v = argv.get(i + 1).filter(|_| a == e)?;
                (!v.starts_with('-')).then(|| v.clone())
            })
        })
    }
}

/// A profile's text, for errors that point into it.
struct Source<'a> {
    file: &'a str,
    text: &'a str,
}

impl Source<'_> {
    fn error(&self, offset: usize, message: String) -> ProfileError {
        let (line, column) = line_col(self.text, offset);
        ProfileError {
            file: self.file.to_owned(),
            line,
            column,
            message,
        }
    }
}

/// Every detection rule compiles and reads at least one signal.
fn validate_rules(rules: &[Rule], source: &Source<'_>) -> Result<(), ProfileError> {
    for (i, rule) in rules.iter().enumerate() {
        let patterns = [
            ("screen", &rule.screen),
            ("title", &rule.title),
            ("osc", &rule.osc),
            ("process", &rule.process),
        ];
        for (field, pattern) in patterns {
            if let Some(p) = pattern {
                if let Err(e) = regex::Regex::new(p.get_ref()) {
                    return Err(source.error(
                        p.span().start,
                        format!("detect.rules[{i}].{field}: {}", regex_problem(&e)),
                    ));
                }
            }
        }
        if patterns.iter().all(|(_, p)| p.is_none()) {
            return Err(source.error(
                source.text.find("[[detect.rules]]").unwrap_or(0),
                format!("detect.rules[{i}]: give one of screen, title, osc or process"),
            ));
        }
        if rule.authoritative && rule.state == RuleState::Busy {
            return Err(source.error(
                source.text.find("authoritative").unwrap_or(0),
                format!(
                    "detect.rules[{i}].authoritative: only an idle rule can be authoritative (busy is taken at once anyway); remove it or make the rule's state \"idle\""
                ),
            ));
        }
    }
    Ok(())
}

/// The input-line patterns compile and capture what the line holds.
fn validate_input_line(line: &InputLine, source: &Source<'_>) -> Result<(), ProfileError> {
    for (field, pattern) in [
        ("pattern", Some(&line.pattern)),
        ("continuation", line.continuation.as_ref()),
    ] {
        let Some(pattern) = pattern else { continue };
        match regex::Regex::new(pattern.get_ref()) {
            Err(e) => {
                return Err(source.error(
                    pattern.span().start,
                    format!("input.line.{field}: {}", regex_problem(&e)),
                ));
            }
            Ok(re) if re.captures_len() < 2 => {
                return Err(source.error(
                    pattern.span().start,
                    format!(
                        "input.line.{field}: capture what the line holds, e.g. '^> (?P<text>.*)'"
                    ),
                ));
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// The 1-based line and column (in characters) of byte `offset` in `text`:
/// where an error in a TOML file points (the policy's errors use it too).
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str =
        "schema = 1\nname = \"x\"\nversion = \"0.1.0\"\nkind = \"agent\"\ncommands = [\"x\"]\n";

    #[test]
    fn typed_text_waits_its_own_enter_delay_when_the_profile_sets_one() {
        let parse = |input: &str| {
            Profile::parse("p.toml", &format!("{MINIMAL}[input]\n{input}"))
                .unwrap()
                .input
        };
        let both = parse("enter_delay_ms = 10\ntyped_enter_delay_ms = 150\n");
        assert_eq!(both.enter_delay(true), Duration::from_millis(10));
        assert_eq!(both.enter_delay(false), Duration::from_millis(150));
        let one = parse("enter_delay_ms = 40\n");
        assert_eq!(one.enter_delay(false), Duration::from_millis(40));
    }

    #[test]
    fn errors_name_file_line_column_and_field() {
        let e = Profile::parse("p.toml", &format!("{MINIMAL}nmae = 1\n")).unwrap_err();
        assert_eq!((e.file.as_str(), e.line, e.column), ("p.toml", 6, 1));
        assert!(e.message.contains("unknown field `nmae`"), "{e}");

        let bad_regex = format!(
            "{MINIMAL}[detect]\n[[detect.rules]]\nstate = \"busy\"\nscreen = \"(unclosed\"\n"
        );
        let e = Profile::parse("p.toml", &bad_regex).unwrap_err();
        assert_eq!((e.line, e.column), (9, 10), "{e}");
        assert!(
            e.message
                .starts_with("detect.rules[0].screen: invalid regex"),
            "{e}"
        );

        let e = Profile::parse("p.toml", "schema = 1\nname = [").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn the_acp_section_is_read_with_its_quirks() {
        let text = format!(
            "{MINIMAL}[acp]\ncommand = [\"x\", \"acp\"]\nchecked = \"1.2\"\nversion_args = [\"--version\"]\nenv_as_root = {{ IS_SANDBOX = \"1\" }}\n[acp.env]\nset = {{ A = \"b\" }}\n[acp.quirks]\nload_replays = true\n"
        );
        let acp = Profile::parse("p.toml", &text).unwrap().acp.unwrap();
        assert_eq!(acp.command, ["x", "acp"]);
        assert_eq!(acp.checked.as_deref(), Some("1.2"));
        assert_eq!(acp.env.set.get("A").map(String::as_str), Some("b"));
        assert_eq!(
            acp.env_as_root.get("IS_SANDBOX").map(String::as_str),
            Some("1")
        );
        assert_eq!(
            acp.quirks,
            AcpQuirks {
                load_replays: true,
                ..AcpQuirks::default()
            }
        );
        assert!(Profile::parse("p.toml", MINIMAL).unwrap().acp.is_none());
    }

    #[test]
    fn a_bad_acp_section_names_file_line_column_and_field() {
        let e = Profile::parse(
            "p.toml",
            &format!("{MINIMAL}[acp]\ncommand = [\"x\"]\n[acp.quirks]\nload_replay = true\n"),
        )
        .unwrap_err();
        assert_eq!((e.file.as_str(), e.line, e.column), ("p.toml", 9, 1), "{e}");
        assert!(e.message.contains("unknown field `load_replay`"), "{e}");

        let e =
            Profile::parse("p.toml", &format!("{MINIMAL}[acp]\ncomand = [\"x\"]\n")).unwrap_err();
        assert_eq!((e.line, e.column), (7, 1), "{e}");
        assert!(e.message.contains("unknown field `comand`"), "{e}");

        let e = Profile::parse("p.toml", &format!("{MINIMAL}[acp]\ncommand = []\n")).unwrap_err();
        assert_eq!((e.line, e.column), (7, 1), "{e}");
        assert!(
            e.message.starts_with("acp.command: give the program"),
            "{e}"
        );
    }

    #[test]
    fn an_acp_command_line_is_told_by_program_basename_and_leading_args() {
        let spec = |command: &[&str]| AcpSpec {
            command: command.iter().map(|s| s.to_string()).collect(),
            checked: None,
            version_args: Vec::new(),
            env: EnvChanges::default(),
            env_as_root: BTreeMap::new(),
            quirks: AcpQuirks::default(),
        };
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let sub = spec(&["tool", "acp"]);
        assert!(sub.runs(&argv("tool acp")));
        assert!(sub.runs(&argv("/opt/bin/tool acp --cwd /w")));
        assert!(!sub.runs(&argv("tool run acp")));
        assert!(!sub.runs(&argv("tool")));
        assert!(!sub.runs(&argv("other acp")));
        assert!(!sub.runs(&[]));
        let own = spec(&["tool-acp"]);
        assert!(own.runs(&argv("/x/tool-acp --flag")));
        assert!(!own.runs(&argv("tool-acp-2")));
    }

    #[test]
    fn resume_is_pinned_in_place_of_continue() {
        let p = Profile::parse(
            "c.toml",
            &format!("{MINIMAL}[resume]\ncontinue_args = [\"--continue\", \"-c\"]\npinned = [\"--resume\", \"{{id}}\"]\nexplicit_args = [\"--resume\", \"-r\"]\n"),
        )
        .unwrap();
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            p.pin_resume(&argv("claude -c --model x"), "abc"),
            Some(argv("claude --resume abc --model x"))
        );
        assert_eq!(p.pin_resume(&argv("claude --resume old"), "abc"), None);
        assert_eq!(p.pin_resume(&argv("claude"), "abc"), None);
    }

    #[test]
    fn a_takeover_resumes_whatever_the_command_asked() {
        // Codex: `resume --last` continues, `resume ID` names, plain starts.
        let p = Profile::parse(
            "c.toml",
            &format!("{MINIMAL}[resume]\ncontinue_args = [\"--last\"]\npinned = [\"{{id}}\"]\nexplicit_args = [\"resume\"]\nstart = [\"resume\", \"{{id}}\"]\n"),
        )
        .unwrap();
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(p.named_conversation(&argv("codex resume --last")), None);
        assert!(p.asks_to_continue(&argv("codex resume --last")));
        assert_eq!(
            p.resume_conversation(&argv("codex resume --last"), "t1"),
            argv("codex resume t1")
        );
        assert_eq!(
            p.named_conversation(&argv("codex resume t0")).as_deref(),
            Some("t0")
        );
        assert_eq!(
            p.resume_conversation(&argv("codex resume t0"), "t1"),
            argv("codex resume t0")
        );
        assert_eq!(
            p.resume_conversation(&argv("codex --model m"), "t1"),
            argv("codex --model m resume t1")
        );
    }

    #[test]
    fn the_conversation_section_is_also_read_under_its_old_name() {
        for section in ["conversation", "session"] {
            let text = format!("{MINIMAL}[{section}]\ndiscovery = \"codex\"\nshared = \"allow\"\n");
            let p = Profile::parse("c.toml", &text).unwrap();
            let spec = p.conversation.expect("the section is read");
            assert_eq!(spec.discovery.as_deref(), Some("codex"), "[{section}]");
            assert_eq!(spec.shared, Sharing::Allow, "[{section}]");
        }
    }
}
