//! The host side of an MCP session with `bench-server`: spawn it directly, behind
//! `rootsctl proxy`, or behind `limit-relay`, then drive it. The host answers the server's
//! requests itself: `bench/echo` with an empty result, `roots/list` from a list it keeps in
//! memory, in the same form as the proxy's answer.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use rootsd_tests::Sandbox;
use serde_json::{Value, json};

use crate::procs::helper;

/// How many large results a host has asked for and not yet received, at most.
pub const IN_FLIGHT: usize = 4;

/// What sits between the host and the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Nothing: the host holds the server's pipes.
    Direct,
    /// `rootsctl proxy --workspace W -- bench-server`.
    Proxy,
    /// `rootsctl proxy --workspace W -- bench-server {root}`: started from the workspace, and
    /// restarted when its first root changes.
    ProxyTemplated,
    /// `limit-relay bench-server`.
    LimitRelay,
    /// `limit-roots-proxy RESULT bench-server`: the cheapest process in the proxy's place,
    /// answering `roots/list` itself.
    LimitRootsProxy,
}

/// How much the host asks of each read of its session's stdout.
const HOST_READ: usize = 64 << 10;

/// One session: the process the host talks to and its pipes. Killed when dropped.
pub struct Mcp {
    child: Child,
    to: Option<ChildStdin>,
    from: BufReader<ChildStdout>,
    line: Vec<u8>,
    next_id: u64,
    /// The `result` of the host's `roots/list` answers: `{"roots":[…]}`.
    roots: Arc<String>,
}

impl Mcp {
    /// Starts the session's processes. Nothing is read or written yet.
    pub fn spawn(sandbox: &Sandbox, via: Via, workspace: &str, roots: Arc<String>) -> Result<Self> {
        let server = rootsd_tests::bin("bench-server");
        let mut cmd = match via {
            Via::Direct => helper("bench-server"),
            Via::Proxy | Via::ProxyTemplated => {
                let mut cmd = sandbox.rootsctl();
                cmd.args(["proxy", "--workspace", workspace, "--name", "bench", "--"])
                    .arg(&server);
                if via == Via::ProxyTemplated {
                    cmd.arg("{root}");
                }
                cmd
            }
            Via::LimitRelay => {
                let mut cmd = helper("limit-relay");
                cmd.arg(&server);
                cmd
            }
            Via::LimitRootsProxy => {
                let mut cmd = helper("limit-roots-proxy");
                cmd.arg(roots.as_str()).arg(&server);
                cmd
            }
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("start the MCP session ({via:?})"))?;
        Ok(Self {
            to: child.stdin.take(),
            // A host reads its server's stdout a pipe's worth at a time, 64 KiB, as Node's
            // streams (libuv) do. `BufReader`'s default of 8 KiB would wake the relay writing a
            // 1 MiB result 128 times, as no host the proxy serves does.
            from: BufReader::with_capacity(HOST_READ, child.stdout.take().expect("piped stdout")),
            child,
            line: Vec::new(),
            next_id: 1,
            roots,
        })
    }

    /// The process the host talks to: the proxy, the relay, or the server itself.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `initialize`, its answer, then `notifications/initialized`.
    pub fn initialize(&mut self) -> Result<()> {
        self.call(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"roots": {"listChanged": true}},
                "clientInfo": {"name": "rootsd-bench", "version": "1"},
            }),
        )?;
        self.write(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
    }

    /// Sends a request and returns its result, answering the server's requests meanwhile.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.start(method, params)?;
        self.finish(id)
    }

    /// Sends a request; [`Mcp::finish`] waits for its result.
    pub fn start(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(request.to_string().as_bytes())?;
        Ok(id)
    }

    /// Serves the server's requests until the answer to `id` arrives; returns its result.
    pub fn finish(&mut self, id: u64) -> Result<Value> {
        loop {
            self.read_line()?;
            if let Some(asked) = request_id(&self.line) {
                let answer = if self.line.windows(12).any(|w| w == b"\"roots/list\"") {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":{asked},"result":{}}}"#,
                        self.roots
                    )
                } else {
                    format!(r#"{{"jsonrpc":"2.0","id":{asked},"result":{{}}}}"#)
                };
                self.write(answer.as_bytes())?;
                continue;
            }
            let message: Value = serde_json::from_slice(&self.line).with_context(|| {
                format!(
                    "the session sent a line that is not JSON: {}",
                    String::from_utf8_lossy(&self.line)
                )
            })?;
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("request {id} failed: {error}");
            }
            return Ok(message["result"].clone());
        }
    }

    /// Round-trip samples (µs) of `n` requests the server sends the host one after another:
    /// `bench/echo` (relayed to this host) or `roots/list`.
    pub fn server_round_trips(&mut self, run: &str, n: usize) -> Result<Vec<f64>> {
        let result = self.call(run, json!({ "n": n }))?;
        samples_of(&result, n)
    }

    /// Asks for `count` results of `bytes` each, keeping [`IN_FLIGHT`] requests outstanding as
    /// a host running parallel tool calls would, and returns how long it took until the last
    /// byte of the last one had been read.
    pub fn large_results(&mut self, count: usize, bytes: usize) -> Result<Duration> {
        let start = Instant::now();
        let mut asked = 0;
        let mut lines = 0;
        let mut total = 0usize;
        self.ask_large(IN_FLIGHT.min(count), bytes)?;
        asked += IN_FLIGHT.min(count);
        while lines < count {
            // Counts lines straight from the buffer: the host does no more work than it must,
            // so the relays' costs are not hidden behind the host's.
            let chunk = self.from.fill_buf().context("read a large result")?;
            ensure!(!chunk.is_empty(), "the session ended during large results");
            let len = chunk.len();
            let done = chunk.iter().filter(|&&b| b == b'\n').count();
            self.from.consume(len);
            lines += done;
            total += len;
            let more = done.min(count - asked);
            if more > 0 {
                self.ask_large(more, bytes)?;
                asked += more;
            }
        }
        let elapsed = start.elapsed();
        ensure!(
            total >= count * bytes,
            "read {total} bytes of {count} results of {bytes}"
        );
        Ok(elapsed)
    }

    fn ask_large(&mut self, count: usize, bytes: usize) -> Result<()> {
        let mut requests = Vec::new();
        for _ in 0..count {
            let id = self.next_id;
            self.next_id += 1;
            writeln!(
                requests,
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read","arguments":{{"bytes":{bytes}}}}}}}"#
            )?;
        }
        let to = self.to.as_mut().expect("open until drop");
        to.write_all(&requests)?;
        to.flush()?;
        Ok(())
    }

    fn write(&mut self, line: &[u8]) -> Result<()> {
        let to = self.to.as_mut().expect("open until drop");
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line);
        bytes.push(b'\n');
        to.write_all(&bytes)
            .and_then(|()| to.flush())
            .context("write to the MCP session")
    }

    fn read_line(&mut self) -> Result<()> {
        self.line.clear();
        let n = self
            .from
            .read_until(b'\n', &mut self.line)
            .context("read from the MCP session")?;
        if n == 0 {
            let status = self.child.wait()?;
            bail!("the MCP session ended ({status})");
        }
        Ok(())
    }
}

impl Mcp {
    /// MCP's stdio shutdown: closes the server's stdin and waits for it to exit, as a host (or
    /// the proxy restarting its server) does.
    pub fn stop(mut self) -> Result<std::process::ExitStatus> {
        self.to = None;
        Ok(self.child.wait()?)
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        // Closing stdin is MCP's stdio shutdown; the kill makes sure.
        self.to = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The id of a request bench-server sends (`{"jsonrpc":"2.0","id":N,"method":…`), found
/// without parsing: the host's work per relayed request stays a few comparisons.
fn request_id(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(br#"{"jsonrpc":"2.0","id":"#)?;
    let end = rest.iter().position(|&b| b == b',')?;
    if !rest[end..].starts_with(br#","method":"#) {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()
}

/// The samples of a `bench/*-run` result, in microseconds.
pub fn samples_of(result: &Value, n: usize) -> Result<Vec<f64>> {
    let samples: Vec<f64> = result["samples"]
        .as_array()
        .context("a run result without samples")?
        .iter()
        .filter_map(Value::as_f64)
        .map(|ns| ns / 1e3)
        .collect();
    ensure!(
        samples.len() == n,
        "expected {n} samples, got {}",
        samples.len()
    );
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_found_only_in_requests() {
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0","id":17,"method":"bench/echo"}"#),
            Some("17")
        );
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0","id":17,"result":{}}"#),
            None
        );
        assert_eq!(request_id(br#"{"id":1,"jsonrpc":"2.0"}"#), None);
    }
}
