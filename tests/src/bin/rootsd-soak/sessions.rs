//! The soak's registered sessions: raw control-protocol connections that each registered an MCP
//! session, read by one thread that polls them all and keeps, per session, the last list the
//! daemon pushed.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::WORKSPACE;

/// One registered session, as its reader sees it.
struct Session {
    stream: UnixStream,
    /// Bytes of a line not complete yet.
    partial: Vec<u8>,
    revision: u64,
    /// [`digest`] of the roots last pushed.
    roots: u64,
}

/// A `roots.changed` push, read without building a tree of values: the reader handles twenty
/// thousand a second.
#[derive(serde::Deserialize)]
struct Push<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: PushParams<'a>,
}

#[derive(serde::Deserialize)]
struct PushParams<'a> {
    revision: u64,
    #[serde(borrow)]
    roots: Vec<PushRoot<'a>>,
}

#[derive(serde::Deserialize)]
struct PushRoot<'a> {
    #[serde(borrow)]
    uri: Cow<'a, str>,
}

/// A fingerprint of a set of URIs that does not depend on their order.
pub fn digest<'a>(uris: impl IntoIterator<Item = &'a str>) -> u64 {
    let hasher = BuildHasherDefault::<DefaultHasher>::default();
    uris.into_iter().fold(0x5eed_u64, |sum, uri| {
        sum.wrapping_add(hasher.hash_one(uri))
    })
}

/// When the writer had each revision acknowledged, for the delivery latency of pushes.
pub type AckTimes = Arc<Mutex<HashMap<u64, Instant>>>;

/// What the reader found.
pub struct Report {
    pub sessions: usize,
    pub pushes: u64,
    /// Delivery latency of each push (from the change's acknowledgement), in microseconds.
    pub latencies_us: Vec<u64>,
    /// Sessions whose last list is the final one.
    pub converged: usize,
    /// How long after the last change the last session converged.
    pub converged_after: Option<Duration>,
}

/// Opens `count` connections to `socket`, each greeted and registered as a session of the soak's
/// workspace.
pub fn register(socket: &Path, count: usize) -> Vec<UnixStream> {
    (0..count)
        .map(|i| {
            let stream = UnixStream::connect(socket).expect("connect to rootsd");
            stream
                .set_read_timeout(Some(Duration::from_secs(20)))
                .expect("set a timeout");
            let mut writer = stream.try_clone().expect("clone the stream");
            let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
            let mut call = |id: u64, method: &str, params: Value| {
                let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                writeln!(writer, "{line}").expect("send a request");
                let mut answer = String::new();
                reader.read_line(&mut answer).expect("read the answer");
                let answer: Value = serde_json::from_str(&answer).expect("JSON from rootsd");
                assert!(answer.get("result").is_some(), "{method} failed: {answer}");
            };
            call(1, "hello", json!({"protocol_version": rootsd_tests::PROTOCOL_VERSION, "client": "rootsd-soak"}));
            call(
                2,
                "session.register",
                json!({"workspace": WORKSPACE, "label": format!("soak-{i}"), "pid": std::process::id(),
                       "state": {"list_changed": true, "era": "handshake", "initialized": true}}),
            );
            assert!(
                reader.buffer().is_empty(),
                "nothing is pushed before the first change"
            );
            stream
        })
        .collect()
}

/// Reads every session's pushes until `stop`, then until every session holds the final list
/// (sent through `finish` once the writer is done) or `patience` passes. Returns the
/// connections too, still open, so that the sessions outlive the reading.
pub fn read(
    streams: Vec<UnixStream>,
    acks: AckTimes,
    finish: Receiver<(u64, BTreeSet<String>, Instant)>,
    patience: Duration,
    stop: Arc<AtomicBool>,
) -> (Report, Vec<UnixStream>) {
    let mut sessions: Vec<Session> = streams
        .into_iter()
        .map(|stream| {
            stream
                .set_nonblocking(true)
                .expect("make a session non-blocking");
            Session {
                stream,
                partial: Vec::new(),
                revision: 0,
                roots: digest([]),
            }
        })
        .collect();
    let mut report = Report {
        sessions: sessions.len(),
        pushes: 0,
        latencies_us: Vec::new(),
        converged: 0,
        converged_after: None,
    };
    let mut target: Option<(u64, BTreeSet<String>, Instant)> = None;
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        let readable: Vec<usize> = {
            use rustix::event::{PollFd, PollFlags, Timespec, poll};
            let mut fds: Vec<PollFd<'_>> = sessions
                .iter()
                .map(|s| PollFd::new(&s.stream, PollFlags::IN))
                .collect();
            let timeout = Timespec {
                tv_sec: 0,
                tv_nsec: 50_000_000,
            };
            poll(&mut fds, Some(&timeout)).expect("poll the sessions");
            fds.iter()
                .enumerate()
                .filter(|(_, fd)| !fd.revents().is_empty())
                .map(|(i, _)| i)
                .collect()
        };
        for index in readable {
            let session = &mut sessions[index];
            loop {
                match session.stream.read(&mut buffer) {
                    Ok(0) => panic!("rootsd closed session {index}'s connection"),
                    Ok(n) => session.partial.extend_from_slice(&buffer[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("reading session {index}: {e}"),
                }
            }
            while let Some(end) = session.partial.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = session.partial.drain(..=end).collect();
                let push: Push<'_> = serde_json::from_slice(&line).unwrap_or_else(|e| {
                    panic!("rootsd pushed {}: {e}", String::from_utf8_lossy(&line))
                });
                assert_eq!(push.method, "roots.changed");
                let revision = push.params.revision;
                assert!(
                    revision > session.revision,
                    "session {index} got revision {revision} after {}",
                    session.revision
                );
                session.revision = revision;
                session.roots = digest(push.params.roots.iter().map(|r| &*r.uri));
                report.pushes += 1;
                if let Some(acked) = acks.lock().expect("ack times").get(&revision) {
                    report
                        .latencies_us
                        .push(acked.elapsed().as_micros().try_into().unwrap_or(u64::MAX));
                }
            }
        }
        if target.is_none() && stop.load(Ordering::SeqCst) {
            match finish.try_recv() {
                Ok(last) => target = Some(last),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => return (report, streams_of(sessions)),
            }
        }
        if let Some((revision, roots, since)) = &target {
            let roots = digest(roots.iter().map(String::as_str));
            report.converged = sessions
                .iter()
                .filter(|s| s.revision == *revision && s.roots == roots)
                .count();
            if report.converged == sessions.len() {
                report.converged_after = Some(since.elapsed());
                return (report, streams_of(sessions));
            }
            if since.elapsed() > patience {
                return (report, streams_of(sessions));
            }
        }
    }
}

fn streams_of(sessions: Vec<Session>) -> Vec<UnixStream> {
    sessions.into_iter().map(|s| s.stream).collect()
}
