//! `agent-comms store check`: whether a state database is sound, and if
//! not, what is wrong with it and how to start over.
//!
//! It opens the file read-only and changes nothing (no migration, no WAL
//! switch), so it can look at a database every other command refuses.
//! What it checks: that the directory and files are the user's alone, the
//! agent-comms marker and the schema version, SQLite's own
//! `PRAGMA integrity_check`, and that the tables agent-comms needs exist.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use super::migrations::{self, latest};
use super::private::store_problems;

/// The tables every schema version since the first holds.
const TABLES: &[&str] = &["agents", "runtimes", "invocations", "attempts"];

/// Most of `integrity_check`'s lines reported: a badly damaged file has
/// thousands, and the first few say what matters.
const MAX_INTEGRITY_LINES: usize = 20;

/// What `store check` found.
#[derive(Debug, Clone, Serialize)]
pub struct StoreCheck {
    pub path: PathBuf,
    pub exists: bool,
    pub ok: bool,
    /// `user_version`, when it could be read.
    pub schema: Option<i64>,
    pub problems: Vec<String>,
    /// What to do about the problems, when there are any.
    pub repair: Option<String>,
}

/// Checks the state database at `path`.
pub fn check(path: &Path) -> StoreCheck {
    let mut found = StoreCheck {
        path: path.to_path_buf(),
        exists: path.exists(),
        ok: true,
        schema: None,
        problems: Vec::new(),
        repair: None,
    };
    if !found.exists {
        return found;
    }
    let privacy = store_problems(path);
    if !privacy.is_empty() {
        found.repair = Some(
            privacy
                .iter()
                .map(|p| p.repair())
                .collect::<Vec<_>>()
                .join("; "),
        );
        found.problems = privacy.iter().map(|p| p.what()).collect();
    } else {
        found.problems = contents(path, &mut found.schema);
        if !found.problems.is_empty() {
            let p = path.display();
            found.repair = Some(format!(
                "stop the project's runtimes, then move the file aside (mv {p} {p}.damaged, and {p}-wal and {p}-shm if present); the next command creates a new, empty store"
            ));
        }
    }
    found.ok = found.problems.is_empty();
    found
}

/// The problems of the database's contents (marker, schema, pages).
fn contents(path: &Path, schema: &mut Option<i64>) -> Vec<String> {
    let conn = match Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(conn) => conn,
        Err(e) => return vec![format!("cannot be opened: {e}")],
    };
    let header = match migrations::read_header(&conn) {
        Ok(header) => header,
        Err(e) => return vec![format!("its header cannot be read: {e}")],
    };
    *schema = Some(header.user_version);
    if let Err(e) = migrations::check_header(header, path) {
        return vec![e.to_string()];
    }
    let mut problems = integrity(&conn);
    if problems.is_empty() && header.user_version == latest() {
        problems.extend(missing_tables(&conn));
    }
    problems
}

/// `PRAGMA integrity_check`'s complaints (none when it says "ok").
fn integrity(conn: &Connection) -> Vec<String> {
    let lines = conn
        .prepare(&format!("PRAGMA integrity_check({MAX_INTEGRITY_LINES})"))
        .and_then(|mut stmt| {
            stmt.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        });
    match lines {
        Ok(lines) if lines == ["ok"] => Vec::new(),
        Ok(lines) => lines,
        Err(e) => vec![format!("integrity check failed: {e}")],
    }
}

fn missing_tables(conn: &Connection) -> Vec<String> {
    TABLES
        .iter()
        .filter(|t| {
            conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [t],
                |r| r.get::<_, i64>(0),
            )
            .map_or(true, |n| n == 0)
        })
        .map(|t| format!("table {t} is missing"))
        .collect()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    #[test]
    fn a_sound_store_is_ok_and_a_damaged_one_is_told_with_its_repair() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        assert!(check(&path).ok && !check(&path).exists);
        drop(SqliteStore::open(&path).unwrap());
        let sound = check(&path);
        assert!(sound.ok, "{sound:?}");
        assert_eq!(sound.schema, Some(latest()));

        let mut bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() > 4096);
        bytes[4096..].fill(0xA5);
        std::fs::write(&path, bytes).unwrap();
        let damaged = check(&path);
        assert!(!damaged.ok && !damaged.problems.is_empty(), "{damaged:?}");
        assert!(damaged.repair.unwrap().contains("mv "));
    }
}
