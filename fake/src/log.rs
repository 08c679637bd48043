//! The submission log: one JSON object per line, each written whole with
//! one append, so that several fakes can share a file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

pub struct EventLog(Option<File>);

impl EventLog {
    pub fn open(path: Option<&Path>) -> std::io::Result<Self> {
        let file = match path {
            Some(p) => Some(OpenOptions::new().create(true).append(true).open(p)?),
            None => None,
        };
        Ok(Self(file))
    }

    /// Logs `event` with `fields` and `t`, Unix time in milliseconds. A log
    /// that cannot be written is not the test's subject: it is skipped.
    pub fn write(&mut self, event: &str, fields: Value) {
        let Some(file) = &mut self.0 else {
            return;
        };
        let mut record = Map::new();
        record.insert("event".into(), event.into());
        if let Value::Object(fields) = fields {
            record.extend(fields);
        }
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        record.insert("t".into(), t.into());
        let mut line = Value::Object(record).to_string();
        line.push('\n');
        let _ = file.write_all(line.as_bytes());
    }
}
