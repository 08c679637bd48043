//! The tap: every JSON-RPC line between the supervisor and its agent, in
//! both directions, appended to a durable transcript before it is acted on,
//! and fanned out to whoever follows the session live.
//!
//! The transcript is JSON lines (one [`Entry`] each) in
//! `<project>/.agent-comms/acp/<runtime>.jsonl`, beside the runtime's other
//! state, so `acp log` reads it with or without a live supervisor. Each entry
//! is one `write` on a file opened for appending, without a user-space
//! buffer: once the write returns, the line survives the process, so a crash
//! loses at most the line in flight. A runtime served again appends to the
//! same file; sequence numbers go on from the last entry, and a follower
//! that subscribed at sequence N reads the file up to N and the live stream
//! after it, with nothing missed or shown twice.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::time::now_iso;

/// Entries a live follower may fall behind by before it misses some (it is
/// told, and can read the file). Twice the bridge's
/// [`MAX_BACKLOG`](super::bridge::MAX_BACKLOG): a client is dropped for the
/// lines *it* did not read, never because its seat's task was not
/// scheduled while the agent streamed (on a loaded machine, 1024 entries
/// behind dropped a client that read everything).
pub(crate) const FOLLOWERS_BUFFER: usize = 8192;
/// How much of a line that is not JSON the transcript keeps.
const MAX_GARBAGE_KEPT: usize = 4096;

/// One line of the transcript (a wire type too: `acp log --follow` gets
/// them as events).
pub use crate::socket::protocol::{Direction, TranscriptEntry as Entry};

/// Where runtime `id`'s transcript is kept, under the project's state dir.
pub fn transcript_path(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("acp").join(format!("{id}.jsonl"))
}

pub struct Tap {
    path: PathBuf,
    inner: Mutex<Files>,
    live: broadcast::Sender<Arc<Entry>>,
}

struct Files {
    transcript: File,
    /// `--record FILE`: the same lines, where the user asked.
    record: Option<File>,
    next_seq: u64,
}

impl Tap {
    /// Opens (or continues) the transcript at `path`, and the user's
    /// `record` copy if asked for.
    pub fn open(path: &Path, record: Option<&Path>) -> io::Result<Arc<Self>> {
        if let Some(dir) = path.parent() {
            private_dir(dir)?;
        }
        let next_seq = last_seq(path)?.map_or(0, |s| s + 1);
        let transcript = append_private(path)?;
        let record = record.map(append_private).transpose()?;
        Ok(Arc::new(Self {
            path: path.to_owned(),
            inner: Mutex::new(Files {
                transcript,
                record,
                next_seq,
            }),
            live: broadcast::channel(FOLLOWERS_BUFFER).0,
        }))
    }

    /// The transcript file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Taps one JSON-RPC line as it passes in `dir`.
    pub fn line(&self, dir: Direction, line: &str) {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(msg) => self.append(dir, Some(msg), None),
            Err(_) => {
                let mut kept = line.to_owned();
                if kept.len() > MAX_GARBAGE_KEPT {
                    let cut = (0..=MAX_GARBAGE_KEPT)
                        .rev()
                        .find(|&i| kept.is_char_boundary(i))
                        .unwrap_or(0);
                    kept.truncate(cut);
                    kept.push_str(" …");
                }
                self.append(dir, None, Some(format!("not JSON: {kept}")));
            }
        }
    }

    /// The supervisor's own remark, in sequence with the traffic.
    pub fn note(&self, text: impl Into<String>) {
        self.append(Direction::Note, None, Some(text.into()));
    }

    /// The sequence number the next entry gets.
    pub fn next_seq(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .next_seq
    }

    /// The sequence number the next entry gets, and the live stream from
    /// it on: entries before it are in the file.
    pub fn follow(&self) -> (u64, broadcast::Receiver<Arc<Entry>>) {
        let files = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (files.next_seq, self.live.subscribe())
    }

    fn append(&self, dir: Direction, msg: Option<serde_json::Value>, text: Option<String>) {
        let mut files = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let entry = Entry {
            seq: files.next_seq,
            ts: now_iso(),
            dir,
            msg,
            text,
        };
        files.next_seq += 1;
        let mut line = serde_json::to_vec(&entry).expect("an entry serializes");
        line.push(b'\n');
        if let Err(e) = files.transcript.write_all(&line) {
            tracing::error!("cannot append to the transcript: {e}");
        }
        if let Some(record) = files.record.as_mut() {
            if let Err(e) = record.write_all(&line) {
                tracing::error!("cannot append to the --record file: {e}");
            }
        }
        // Sent under the lock: followers see entries in sequence order.
        let _ = self.live.send(Arc::new(entry));
    }
}

/// The transcripts' directory: made the user's alone, or checked to be.
/// The project's state directory above it is made too when missing: with
/// a PostgreSQL store nothing else makes it (finding 8 of issue 32:
/// `acp-serve` on a fresh project could not keep its transcript).
fn private_dir(dir: &Path) -> io::Result<()> {
    if let Some(state) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        match crate::os::create_private_dir(state) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    match crate::os::create_private_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(dir)?;
            crate::os::check_private(&meta).map_err(|why| {
                let why = match why {
                    crate::os::NotPrivate::ForeignOwner { owner, .. } => {
                        format!("it belongs to uid {owner}")
                    }
                    crate::os::NotPrivate::Permissive { mode } => {
                        format!("its mode {mode:o} lets others in; chmod 700 it")
                    }
                };
                io::Error::new(io::ErrorKind::PermissionDenied, why)
            })
        }
        other => other,
    }
}

fn append_private(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Every whole entry of the transcript at `path`, oldest first; a last line
/// cut short by a crash is left out.
pub fn read(path: &Path) -> io::Result<Vec<Entry>> {
    entries(path)?.collect()
}

/// The file's whole entries in order, read as they are taken: memory for
/// one line at a time, whatever the transcript's size (a client joining a
/// runtime that ran for a month is shown it without loading it).
pub fn entries(path: &Path) -> io::Result<impl Iterator<Item = io::Result<Entry>>> {
    Ok(sized_entries(path)?.map(|entry| entry.map(|(entry, _)| entry)))
}

/// [`entries`], each with the length of its line in the file.
pub fn sized_entries(path: &Path) -> io::Result<impl Iterator<Item = io::Result<(Entry, usize)>>> {
    let file = File::open(path)?;
    Ok(BufReader::new(file)
        .split(b'\n')
        .filter_map(|line| match line {
            Ok(line) => serde_json::from_slice::<Entry>(&line)
                .ok()
                .map(|entry| Ok((entry, line.len() + 1))),
            Err(e) => Some(Err(e)),
        }))
}

/// The sequence number of the file's last whole entry, reading it from
/// the end.
pub fn last_seq(path: &Path) -> io::Result<Option<u64>> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.seek(SeekFrom::End(0))?;
    let mut tail = Vec::new();
    let mut start = len;
    const STEP: u64 = 64 * 1024;
    while start > 0 {
        let from = start.saturating_sub(STEP);
        file.seek(SeekFrom::Start(from))?;
        let mut chunk = vec![0; (start - from) as usize];
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&tail);
        tail = chunk;
        start = from;
        // Whole lines, newest first: the first that parses wins.
        let mut lines: Vec<&[u8]> = tail.split(|&b| b == b'\n').collect();
        if start > 0 {
            lines.remove(0); // may be cut: read further back for it
        }
        for line in lines.iter().rev() {
            if let Ok(entry) = serde_json::from_slice::<Entry>(line) {
                return Ok(Some(entry.seq));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_fresh_project_without_a_state_directory_keeps_its_transcript() {
        use std::os::unix::fs::PermissionsExt;
        let project = tempfile::tempdir().unwrap();
        let state = project.path().join(".agent-comms");
        let path = transcript_path(&state, "rt");
        let tap = Tap::open(&path, None).expect("the state directory is made");
        tap.note("kept");
        assert_eq!(read(&path).unwrap()[0].text.as_deref(), Some("kept"));
        for dir in [&state, &state.join("acp")] {
            let mode = std::fs::metadata(dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        }
    }

    #[test]
    fn entries_survive_and_numbering_goes_on_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = transcript_path(dir.path(), "rt");
        let tap = Tap::open(&path, None).unwrap();
        tap.line(
            Direction::ToAgent,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize"}"#,
        );
        tap.line(Direction::FromAgent, "garbage \u{1b}[2J");
        drop(tap);
        let tap = Tap::open(&path, None).unwrap();
        let (next, _) = tap.follow();
        assert_eq!(next, 2);
        tap.note("agent exited");
        let entries = read(&path).unwrap();
        let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [0, 1, 2]);
        assert_eq!(entries[0].msg.as_ref().unwrap()["method"], "initialize");
        assert!(entries[1]
            .text
            .as_deref()
            .unwrap()
            .starts_with("not JSON: garbage"));
        assert_eq!(entries[2].dir, Direction::Note);
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = transcript_path(dir.path(), "rt");
        let tap = Tap::open(&path, None).unwrap();
        tap.note("one");
        drop(tap);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(br#"{"seq":1,"ts":"x","di"#)
            .unwrap();
        assert_eq!(read(&path).unwrap().len(), 1);
        assert_eq!(last_seq(&path).unwrap(), Some(0));
    }

    #[test]
    fn a_follower_gets_what_comes_after_its_mark() {
        let dir = tempfile::tempdir().unwrap();
        let tap = Tap::open(&transcript_path(dir.path(), "rt"), None).unwrap();
        tap.note("before");
        let (mark, mut live) = tap.follow();
        tap.note("after");
        let got = live.try_recv().unwrap();
        assert_eq!((mark, got.seq), (1, 1));
        assert!(live.try_recv().is_err());
    }
}
