//! Helpers shared by the core tests.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use rootsd_tests::{PATIENCE, Sandbox, eventually};
use serde_json::Value;

pub use rootsd_tests::{AutostartGuard, Reaped, assert_exit, stderr_of, stdout_of};

/// Runs `rootsctl ARGS`, which must print one JSON value and succeed, and parses it.
#[track_caller]
pub fn ctl_json(sandbox: &Sandbox, args: &[&str]) -> Value {
    let output = sandbox.ctl(args);
    assert_exit(&output, 0, &format!("rootsctl {args:?}"));
    let text = stdout_of(&output);
    assert_eq!(
        text.lines().count(),
        1,
        "rootsctl {args:?} printed more than one line: {text}"
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?} printed {text:?}: {e}"))
}

/// `rootsctl status --json`.
pub fn status(sandbox: &Sandbox) -> Value {
    ctl_json(sandbox, &["status", "--json"])
}

/// The URIs of `roots` (the `roots` array of `list --json`), in order.
pub fn uris(roots: &[Value]) -> Vec<String> {
    roots
        .iter()
        .map(|r| {
            r["uri"]
                .as_str()
                .expect("every root has a string uri")
                .to_owned()
        })
        .collect()
}

/// The `file://` URI of a path made only of characters no URI encodes, written out by hand so
/// that expectations do not depend on the code under test.
#[track_caller]
pub fn plain_uri(path: &Path) -> String {
    let text = path.to_str().expect("a UTF-8 path");
    assert!(
        text.starts_with('/')
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/_.-".contains(&b)),
        "{text} needs percent-encoding; use a plainer name in the test"
    );
    format!("file://{text}")
}

/// The path a `file://` URI names, decoded by the `url` crate rather than by rootsd's own code.
#[track_caller]
pub fn decode(uri: &str) -> PathBuf {
    url::Url::parse(uri)
        .unwrap_or_else(|e| panic!("{uri} is not a URI: {e}"))
        .to_file_path()
        .unwrap_or_else(|()| panic!("{uri} is not a local file URI"))
}

/// Reads a child's output line by line in a thread, so that a test can wait for a line with a
/// deadline. The channel disconnects when the child closes it (usually by exiting).
pub fn lines_of(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// Runs `cmd` with its stdout a pipe whose reading end is already closed (`cmd | true`), and
/// returns how it exited and what it wrote to stderr.
pub fn run_into_closed_pipe(cmd: &mut Command) -> Output {
    let (reader, writer) = std::io::pipe().expect("create a pipe");
    // Closed before the child exists, so that its first write fails with EPIPE every time.
    drop(reader);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command");
    let mut stderr_pipe = child.stderr.take().expect("stderr is piped");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr_pipe.read_to_end(&mut bytes);
        bytes
    });
    let status = wait_for(Reaped(child), "the command writing into a closed pipe");
    Output {
        status,
        stdout: Vec::new(),
        stderr: reader.join().expect("read stderr"),
    }
}

/// Waits for a child to exit within [`PATIENCE`].
#[track_caller]
pub fn wait_for(mut child: Reaped, what: &str) -> std::process::ExitStatus {
    eventually(&format!("{what} to exit"), PATIENCE, || {
        child
            .0
            .try_wait()
            .expect("poll the child")
            .ok_or("still running")
    })
}

/// `rootsctl watch` (human-readable) started on `sb`: its stdout's lines, its stderr's lines
/// (where it says once it has subscribed), and the process.
pub fn spawn_watch(sb: &Sandbox) -> (mpsc::Receiver<String>, mpsc::Receiver<String>, Reaped) {
    let mut child = sb
        .rootsctl()
        .arg("watch")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rootsctl watch");
    let lines = lines_of(child.stdout.take().unwrap());
    let notes = lines_of(child.stderr.take().unwrap());
    (lines, notes, Reaped(child))
}
