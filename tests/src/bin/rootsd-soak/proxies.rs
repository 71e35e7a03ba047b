//! The soak's proxies: real `rootsctl proxy` processes, each running the scripted server, started
//! and stopped a few at a time while the roots change. The soak plays their host: it initializes
//! each one, asks its server what roots it holds (`tools/call`), and closes its stdin to end it.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rootsd_tests::Sandbox;
use serde_json::{Value, json};

use crate::WORKSPACE;

/// How long a proxy or its server may take to answer the host.
const ANSWER_PATIENCE: Duration = Duration::from_secs(10);

/// One proxy, with the soak as its host.
pub struct Proxy {
    pub label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    stderr: Option<std::thread::JoinHandle<String>>,
    next_id: u64,
    leaves_at: Instant,
}

/// What happened to the proxies that came and went.
#[derive(Default)]
pub struct Tally {
    pub started: usize,
    /// Ended cleanly: answered until the end and exited 0 after stdin closed.
    pub finished: usize,
    pub failures: Vec<String>,
}

impl Proxy {
    /// Starts `rootsctl proxy` with the scripted server and initializes it.
    pub fn start(sandbox: &Sandbox, label: String, lifetime: Duration) -> Result<Self, String> {
        let server = std::env::current_exe().expect("the soak knows its own path");
        let mut child = sandbox
            .rootsctl()
            .args(["proxy", "--workspace", WORKSPACE, "--name", &label, "--"])
            .arg(server)
            .arg("--mcp-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{label}: cannot start rootsctl proxy: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    break;
                };
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            text
        });
        let mut proxy = Self {
            label,
            stdin: child.stdin.take(),
            child,
            lines,
            stderr: Some(stderr),
            next_id: 0,
            leaves_at: Instant::now() + lifetime,
        };
        proxy.call(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "rootsd-soak", "version": "1"}}),
        )?;
        proxy.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(proxy)
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        let stdin = self.stdin.as_mut().expect("stdin is open until the end");
        writeln!(stdin, "{message}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("{}: writing to the proxy: {e}", self.label))
    }

    /// Sends a request and waits for its response's result.
    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + ANSWER_PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(message) if message["id"] == json!(id) => {
                    return message
                        .get("result")
                        .cloned()
                        .ok_or_else(|| format!("{}: {method} failed: {message}", self.label));
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "{}: no answer to {method} within {ANSWER_PATIENCE:?}",
                        self.label
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("{}: the proxy closed stdout", self.label));
                }
            }
        }
    }

    /// The roots the server holds, and how many times it asked for them.
    pub fn server_roots(&mut self) -> Result<(BTreeSet<String>, u64), String> {
        let result = self.call("tools/call", json!({"name": "roots", "arguments": {}}))?;
        let roots = result["roots"]
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|r| r["uri"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Ok((roots, result["asked"].as_u64().unwrap_or(0)))
    }

    /// Closes the proxy's stdin, as a host that is done does, and waits for it to exit 0.
    pub fn finish(mut self) -> Result<(), String> {
        drop(self.stdin.take());
        let deadline = Instant::now() + ANSWER_PATIENCE;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("poll the proxy") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(format!("{}: still running after stdin closed", self.label));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let stderr = self
            .stderr
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        if status.success() {
            Ok(())
        } else {
            Err(format!("{}: exited with {status}: {stderr}", self.label))
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Keeps `concurrent` proxies alive, each for a drawn 1 to 4 seconds, until `stop`; returns the
/// tally and the proxies still alive then, which the soak checks last.
pub fn churn(
    sandbox: &Sandbox,
    concurrent: usize,
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
) -> Vec<Proxy> {
    let mut live: Vec<Proxy> = Vec::new();
    let mut started = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        let (leaving, staying): (Vec<Proxy>, Vec<Proxy>) =
            live.into_iter().partition(|p| p.leaves_at <= now);
        live = staying;
        for mut proxy in leaving {
            let outcome = proxy
                .server_roots()
                .and_then(|(_, asked)| {
                    if asked == 0 {
                        Err(format!("{}: its server never asked for roots", proxy.label))
                    } else {
                        Ok(())
                    }
                })
                .and_then(|()| proxy.finish());
            let mut tally = tally.lock().expect("the tally");
            match outcome {
                Ok(()) => tally.finished += 1,
                Err(reason) => tally.failures.push(reason),
            }
        }
        while live.len() < concurrent && !stop.load(Ordering::SeqCst) {
            started += 1;
            let lifetime = Duration::from_millis(1000 + crate::random_below(3000));
            match Proxy::start(sandbox, format!("soak-proxy-{started}"), lifetime) {
                Ok(proxy) => live.push(proxy),
                Err(reason) => tally.lock().expect("the tally").failures.push(reason),
            }
            tally.lock().expect("the tally").started += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    live
}
