//! A `domino serve` process for integration tests, and a small blocking HTTP/1.1 client.
//!
//! [`Server::start`] runs the binary on 127.0.0.1 with `--port 0`, reads the bound address
//! from its "listening on http://ADDR" line on stderr, and waits for `/health`; dropping the
//! [`Server`] kills the process (also when a test panics). [`Server::request`] sends one
//! request with `Connection: close` and reads the whole response (chunked bodies, which
//! server-sent events use, are de-chunked).
//!
//! Each test crate that includes this file uses a different part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A running server (killed on drop).
pub struct Server {
    child: Child,
    pub addr: String,
}

/// One HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Header lines, lowercased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `data:` payloads of a server-sent-event body, in order.
    pub fn events(&self) -> Vec<String> {
        self.body
            .split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Start `domino serve` on the default model with one thread and these extra flags.
    pub fn start(extra: &[&str]) -> Server {
        let model = crate::common::require_default_model();
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("domino"))
            .env_remove("DOMINO_MODEL")
            .env_remove("DOMINO_API_KEY")
            .current_dir(crate::common::repo_root())
            .arg("serve")
            .arg("-m")
            .arg(model)
            .args(["--port", "0", "--threads", "1"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start domino serve");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && let Some(at) = line.find("listening on http://") {
                    let addr = line[at + "listening on http://".len()..].trim().to_string();
                    let _ = tx.send(Ok(addr));
                    sent = true;
                } else if !sent {
                    let _ = tx.send(Err(line));
                }
            }
        });
        let mut log = Vec::new();
        let addr = loop {
            match rx.recv_timeout(Duration::from_secs(120)) {
                Ok(Ok(addr)) => break addr,
                Ok(Err(line)) => log.push(line),
                Err(_) => {
                    let _ = child.kill();
                    panic!("domino serve did not start; stderr:\n{}", log.join("\n"));
                }
            }
        };
        let server = Server { child, addr };
        let health = server.get("/health");
        assert_eq!(health.status, 200, "{}", health.body);
        server
    }

    pub fn get(&self, path: &str) -> Response {
        self.request("GET", path, &[], "")
    }

    pub fn post(&self, path: &str, body: &serde_json::Value) -> Response {
        self.request("POST", path, &[], &body.to_string())
    }

    /// Open a connection and send a request without reading the answer.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> TcpStream {
        let mut stream = TcpStream::connect(&self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(300)))
            .unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        stream
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Response {
        let mut stream = self.send(method, path, headers, body);
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read the response");
        parse(&raw)
    }
}

fn parse(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body: String::from_utf8(body).expect("a UTF-8 body"),
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .expect("a chunk size");
        if size == 0 {
            return out;
        }
        let start = eol + 2;
        out.extend_from_slice(&data[start..start + size]);
        data = &data[start + size + 2..];
    }
}
