//! `bench-server`: the stdio MCP server of the benchmark (handshake era).
//!
//! Small and allocation-light on purpose, so that the figures measure what sits between it and
//! the host (`rootsctl proxy`, `limit-relay`, or nothing). It answers:
//! - `initialize`;
//! - `tools/call`: a text result of `params.arguments.bytes` bytes (the large results row);
//! - `bench/echo-run {n}`: sends the host `n` requests `bench/echo`, one after the other, and
//!   answers with the round-trip time of each, in nanoseconds (the relay row);
//! - `bench/roots-run {n}`: the same with `roots/list` (the `roots/list` row).
//!
//! Notifications are ignored; other requests get "method not found". It times round trips
//! itself because it is the side that waits for them.

use std::io::{BufRead, IoSlice};
use std::os::fd::AsFd;
use std::time::Instant;

use serde_json::{Value, json};

fn main() {
    let mut input = std::io::stdin().lock();
    let mut server = Server {
        next_id: 1,
        big_text: Vec::new(),
    };
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let Some(id) = message
            .get("id")
            .filter(|_| message.get("method").is_some())
        else {
            continue;
        };
        let method = message["method"].as_str().unwrap_or_default();
        let params = &message["params"];
        match method {
            "initialize" => respond(
                id,
                json!({
                    "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-11-25"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "bench-server", "version": "1"},
                }),
            ),
            "tools/call" => {
                let bytes = params["arguments"]["bytes"].as_u64().unwrap_or(0) as usize;
                server.big_result(id, bytes);
            }
            "bench/echo-run" | "bench/roots-run" => {
                let n = params["n"].as_u64().unwrap_or(0);
                let asked = if method == "bench/echo-run" {
                    "bench/echo"
                } else {
                    "roots/list"
                };
                let samples = server.round_trips(&mut input, asked, n);
                respond(id, json!({ "samples": samples }));
            }
            _ => write_line(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("bench-server does not know {method}")}})
                    .to_string()
                    .as_bytes(),
            ),
        }
    }
}

struct Server {
    next_id: u64,
    /// The text of the last large result, kept so that repeating it costs no formatting.
    big_text: Vec<u8>,
}

impl Server {
    /// Sends `method` to the host `n` times, each after the previous answer, and returns each
    /// round trip in nanoseconds.
    fn round_trips(&mut self, input: &mut impl BufRead, method: &str, n: u64) -> Vec<u64> {
        let mut samples = Vec::with_capacity(n as usize);
        let mut line = Vec::new();
        for _ in 0..n {
            let id = self.next_id;
            self.next_id += 1;
            let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#);
            // Both the proxy and the benchmark's host answer in this exact form, so a prefix
            // comparison finds the answer without parsing it.
            let answer = format!(r#"{{"jsonrpc":"2.0","id":{id},"#);
            let start = Instant::now();
            write_line(request.as_bytes());
            loop {
                line.clear();
                match input.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => std::process::exit(0),
                    Ok(_) => {}
                }
                if line.starts_with(answer.as_bytes()) || is_answer(&line, id) {
                    break;
                }
                // Anything else (a notification) does not concern the run.
            }
            samples.push(start.elapsed().as_nanos() as u64);
        }
        samples
    }

    /// A `tools/call` result whose text is `bytes` bytes long.
    fn big_result(&mut self, id: &Value, bytes: usize) {
        if self.big_text.len() != bytes {
            self.big_text = vec![b'x'; bytes];
        }
        let head = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#
        );
        write_all_vectored(&[
            IoSlice::new(head.as_bytes()),
            IoSlice::new(&self.big_text),
            IoSlice::new(b"\"}]}}\n"),
        ]);
    }
}

/// Whether `line` answers request `id`, for answers not in the expected form.
fn is_answer(line: &[u8], id: u64) -> bool {
    serde_json::from_slice::<Value>(line)
        .is_ok_and(|m| m.get("method").is_none() && m.get("id").and_then(Value::as_u64) == Some(id))
}

fn respond(id: &Value, result: Value) {
    write_line(
        json!({"jsonrpc": "2.0", "id": id, "result": result})
            .to_string()
            .as_bytes(),
    );
}

fn write_line(line: &[u8]) {
    write_all_vectored(&[IoSlice::new(line), IoSlice::new(b"\n")]);
}

/// Writes every slice to stdout with as few system calls as the pipe allows. Unbuffered on
/// purpose: each message must leave at once, and std's line buffering would copy large ones.
fn write_all_vectored(slices: &[IoSlice<'_>]) {
    let stdout = std::io::stdout();
    let fd = stdout.as_fd();
    let mut slices: Vec<IoSlice<'_>> = slices.to_vec();
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        match rustix::io::writev(fd, slices) {
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(rustix::io::Errno::INTR) => {}
            // The host went away: nothing left to do.
            Err(_) => std::process::exit(0),
        }
    }
}
