//! Reading the files that configuration names (profiles, plugins): only
//! regular files, of bounded size, without ever blocking.
//!
//! Every command loads the profiles of the user's and the project's
//! directories, so whatever sits there is read by every command: a FIFO
//! (whose open blocks until a writer comes) hung `session new`, `k new`,
//! `adapters list` and `doctor`, and a 32 MB profile took `adapters list`
//! over two minutes. The file is opened without blocking, checked to be a
//! regular file on the opened descriptor (no race with a swap between a
//! check and the open), and read to at most its limit.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The most a profile may hold.
pub const MAX_PROFILE_BYTES: u64 = 1 << 20;
/// The most a Wasm plugin may hold.
pub const MAX_PLUGIN_BYTES: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    #[error("not read: it is {0}, not a regular file")]
    NotRegular(&'static str),
    #[error("not read: it holds {size} bytes, over the {limit} limit for {what}")]
    TooLarge {
        size: u64,
        /// For people: "1 MiB".
        limit: String,
        what: &'static str,
    },
}

/// The bytes of `path`, a regular file of at most `limit` bytes; `what`
/// names the kind of file in the error ("a profile").
pub fn read(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, FileError> {
    let mut file = open_nonblocking(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind_of(&meta.file_type())));
    }
    let too_large = |size| FileError::TooLarge {
        size,
        limit: human(limit),
        what,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    // The file may grow between the check and the read: read one byte past
    // the limit to see it.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.by_ref().take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String, FileError> {
    String::from_utf8(read(path, limit, what)?).map_err(|_| {
        FileError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Windows has no FIFOs in the file system; named pipes live elsewhere.
#[cfg(windows)]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

fn kind_of(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return "a device";
        }
    }
    if file_type.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// A limit for people: 1 MiB, 64 MiB.
fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_the_limit_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "name = 1\n").unwrap();
        assert_eq!(read_text(&path, 9, "a profile").unwrap(), "name = 1\n");
        let err = read_text(&path, 8, "a profile").unwrap_err().to_string();
        assert_eq!(
            err,
            "not read: it holds 9 bytes, over the 8 bytes limit for a profile"
        );
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = read(dir.path(), MAX_PROFILE_BYTES, "a profile").unwrap_err();
        assert_eq!(
            err.to_string(),
            "not read: it is a directory, not a regular file"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo.toml");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&path, MAX_PROFILE_BYTES, "a profile").unwrap_err();
        assert_eq!(
            err.to_string(),
            "not read: it is a FIFO, not a regular file"
        );
    }
}
