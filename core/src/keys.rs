//! Named keys, as `session send --keys` takes them (tmux's names).

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown key '{0}'; use names such as Enter, Tab, Escape, BSpace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, Space, C-c, M-x, F1")]
pub struct UnknownKey(pub String);

/// The bytes a terminal sends for the named key.
pub fn key_bytes(name: &str) -> Result<Vec<u8>, UnknownKey> {
    let fixed: &[u8] = match name {
        "Enter" | "Return" | "C-m" => b"\r",
        "Tab" | "C-i" => b"\t",
        "BTab" => b"\x1b[Z",
        "Escape" | "Esc" | "C-[" => b"\x1b",
        "BSpace" | "Backspace" => b"\x7f",
        "Space" => b" ",
        "Up" => b"\x1b[A",
        "Down" => b"\x1b[B",
        "Right" => b"\x1b[C",
        "Left" => b"\x1b[D",
        "Home" => b"\x1b[H",
        "End" => b"\x1b[F",
        "PageUp" | "PPage" => b"\x1b[5~",
        "PageDown" | "NPage" => b"\x1b[6~",
        "Insert" | "IC" => b"\x1b[2~",
        "Delete" | "DC" => b"\x1b[3~",
        "F1" => b"\x1bOP",
        "F2" => b"\x1bOQ",
        "F3" => b"\x1bOR",
        "F4" => b"\x1bOS",
        "F5" => b"\x1b[15~",
        "F6" => b"\x1b[17~",
        "F7" => b"\x1b[18~",
        "F8" => b"\x1b[19~",
        "F9" => b"\x1b[20~",
        "F10" => b"\x1b[21~",
        "F11" => b"\x1b[23~",
        "F12" => b"\x1b[24~",
        _ => return modified(name).ok_or_else(|| UnknownKey(name.to_owned())),
    };
    Ok(fixed.to_vec())
}

/// `C-x` (control) and `M-x` (meta: ESC prefix), also combined as `M-C-x`.
fn modified(name: &str) -> Option<Vec<u8>> {
    if let Some(rest) = name.strip_prefix("M-") {
        let mut out = vec![0x1b];
        out.extend(key_bytes(rest).ok().or_else(|| single(rest))?);
        return Some(out);
    }
    let rest = name.strip_prefix("C-")?;
    let mut chars = rest.chars();
    let c = chars.next()?.to_ascii_lowercase();
    if chars.next().is_some() {
        return None;
    }
    match c {
        'a'..='z' => Some(vec![c as u8 - b'a' + 1]),
        '@' | ' ' => Some(vec![0]),
        '\\' => Some(vec![0x1c]),
        ']' => Some(vec![0x1d]),
        '^' => Some(vec![0x1e]),
        '_' => Some(vec![0x1f]),
        '?' => Some(vec![0x7f]),
        _ => None,
    }
}

fn single(s: &str) -> Option<Vec<u8>> {
    let mut chars = s.chars();
    let c = chars.next()?;
    chars.next().is_none().then(|| c.to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_terminal_bytes() {
        assert_eq!(key_bytes("Enter").unwrap(), b"\r");
        assert_eq!(key_bytes("C-c").unwrap(), b"\x03");
        assert_eq!(key_bytes("C-\\").unwrap(), b"\x1c");
        assert_eq!(key_bytes("M-x").unwrap(), b"\x1bx");
        assert_eq!(key_bytes("M-Enter").unwrap(), b"\x1b\r");
        assert!(key_bytes("Hyper-q").is_err());
    }
}
