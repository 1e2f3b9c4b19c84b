//! `scripts/setup` is the first half of both README commands (`scripts/setup && …`): a run that
//! finds everything in place must exit 0, or the command after `&&` never runs.

mod common;

use std::process::{Command, Stdio};

/// Regression: the EXIT trap's `[ -n "$TMP" ] && rm …` made a run that downloaded nothing
/// exit 1.
#[test]
fn a_second_setup_run_succeeds_and_changes_nothing() {
    common::require_default_model();
    let out = Command::new("bash")
        .arg(common::repo_root().join("scripts/setup"))
        .arg("--no-build")
        .current_dir(common::repo_root())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "scripts/setup exited {:?}:\n{stderr}",
        out.status.code()
    );
    assert!(stderr.contains("setup: ready"), "{stderr}");
    assert!(
        !stderr.contains("fetching"),
        "nothing should be downloaded again:\n{stderr}"
    );
}
