//! A raw control-protocol client for tests that need one running as *another* user (a member of
//! a shared service): the test process is root, whom the daemon gives every right.
//!
//! Usage:
//! - `rootsd-peer SOCKET LINE...`: connects, says hello, sends each `LINE` (a JSON-RPC request)
//!   and prints the answer to each (pushes are skipped), one per line, then exits.
//! - `rootsd-peer SOCKET --hold N`: opens up to `N` greeted connections and prints
//!   `held K` (how many the daemon took) and, for the first one refused, `refused LINE`; then
//!   holds them until its stdin closes.

use std::io::{BufRead, BufReader, Read as _, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};

fn hello_line() -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "hello", "params": {"protocol_version": rootsd_tests::PROTOCOL_VERSION, "client": "rootsd-peer"}}).to_string()
}

/// Sends `line` and returns the answer to it (the first line with an `id`); `None` if the
/// connection ended first.
fn call(reader: &mut BufReader<UnixStream>, line: &str) -> Option<String> {
    writeln!(reader.get_mut(), "{line}").ok()?;
    loop {
        let mut answer = String::new();
        if reader.read_line(&mut answer).ok()? == 0 {
            return None;
        }
        let parsed: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        if parsed.get("id").is_some() {
            return Some(answer.trim_end().to_owned());
        }
    }
}

fn connect(socket: &str) -> BufReader<UnixStream> {
    let stream = UnixStream::connect(socket).expect("connect to the socket");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("set a read timeout");
    BufReader::new(stream)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (socket, rest) = args
        .split_first()
        .expect("usage: rootsd-peer SOCKET LINE... | rootsd-peer SOCKET --hold N");
    if rest.first().map(String::as_str) == Some("--hold") {
        let wanted: usize = rest[1].parse().expect("--hold takes a number");
        let mut held = Vec::new();
        let mut refused = None;
        for _ in 0..wanted {
            let mut reader = connect(socket);
            match call(&mut reader, &hello_line()) {
                Some(answer) if !answer.contains("\"error\"") => held.push(reader),
                other => {
                    refused = Some(other.unwrap_or_else(|| "(closed)".to_owned()));
                    break;
                }
            }
        }
        println!("held {}", held.len());
        if let Some(line) = refused {
            println!("refused {line}");
        }
        std::io::stdout().flush().unwrap();
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        return;
    }
    let mut reader = connect(socket);
    match call(&mut reader, &hello_line()) {
        Some(answer) => println!("{answer}"),
        None => {
            println!("closed");
            return;
        }
    }
    for line in rest {
        match call(&mut reader, line) {
            Some(answer) => println!("{answer}"),
            None => {
                println!("closed");
                return;
            }
        }
    }
}
