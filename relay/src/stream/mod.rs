//! Long lines from the server forwarded as they arrive, when their fate cannot depend on their
//! end: the proxy then holds a read's worth of a 1 MiB result instead of all of it.
//!
//! What decides a message's fate may be its last member (the TypeScript SDK writes
//! `{"result":…,"jsonrpc":"2.0","id":7}`), so a line is streamed only when every message it
//! could be would be forwarded unchanged: its `result` or `error` member starts before any
//! `method` (a response, not a batch; `jsonrpc` and `id` may come first, as most SDKs write
//! them, or last), and whatever its id, the relay would keep it as it is:
//! - the handshake era was negotiated (no 2026-07-28 `input_required` result to answer, and no
//!   era to learn from it) and the host's `initialize` is not waiting for its response (whose
//!   version the relay learns);
//! - the server has named itself (no identity to learn from a result's `_meta`);
//! - no request is relayed under another id or followed through rounds, and no probe of the
//!   proxy's own is in flight (`stateless`), and no replayed request awaits its answer
//!   (`restart`).
//!
//! The line still passes through the relay's bookkeeping once it ends ([`Relay::stream_end`]):
//! [`scan::Scan`] reads it as it goes by, and its `id` (wherever it stands) is retired from the
//! requests in flight exactly as the whole line would have been. How a streamed line may end
//! badly, and what the host then gets, so that it never sees two messages run together or an
//! answer twice:
//! - it is not one well-formed object (cut short by the server's exit, or malformed): the host
//!   gets the bytes and a newline, as the relay forwards any line it cannot read; nothing is
//!   retired, so a restart still answers the request with an error;
//! - it passes the longest line the proxy relays: the host's line ends there (one line it cannot
//!   parse), the rest is read but not forwarded, and once it ends the host gets the error
//!   response a discarded line gets ([`Relay::line_too_long`]), under the id read from the
//!   whole line;
//! - the proxy stops reading it (a restart stops the server mid-line): the host's line ends
//!   there; the request is still in flight and gets the restart's error.
//!
//! A line that starts like a response and then also has a `method` is no JSON-RPC message; it
//! was forwarded as it came, and nothing is done with it at its end.

mod scan;
#[cfg(test)]
mod tests;

use std::time::Instant;

use super::json;
use super::message::Msg;
use super::{Relay, Side};
use scan::{Kept, Scan, Seen};

/// A server line being forwarded as it arrives; see the module's documentation.
pub struct Streamed {
    scan: Scan,
    /// Bytes forwarded so far.
    forwarded: usize,
    /// The longest line the proxy relays.
    limit: usize,
    /// The line passed `limit`: nothing more is forwarded.
    over: bool,
}

/// What to do with one piece of a streamed line.
#[derive(Debug, PartialEq, Eq)]
pub struct Forward {
    /// How many of the piece's first bytes go to the host.
    pub bytes: usize,
    /// The line passed the limit with this piece: end the host's line after those bytes.
    pub cut: bool,
}

impl Streamed {
    /// The next bytes of the line: how many of them the host gets.
    pub fn part(&mut self, bytes: &[u8]) -> Forward {
        self.scan.feed(bytes);
        if self.over {
            return Forward {
                bytes: 0,
                cut: false,
            };
        }
        let room = self.limit - self.forwarded;
        if bytes.len() <= room {
            self.forwarded += bytes.len();
            return Forward {
                bytes: bytes.len(),
                cut: false,
            };
        }
        self.forwarded = self.limit;
        self.over = true;
        Forward {
            bytes: room,
            cut: true,
        }
    }

    /// Whether the line passed the limit (and the host's line was ended).
    pub fn is_over(&self) -> bool {
        self.over
    }
}

impl Relay {
    /// Whether a server line that begins with `prefix` (and has not ended) may be forwarded as
    /// it arrives, in pieces of at most `limit` bytes in all; `Some` with what follows it then.
    pub fn stream_from_server(&self, prefix: &[u8], limit: usize) -> Option<Streamed> {
        let settled = self.handshake.negotiated()
            && !self.handshake.initializing()
            && self.shared.state.server.is_some()
            && self.stateless.idle()
            && !self.restart.owns_any();
        (settled && starts_a_response(prefix)).then(|| Streamed {
            scan: Scan::new(),
            forwarded: 0,
            limit,
            over: false,
        })
    }

    /// A streamed line ended (a newline, or the end of the server's output): the bookkeeping the
    /// whole line would have had, and the error a line past the limit earns.
    pub fn stream_end(&mut self, streamed: Streamed, now: Instant) {
        self.shared.now = now;
        let over = streamed.over;
        let limit = streamed.limit;
        let Some(seen) = streamed.scan.finish() else {
            return;
        };
        let skeleton = skeleton(&seen);
        if over {
            // As for a discarded line: the members that matter lead the skeleton.
            return self.line_too_long(Side::Server, &skeleton, limit);
        }
        let Some(msg) = Msg::read(&skeleton) else {
            return;
        };
        if msg.is_response() {
            let mut roots_requests = Vec::new();
            // The fate is known to be "keep" (the relay was settled when the line began); what
            // matters is what the relay notes on the way.
            let _ = self.server_message(&msg, &mut roots_requests);
        }
    }
}

/// Whether `prefix` starts an object in which a `result` or `error` member (its key spelt in any
/// way JSON allows, and complete) comes before any `method`: after complete members of any
/// other name, such as the `jsonrpc` and `id` most SDKs write first.
fn starts_a_response(prefix: &[u8]) -> bool {
    let skip_ws = |mut pos: usize| {
        while prefix.get(pos).is_some_and(|b| json::is_ws(*b)) {
            pos += 1;
        }
        pos
    };
    let mut pos = skip_ws(0);
    if prefix.get(pos) != Some(&b'{') {
        return false;
    }
    pos += 1;
    loop {
        pos = skip_ws(pos);
        if prefix.get(pos) != Some(&b'"') {
            return false;
        }
        let Some(end) = json::string_end(prefix, pos) else {
            return false;
        };
        match json::decode_string(&prefix[pos..end]).as_str() {
            "result" | "error" => return true,
            "method" => return false,
            _ => {}
        }
        let Some(member) = json::member_at(prefix, pos) else {
            return false;
        };
        if member.value.end == prefix.len() {
            // A number or literal running to the end of the prefix may go on past it; nothing
            // that long comes before a result anyway.
            return false;
        }
        pos = skip_ws(member.whole.end);
        if prefix.get(pos) != Some(&b',') {
            return false;
        }
        pos += 1;
    }
}

/// The members of a scanned line that the relay reads, as a small message of their own: `id`
/// and `method` as they came (a `method` too long to keep stands as one no rule names, an `id`
/// too long to keep as none at all), `result` and `error` as `null`, which is all their
/// presence needs.
fn skeleton(seen: &Seen) -> Vec<u8> {
    let mut out = b"{".to_vec();
    let mut member = |key: &str, value: &[u8]| {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(format!("\"{key}\":").as_bytes());
        out.extend_from_slice(value);
    };
    match &seen.id {
        Some(Kept::Bytes(id)) => member("id", id),
        Some(Kept::TooLong) | None => {}
    }
    match &seen.method {
        Some(Kept::Bytes(method)) => member("method", method),
        Some(Kept::TooLong) => member("method", b"\"\""),
        None => {}
    }
    if seen.result {
        member("result", b"null");
    }
    if seen.error {
        member("error", b"null");
    }
    out.push(b'}');
    out
}
