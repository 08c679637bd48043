//! `--record FILE`: a session recorded as asciicast v2, as asciinema reads
//! it — header, then output and input events in order.

mod support;

use serde_json::Value;
use support::env::TestEnv;

/// Starts bash as session `name`, recorded to `<name>.cast`; returns the
/// cast's path.
fn start_recorded_bash(env: &TestEnv, name: &str) -> std::path::PathBuf {
    let cast = env.base().join(format!("{name}.cast"));
    let cast_arg = cast.display().to_string();
    env.start(
        name,
        &[
            "--record",
            &cast_arg,
            "--env",
            "PS1=$ ",
            "--",
            "bash",
            "--norc",
            "--noprofile",
        ],
    );
    cast
}

#[test]
fn a_recorded_session_holds_its_input_and_output() {
    let env = TestEnv::new();
    let cast = start_recorded_bash(&env, "rec");
    env.send_line("rec", "echo recorded-$((6*7))");
    env.wait_screen("rec", "recorded-42");
    env.run_ok(&["session", "kill", "rec"]);

    let text = std::fs::read_to_string(&cast).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = lines.next().unwrap();
    assert_eq!(header["version"], 2, "{header}");
    assert_eq!(
        (header["width"].as_u64(), header["height"].as_u64()),
        (Some(80), Some(24))
    );
    let events: Vec<Value> = lines.collect();
    let times: Vec<f64> = events.iter().map(|e| e[0].as_f64().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "timestamps go forward"
    );
    let joined = |kind: &str| -> String {
        events
            .iter()
            .filter(|e| e[1] == kind)
            .map(|e| e[2].as_str().unwrap())
            .collect()
    };
    assert!(joined("i").contains("echo recorded-$((6*7))"), "{text}");
    assert!(joined("o").contains("recorded-42"), "{text}");
    let mode = std::fs::metadata(&cast).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
}

/// A flood of output is recorded whole: while the event loop is behind, the
/// PTY's reader merges what waits into one chunk, and each read it merges
/// is recorded too (once, it was not, and a cast lost what the screen saw).
#[test]
fn a_recorded_flood_holds_every_line() {
    const LINES: u32 = 300_000;
    let env = TestEnv::new();
    let cast = start_recorded_bash(&env, "flood");
    env.send_line("flood", &format!("seq 1 {LINES}; echo flood-$((6*7))"));
    env.wait_screen("flood", "flood-42");
    env.run_ok(&["session", "kill", "flood"]);

    let text = std::fs::read_to_string(&cast).unwrap();
    let output: String = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e[1] == "o")
        .map(|e| e[2].as_str().unwrap().to_owned())
        .collect();
    // A line is what follows its last CR: bash's first one starts with the
    // end of bracketed paste mode, `ESC [?2004l CR`.
    let numbers: Vec<&str> = output
        .split("\r\n")
        .map(|l| l.rsplit('\r').next().unwrap_or_default())
        .skip_while(|l| *l != "1")
        .take(LINES as usize)
        .collect();
    let expected: Vec<String> = (1..=LINES).map(|n| n.to_string()).collect();
    let missing = expected
        .iter()
        .zip(&numbers)
        .position(|(want, got)| want != got);
    assert_eq!(numbers.len(), LINES as usize, "the cast lost lines");
    assert_eq!(missing, None, "the cast differs from `seq` from there on");
}
