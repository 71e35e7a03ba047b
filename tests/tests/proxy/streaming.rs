//! Results far larger than a read go from the server to the host as they arrive: intact, in
//! order with the messages around them, without the proxy holding them whole; and one cut off
//! by the server's death leaves the host a stream of whole lines.

use serde_json::json;

use crate::support::{FakeSession, FakeSetup};

/// What the fake's `big` tool writes: its text, as it stands in the line (escapes included).
fn big_text(size: usize) -> String {
    let unit = r#"abcdefghijklmnopqrstuvwxy\"z"#;
    let mut text = unit.repeat(size / unit.len() + 1);
    text.truncate(size);
    text.trim_end_matches('\\').to_owned()
}

/// The line of the fake's `big` result for request `id`, without its newline.
fn big_line(size: usize, id: &str) -> String {
    format!(
        r#"{{"result":{{"content":[{{"type":"text","text":"{}"}}]}},"jsonrpc":"2.0","id":{id}}}"#,
        big_text(size)
    )
}

/// The proxy's peak resident memory so far, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read its status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in:\n{status}"))
}

const SIZE: usize = 8 << 20;

#[test]
fn an_eight_mib_result_reaches_the_host_intact_between_its_neighbours_in_bounded_memory() {
    let mut fake = FakeSession::start("quiet", FakeSetup::default());
    let proxy = &mut fake.proxy;
    proxy.initialize();
    let round = proxy.request("ping", json!({}));
    assert_eq!(round["result"], json!({}));
    let before = peak_kib(proxy.pid());

    proxy.send(&json!({"jsonrpc":"2.0","id":"big","method":"tools/call",
        "params":{"name":"big","arguments":{"bytes": SIZE}}}));
    let (first, _) = proxy.next_message_with_line();
    assert_eq!(first["params"]["data"], "before big", "{first}");
    let (result, line) = proxy.next_message_with_line();
    assert_eq!(result["id"], "big");
    assert!(
        line == big_line(SIZE, r#""big""#),
        "the result was changed on its way ({} bytes, expected {})",
        line.len(),
        big_line(SIZE, r#""big""#).len()
    );
    let (after, _) = proxy.next_message_with_line();
    assert_eq!(after["params"]["data"], "after big", "{after}");
    // The request was retired by the id at the result's end: the session goes on as before.
    let round = proxy.request("ping", json!({}));
    assert_eq!(round["result"], json!({}));

    // Held whole, the line alone would have added 8 MiB. Streamed, the proxy holds a read at a
    // time and the queue toward the host (1 MiB past its high-water mark at most).
    let grown = peak_kib(proxy.pid()).saturating_sub(before);
    assert!(
        grown < 4 << 10,
        "the proxy's peak RSS grew by {grown} KiB relaying an 8 MiB result"
    );
}

#[test]
fn a_result_cut_off_by_the_servers_death_ends_the_hosts_stream_with_a_whole_line() {
    let mut fake = FakeSession::start("quiet", FakeSetup::default());
    let proxy = &mut fake.proxy;
    proxy.initialize();
    proxy.send(&json!({"jsonrpc":"2.0","id":"big","method":"tools/call",
        "params":{"name":"big","arguments":{"bytes": SIZE, "cut": true}}}));
    let (first, _) = proxy.next_message_with_line();
    assert_eq!(first["params"]["data"], "before big", "{first}");
    // The half the server wrote, on a line of its own: the host's reader refuses that one line
    // and nothing after it runs into it.
    let whole = format!("{}\n", big_line(SIZE, r#""big""#));
    let half = &whole.as_bytes()[..whole.len() / 2];
    let cut = proxy.next_raw_line();
    assert!(
        cut == half,
        "the host got {} bytes of the cut line, expected {}",
        cut.len(),
        half.len()
    );
    // The server's exit ends the session.
    proxy.wait_exit();
}

#[test]
fn a_result_past_the_line_limit_ends_the_hosts_line_there_and_gets_the_error_for_its_id() {
    let mut fake = FakeSession::start("quiet", FakeSetup::default());
    let proxy = &mut fake.proxy;
    proxy.initialize();
    // 17 MiB: over the proxy's 16 MiB limit. Its id comes last, after the limit.
    let size = 17 << 20;
    proxy.send(&json!({"jsonrpc":"2.0","id":"huge","method":"tools/call",
        "params":{"name":"big","arguments":{"bytes": size}}}));
    let (first, _) = proxy.next_message_with_line();
    assert_eq!(first["params"]["data"], "before big", "{first}");
    let cut = proxy.next_raw_line();
    let whole = big_line(size, r#""huge""#);
    assert!(
        cut == whole.as_bytes()[..16 << 20],
        "the host got {} bytes of the long line, expected its first 16 MiB",
        cut.len()
    );
    let refused = proxy.next_message();
    assert_eq!(refused["id"], "huge", "{refused}");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let (after, _) = proxy.next_message_with_line();
    assert_eq!(after["params"]["data"], "after big", "{after}");
    let round = proxy.request("ping", json!({}));
    assert_eq!(round["result"], json!({}));
}
