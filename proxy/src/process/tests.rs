//! The child's start (its arguments, environment, directory, pipes, signals and errors), its
//! wait through the pidfd, and its death when the proxy lets go of it.

use std::ffi::OsString;
use std::io::{self, Read as _, Write as _};
use std::os::fd::AsFd as _;
use std::path::Path;

use rustix::process::Signal;

use super::{Command, Started};
use crate::stdio::STREAM_HIGH_WATER;

fn run(argv: &[&str], env: &[(&str, &str)], cwd: Option<&Path>) -> io::Result<Started> {
    let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
    let env: Vec<(OsString, OsString)> = env
        .iter()
        .map(|(n, v)| (OsString::from(n), OsString::from(v)))
        .collect();
    Command::new(Path::new("/bin/sh"), &argv, &env, cwd)?.spawn()
}

/// Waits for the child through its pidfd, as the proxy does: its exit code.
fn exit_code(started: &Started) -> i32 {
    let status = rustix::process::waitid(
        rustix::process::WaitId::PidFd(started.process.pidfd()),
        rustix::process::WaitIdOptions::EXITED,
    )
    .unwrap()
    .expect("a blocking wait returns the status");
    status.exit_status().expect("it exited")
}

fn output(started: Started) -> String {
    let mut text = String::new();
    std::fs::File::from(started.stdout.try_clone().unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[test]
fn the_child_gets_its_arguments_environment_directory_and_pipes() {
    let dir = tempfile::tempdir().unwrap();
    // argv[0] is the name the server is started by, which /proc shows; `$0` is the first
    // argument after the script.
    let script = "read line; printf '%s|%s|%s|%s|' \"$0\" \"$ROOTSD_TEST_VAR\" \"$(pwd -P)\" \"$line\"; tr '\\0' ' ' < /proc/$$/cmdline";
    let started = run(
        &["server-name", "-c", script, "first arg"],
        &[("ROOTSD_TEST_VAR", "one"), ("ROOTSD_TEST_VAR", "two")],
        Some(dir.path()),
    )
    .unwrap();
    std::fs::File::from(started.stdin.try_clone().unwrap())
        .write_all(b"from the proxy\n")
        .unwrap();
    let code = exit_code(&started);
    let dir = dir.path().canonicalize().unwrap();
    assert_eq!(
        output(started),
        format!(
            "first arg|two|{}|from the proxy|server-name -c {script} first arg ",
            dir.display()
        )
    );
    assert_eq!(code, 0);
}

#[test]
fn the_child_writes_ahead_into_its_stdout_up_to_a_streamed_lines_queue() {
    // Nothing reads the pipe until the child has exited: its writes must all fit.
    let script = format!("head -c {STREAM_HIGH_WATER} /dev/zero");
    let started = run(&["sh", "-c", &script], &[], None).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        let options = rustix::process::WaitIdOptions::EXITED
            | rustix::process::WaitIdOptions::NOHANG
            | rustix::process::WaitIdOptions::NOWAIT;
        let waited = rustix::process::waitid(
            rustix::process::WaitId::PidFd(started.process.pidfd()),
            options,
        )
        .unwrap();
        if waited.is_some() {
            break exit_code(&started);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the child is still blocked writing {STREAM_HIGH_WATER} bytes to its stdout"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!(status, 0);
    assert_eq!(output(started).len(), STREAM_HIGH_WATER);
}

#[test]
fn the_child_starts_with_no_signal_blocked_and_sigpipe_at_its_default() {
    // The parent blocks every signal around the clone, and this test binary ignores SIGPIPE,
    // as every Rust program does: the server must inherit neither. (That the child asks to
    // die with the proxy is the end-to-end test
    // `a_proxy_killed_with_sigkill_takes_its_server_with_it`.)
    let started = run(
        &["sh", "-c", "grep -E '^(SigBlk|SigIgn):' /proc/self/status"],
        &[],
        None,
    )
    .unwrap();
    assert_eq!(exit_code(&started), 0);
    let text = output(started);
    let field = |name: &str| {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    assert_eq!(field("SigBlk:"), 0, "{text}");
    let sigpipe = 1u64 << (libc::SIGPIPE - 1);
    assert_eq!(field("SigIgn:") & sigpipe, 0, "{text}");
}

#[tokio::test]
async fn the_exit_is_waited_for_through_the_pidfd_and_a_reaped_process_is_not_signalled() {
    let started = run(&["sh", "-c", "exec sleep 30"], &[], None).unwrap();
    let process = started.process.clone();
    process.signal(Signal::TERM);
    let status = process.exit().await.unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM)
    );
    // Reaped: the kernel refuses the pidfd's signals, whoever has the pid now.
    assert_eq!(
        rustix::process::pidfd_send_signal(process.pidfd(), Signal::KILL),
        Err(rustix::io::Errno::SRCH)
    );
    let exited = run(&["sh", "-c", "exit 3"], &[], None).unwrap();
    assert_eq!(exited.process.exit().await.unwrap().code(), Some(3));
}

#[test]
fn letting_go_of_a_process_unreaped_kills_it() {
    let started = run(&["sh", "-c", "exec sleep 30"], &[], None).unwrap();
    let pidfd = started.process.pidfd().try_clone_to_owned().unwrap();
    drop(started);
    let status = rustix::process::waitid(
        rustix::process::WaitId::PidFd(pidfd.as_fd()),
        rustix::process::WaitIdOptions::EXITED,
    )
    .unwrap()
    .unwrap();
    assert_eq!(status.terminating_signal(), Some(libc::SIGKILL));
}

#[test]
fn the_parent_gets_its_signal_mask_back() {
    let blocked = || {
        std::fs::read_to_string("/proc/thread-self/status")
            .unwrap()
            .lines()
            .find(|l| l.starts_with("SigBlk:"))
            .unwrap()
            .to_owned()
    };
    let before = blocked();
    let started = run(&["sh", "-c", "true"], &[], None).unwrap();
    assert_eq!(blocked(), before);
    assert_eq!(exit_code(&started), 0);
}

#[test]
fn a_failed_exec_or_directory_is_the_childs_errno() {
    let missing = Command::new(
        Path::new("/nonexistent/server"),
        &[OsString::from("server")],
        &[],
        None,
    )
    .unwrap()
    .spawn()
    .err()
    .expect("no such program");
    assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    let dir = run(
        &["sh", "-c", "true"],
        &[],
        Some(Path::new("/nonexistent/dir")),
    )
    .err()
    .expect("no such directory");
    assert_eq!(dir.kind(), io::ErrorKind::NotFound);
}

#[test]
fn a_nul_byte_is_refused_before_anything_starts() {
    let error = Command::new(
        Path::new("/bin/sh"),
        &[OsString::from("sh"), OsString::from("a\0b")],
        &[],
        None,
    )
    .err()
    .expect("refused");
    assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    assert!(error.to_string().contains("NUL byte"), "{error}");
    assert!(error.to_string().contains(r#""a\0b""#), "{error}");
    // A variable is named without its value, which may be a secret.
    let error = Command::new(
        Path::new("/bin/sh"),
        &[OsString::from("sh")],
        &[(
            OsString::from("ROOTSD_TOKEN"),
            OsString::from("secret\0value"),
        )],
        None,
    )
    .err()
    .expect("refused");
    let message = error.to_string();
    assert!(message.contains("ROOTSD_TOKEN"), "{message}");
    assert!(!message.contains("secret"), "{message}");
}

#[tokio::test]
async fn a_pipe_registered_for_readiness_is_seen_readable_once_written() {
    let (read, mut write) = std::io::pipe().unwrap();
    let read = std::os::fd::OwnedFd::from(read);
    rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::NONBLOCK).unwrap();
    let watched = super::Readiness::new(read, tokio::io::Interest::READABLE).unwrap();
    write.write_all(b"x").unwrap();
    let ready = tokio::time::timeout(std::time::Duration::from_secs(10), watched.readable())
        .await
        .expect("the pipe is seen readable within 10 s")
        .unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(rustix::io::read(ready.get_inner(), &mut byte).unwrap(), 1);
    assert_eq!(&byte, b"x");
}
