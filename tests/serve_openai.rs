//! The official `openai` Python client against `domino serve` (tests/serve_openai.py): chat
//! with response_format json_schema, streaming, tools, and the `domino` object via
//! `extra_body`. The client lives in the virtual environment `scripts/setup` creates
//! (`.venv/`); without it this test fails and says so.

mod common;
#[path = "common/server.rs"]
mod server;

use std::process::Command;

#[test]
fn the_openai_python_client_works_unchanged() {
    let python = common::repo_root().join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/setup (it creates .venv with the openai package)",
        python.display()
    );
    let s = server::Server::start(&[]);
    let out = Command::new(&python)
        .arg(common::repo_root().join("tests/serve_openai.py"))
        .arg(format!("http://{}", s.addr))
        .output()
        .expect("run tests/serve_openai.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "tests/serve_openai.py failed ({:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
}
