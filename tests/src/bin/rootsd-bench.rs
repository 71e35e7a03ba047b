//! rootsd's benchmark. Every figure is a ratio against a baseline measured in the same run,
//! because these machines are noisy; absolute numbers are printed for context only.
//!
//! Run with `cargo run --release -p rootsd-tests --bin rootsd-bench` after
//! `cargo build --release --workspace --bins`. Needs python3 (for the scripted server).
//!
//! 1. `roots/list` through the proxy (answered from the proxy's memory) against a request the
//!    proxy relays to the host and back (the cheapest round trip a server can make).
//! 2. Daemon memory per registered session against memory per plain greeted connection, with
//!    thousands of each.
//! 3. Fan-out: time from a change's acknowledgement until every one of N sessions has received
//!    it, against one `status` round trip.
//! 4. Large results (1 MiB each) from server to host through the proxy, against reading them
//!    straight from the server.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rootsd_tests::{RawClient, Sandbox, raise_fd_limit, rss_kib};
use serde_json::json;

const SERVER_SCRIPT: &str = r#"
import json, sys, time
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def recv():
    return json.loads(sys.stdin.readline())
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "bench", "version": "1"}}})
    elif msg.get("method") == "bench/big":
        text = "x" * msg["params"]["bytes"]
        for i in range(msg["params"]["count"]):
            send({"jsonrpc": "2.0", "id": f"big-{i}", "result": {"content": [{"type": "text", "text": text}]}})
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
    elif msg.get("method") == "bench/run":
        n = msg["params"]["n"]
        timings = {}
        for kind in ("roots/list", "bench/echo"):
            samples = []
            for i in range(n):
                start = time.perf_counter()
                send({"jsonrpc": "2.0", "id": f"{kind}-{i}", "method": kind})
                recv()
                samples.append(time.perf_counter() - start)
            samples.sort()
            timings[kind] = samples
        send({"jsonrpc": "2.0", "id": msg["id"], "result": timings})
"#;

fn main() {
    raise_fd_limit();
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon();
    let root = sandbox.mkdir("ws/project");
    sandbox.ctl_ok(&["add", root.to_str().expect("UTF-8 path")]);

    println!(
        "rootsd benchmark ({} cores)\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    roots_list_latency(&sandbox);
    session_memory(&sandbox, 2000);
    fan_out(&sandbox, 1000);
    large_results(&sandbox);
}

/// Time for the host to receive `count` results of `bytes` each from the bench server, through
/// the proxy or (`proxied` false) straight from the server's stdout.
fn stream_big_results(sandbox: &Sandbox, proxied: bool, count: usize, bytes: usize) -> Duration {
    let script = sandbox.path().join("bench_server.py");
    let mut cmd = if proxied {
        let mut cmd = sandbox.rootsctl();
        cmd.args(["proxy", "--", "python3"]);
        cmd
    } else {
        std::process::Command::new("python3")
    };
    let mut child = cmd
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the bench server");
    let mut to_child = child.stdin.take().expect("piped stdin");
    let mut from_child = BufReader::new(child.stdout.take().expect("piped stdout"));
    writeln!(
        to_child,
        "{}",
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}})
    )
    .expect("write");
    let mut line = String::new();
    from_child.read_line(&mut line).expect("initialize result");
    let start = Instant::now();
    writeln!(
        to_child,
        "{}",
        json!({"jsonrpc":"2.0","id":1,"method":"bench/big","params":{"count":count,"bytes":bytes}})
    )
    .expect("write");
    for _ in 0..=count {
        line.clear();
        from_child.read_line(&mut line).expect("a result");
    }
    let elapsed = start.elapsed();
    drop(to_child);
    let _ = child.kill();
    let _ = child.wait();
    elapsed
}

fn large_results(sandbox: &Sandbox) {
    let (count, bytes) = (200, 1 << 20);
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    for _ in 0..3 {
        direct.push(stream_big_results(sandbox, false, count, bytes));
        proxied.push(stream_big_results(sandbox, true, count, bytes));
    }
    direct.sort();
    proxied.sort();
    let (direct, proxied) = (direct[1].as_secs_f64(), proxied[1].as_secs_f64());
    println!("\n4. {count} results of 1 MiB each, server to host (median of 3)");
    println!(
        "   through the proxy:                    {:.0} ms",
        proxied * 1e3
    );
    println!(
        "   baseline, straight from the server:   {:.0} ms",
        direct * 1e3
    );
    println!(
        "   ratio proxy / direct:                 {:.2}",
        proxied / direct
    );
}

fn roots_list_latency(sandbox: &Sandbox) {
    let script = sandbox.path().join("bench_server.py");
    std::fs::write(&script, SERVER_SCRIPT).expect("write the bench server");
    let mut proxy = sandbox
        .rootsctl()
        .args(["proxy", "--"])
        .arg("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start rootsctl proxy");
    let mut to_proxy = proxy.stdin.take().expect("piped stdin");
    let mut from_proxy = BufReader::new(proxy.stdout.take().expect("piped stdout"));
    let mut send = |value: serde_json::Value| {
        writeln!(to_proxy, "{value}").expect("write to the proxy");
        to_proxy.flush().expect("flush to the proxy");
    };
    send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}),
    );
    let mut line = String::new();
    from_proxy.read_line(&mut line).expect("initialize result");
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    let n = 5000;
    send(json!({"jsonrpc":"2.0","id":1,"method":"bench/run","params":{"n":n}}));
    let result = loop {
        line.clear();
        from_proxy
            .read_line(&mut line)
            .expect("a line from the proxy");
        let message: serde_json::Value = serde_json::from_str(&line).expect("JSON from the proxy");
        if message["method"] == "bench/echo" {
            send(json!({"jsonrpc":"2.0","id":message["id"],"result":{}}));
        } else if message["id"] == 1 {
            break message["result"].clone();
        }
    };
    drop(to_proxy);
    let _ = proxy.kill();
    let _ = proxy.wait();
    let quantile = |kind: &str, q: f64| {
        let samples = result[kind].as_array().expect("samples");
        samples[((samples.len() as f64 - 1.0) * q) as usize]
            .as_f64()
            .expect("a number")
            * 1e6
    };
    let (roots50, roots99) = (quantile("roots/list", 0.5), quantile("roots/list", 0.99));
    let (echo50, echo99) = (quantile("bench/echo", 0.5), quantile("bench/echo", 0.99));
    println!("1. roots/list through the proxy, {n} requests from a python server");
    println!("   roots/list (answered by the proxy):  p50 {roots50:7.1} µs  p99 {roots99:7.1} µs");
    println!("   baseline (relayed to host and back): p50 {echo50:7.1} µs  p99 {echo99:7.1} µs");
    println!(
        "   ratio roots/list / baseline:         p50 {:.2}        p99 {:.2}\n",
        roots50 / echo50,
        roots99 / echo99
    );
}

fn session_memory(sandbox: &Sandbox, n: usize) {
    let pid = daemon_pid(sandbox);
    let before = rss_kib(pid);
    let mut plain: Vec<RawClient> = (0..n).map(|_| sandbox.connect()).collect();
    let with_plain = rss_kib(pid);
    let mut sessions: Vec<RawClient> = (0..n)
        .map(|i| {
            let mut client = sandbox.connect();
            let reply = client.request(
                "session.register",
                json!({"workspace":"default","label":format!("bench-{i}"),"pid":std::process::id(),"list_changed":true}),
            );
            assert!(reply.get("result").is_some(), "register failed: {reply}");
            client
        })
        .collect();
    let with_sessions = rss_kib(pid);
    let per_connection = (with_plain - before) as f64 * 1024.0 / n as f64;
    let per_session = (with_sessions - with_plain) as f64 * 1024.0 / n as f64;
    println!("2. daemon memory, {n} greeted connections then {n} registered sessions");
    println!("   idle daemon RSS:                      {before} KiB");
    println!("   per greeted connection (baseline):    {per_connection:.0} bytes");
    println!("   per registered session:               {per_session:.0} bytes");
    println!(
        "   ratio session / connection:           {:.2}\n",
        per_session / per_connection
    );
    plain.clear();
    sessions.truncate(0);
}

fn fan_out(sandbox: &Sandbox, n: usize) {
    let mut sessions: Vec<RawClient> = (0..n)
        .map(|_| {
            let mut client = sandbox.connect();
            client.request(
                "session.register",
                json!({"workspace":"fan","pid":std::process::id(),"list_changed":true}),
            );
            client
        })
        .collect();
    let mut control = sandbox.connect();
    let rounds = 20;
    let mut fan = Vec::with_capacity(rounds);
    let mut status = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let start = Instant::now();
        control.request("status", json!({}));
        status.push(start.elapsed());
        let dir = sandbox.mkdir(&format!("fan/{round}"));
        let start = Instant::now();
        let reply = control.request(
            "roots.add",
            json!({"workspace":"fan","roots":[{"uri":format!("file://{}", dir.display())}]}),
        );
        assert!(reply.get("result").is_some(), "add failed: {reply}");
        for session in &mut sessions {
            let pushed = session.read_json();
            assert_eq!(pushed["method"], "roots.changed");
        }
        fan.push(start.elapsed());
    }
    fan.sort();
    status.sort();
    let median = |v: &[Duration]| v[v.len() / 2].as_secs_f64() * 1e3;
    println!("3. fan-out of one change to {n} sessions, {rounds} changes");
    println!(
        "   add acknowledged + all {n} received:  median {:.2} ms",
        median(&fan)
    );
    println!(
        "   baseline, one status round trip:      median {:.3} ms",
        median(&status)
    );
    println!(
        "   ratio fan-out / round trip:           {:.0}",
        median(&fan) / median(&status)
    );
    println!(
        "   per session:                          {:.1} µs",
        median(&fan) * 1e3 / n as f64
    );
}

fn daemon_pid(sandbox: &Sandbox) -> i32 {
    let status: serde_json::Value =
        serde_json::from_str(&sandbox.ctl_ok(&["status", "--json"])).expect("status JSON");
    status["pid"].as_i64().expect("a pid") as i32
}
