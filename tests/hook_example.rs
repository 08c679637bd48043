//! The example frame-detection hook (plugins/examples/hook-prompt) ends a
//! cell's frame at the prompt it is told, through the real `k`.

mod support;

use support::cells::Env;
use support::run::Run;

fn k(env: &Env, args: &[&str]) -> Run {
    env.k_env(args, &[("HOOK_PROMPT", "ok>")])
}

#[test]
fn the_example_hook_ends_frames_at_its_prompt() {
    let env = Env::new();
    let hook = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/plugins/examples/hook-prompt/prompt-hook"
    );
    let prompt = format!("--prompt={hook}");
    let new = k(&env, &["new", "h", "env PS1='ok> ' sh", &prompt]).ok();
    assert!(new.stdout.starts_with("OK h prompt='/"), "{new:#?}");
    if let Some(record) = env.record("h") {
        env.remember(record);
    }
    let run = k(&env, &["run", "-j", "h", "echo first; echo second"]).ok();
    assert_eq!(
        run.stdout.trim_end(),
        format!(
            r#"{{"cell_id": "{}", "status": "done", "output": "first\nsecond"}}"#,
            &run.stdout[13..25]
        )
    );
    // An "Error: " line ends the frame too, without waiting for the prompt.
    let run = k(
        &env,
        &[
            "run",
            "-j",
            "-t",
            "5",
            "h",
            "echo 'Error: nope'; sleep 3; echo late",
        ],
    )
    .ok();
    assert!(
        run.stdout.contains(r#""status": "done", "output": """#),
        "{run:#?}"
    );
    k(&env, &["kill", "h"]).ok();
}
