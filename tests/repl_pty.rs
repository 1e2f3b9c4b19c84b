//! `domino repl` on a pseudo-terminal: the interactive path (rustyline, colour, Ctrl-C as a
//! signal during generation, Ctrl-D, tab completion, the history file), driven the way a
//! person would type. Unix only (openpty).
#![cfg(unix)]

mod common;

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The child process and the master side of its terminal; kills the child when dropped.
struct Pty {
    child: Child,
    master: std::fs::File,
    screen: Arc<Mutex<Vec<u8>>>,
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Pty {
    fn spawn(args: &[&str], data_home: &std::path::Path) -> Pty {
        let model = common::require_default_model();
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(rc, 0, "openpty failed: {}", std::io::Error::last_os_error());
        let master = unsafe { OwnedFd::from_raw_fd(master) };
        let slave = unsafe { OwnedFd::from_raw_fd(slave) };
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_domino"));
        cmd.current_dir(common::repo_root())
            .env_remove("NO_COLOR")
            .env_remove("DOMINO_MODEL")
            .env("TERM", "xterm-256color")
            .env("COLORTERM", "truecolor")
            .env("XDG_DATA_HOME", data_home)
            .arg("repl")
            .args(["--threads", "1", "-m"])
            .arg(model)
            .args(args)
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // A session of its own with the pty as controlling terminal, so that ^C on the
        // terminal sends SIGINT to the REPL, as in a real shell.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        let master = std::fs::File::from(master);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once the child has exited and the slave is closed.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            child,
            master,
            screen,
        }
    }

    fn len(&self) -> usize {
        self.screen.lock().unwrap().len()
    }

    /// Everything written to the terminal from byte `from` on.
    fn since(&self, from: usize) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()[from..]).into_owned()
    }

    fn type_keys(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    /// Wait until the output after `from` contains `needle`; returns that output.
    fn wait_for(&self, from: usize, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let text = self.since(from);
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {needle:?}; screen so far:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn interactive_session_on_a_terminal() {
    let data = common::scratch_dir("repl-pty-data");
    let mut pty = Pty::spawn(&["--chat", "-n", "60"], &data);
    pty.wait_for(0, "domino> ");

    // Tab completion of a command name, then of a file path.
    let at = pty.len();
    pty.type_keys(":sch\t");
    pty.wait_for(at, ":schema");
    pty.type_keys(" grammars/gsm8k.sch\t");
    pty.wait_for(at, "gsm8k.schema.json");
    pty.type_keys("\r");
    pty.wait_for(at, "constraint: schema grammars/gsm8k.schema.json");
    pty.wait_for(at, "domino[gsm8k.schema.json]> ");

    // A generation streams in colour: heat backgrounds (24-bit) on a terminal.
    pty.type_keys(":json\r");
    pty.wait_for(at, "constraint: json");
    let at = pty.len();
    pty.type_keys("Give me a JSON object describing a cat with name, age and colour.\r");
    let out = pty.wait_for(at, " tokens · ");
    assert!(
        out.contains("\x1b[48;2;"),
        "no heat colours on a terminal: {out:?}"
    );

    // Ctrl-C stops a long generation; the session goes on.
    // One command at a time: like any line editor, rustyline may drop keys typed ahead
    // while it is not reading.
    pty.type_keys(":none\r");
    pty.wait_for(at, "constraint: none");
    pty.type_keys(":max 3000\r");
    pty.wait_for(at, "max: 3000");
    let at = pty.len();
    pty.type_keys("Write a long story about a dragon.\r");
    // Let it stream a little, then interrupt.
    let started = pty.len();
    let deadline = Instant::now() + Duration::from_secs(120);
    while pty.len() < started + 200 {
        assert!(Instant::now() < deadline, "no output: {}", pty.since(at));
        std::thread::sleep(Duration::from_millis(20));
    }
    pty.type_keys("\x03");
    pty.wait_for(at, "stopped by Ctrl-C");
    std::thread::sleep(Duration::from_millis(500));
    let at = pty.len();
    pty.type_keys(":stats\r");
    pty.wait_for(at, "\"cancelled\"");

    // Ctrl-C at the prompt clears the line; Ctrl-D leaves.
    pty.wait_for(at, "domino> ");
    pty.type_keys("half a line\x03");
    std::thread::sleep(Duration::from_millis(1000));
    pty.type_keys("\x04");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = pty.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "Ctrl-D did not end the session");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");

    // History persisted under the data dir.
    let history = std::fs::read_to_string(data.join("domino").join("history")).unwrap();
    assert!(
        history.contains(":schema grammars/gsm8k.schema.json"),
        "{history}"
    );
    assert!(
        history.contains("Write a long story about a dragon."),
        "{history}"
    );
    assert!(!history.contains("half a line"), "{history}");
}
