//! No process a server started outlives its session, however the session ends: the host closing
//! stdin, SIGTERM or SIGKILL to the proxy, a restart for a change of workspace, a storm of them.
//!
//! The fake server (`--descendants`) forks a child that sleeps and a grandchild that daemonises
//! (`setsid` and a double fork, leaving the server's process group and parent), and writes their
//! pids to a file; a real npx-launched server (npx, which starts node) is followed through
//! `/proc`. Each test ends its session one way, then polls, within a bound, until none of those
//! processes runs, and fails naming the survivors.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rootsd_tests::{PATIENCE, Sandbox, eventually};
use rustix::process::Signal;

use crate::support::{FakeSession, FakeSetup, Proxy, add_wait, remove_wait};

/// The pid file the fake's descendants are listed in, relative to the sandbox (where the proxy
/// and so the server run).
const PIDS: &str = "descendants.txt";

/// How long the processes of an ended session may take to go: the keeper's grace between
/// SIGTERM and SIGKILL (3 s), and leeway for a loaded machine.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// Whether process `pid` is still running (a zombie has ended).
fn running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    !matches!(state.and_then(|s| s.chars().next()), Some('Z' | 'X') | None)
}

fn describe(pid: i32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    format!("{pid} ({})", cmdline.trim())
}

/// Processes a test follows; those still running when it ends are killed, so that a failing
/// test leaves nothing behind either.
struct Followed(BTreeSet<i32>);

impl Followed {
    /// Polls until none of them runs, failing with the survivors after `within`.
    #[track_caller]
    fn assert_gone(&self, how: &str, within: Duration) {
        eventually(
            &format!("every process the server started to be gone after {how}"),
            within,
            || {
                let survivors: Vec<String> = self
                    .0
                    .iter()
                    .filter(|&&pid| running(pid))
                    .map(|&pid| describe(pid))
                    .collect();
                if survivors.is_empty() {
                    Ok(())
                } else {
                    Err(format!("survivors: {}", survivors.join(", ")))
                }
            },
        );
    }
}

impl Drop for Followed {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if running(pid)
                && let Some(pid) = rustix::process::Pid::from_raw(pid)
            {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
        }
    }
}

/// The pids in the fake's pid file, once it lists `starts` servers' descendants.
#[track_caller]
fn listed(sb: &Sandbox, starts: usize) -> BTreeSet<i32> {
    let path = sb.path().join(PIDS);
    eventually(
        &format!("{starts} servers' descendants in {}", path.display()),
        PATIENCE,
        || {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let pids: BTreeSet<i32> = text
                .lines()
                .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
                .collect();
            if pids.len() >= 2 * starts {
                Ok(pids)
            } else {
                Err(text)
            }
        },
    )
}

/// Every live descendant of `root`, from `/proc`.
fn descendants_of(root: i32) -> BTreeSet<i32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(parent) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok())
        {
            parents.push((pid, parent));
        }
    }
    let mut found = BTreeSet::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for &(pid, _) in parents.iter().filter(|(_, p)| *p == parent) {
            if found.insert(pid) {
                queue.push(pid);
            }
        }
    }
    found
}

/// A session of the fake with descendants, initialized; `extra` goes to the fake.
fn forking_session(extra: &'static [&'static str]) -> (FakeSession, Followed) {
    let mut args = vec!["--descendants", PIDS];
    args.extend(extra);
    let args: &'static [&'static str] = Vec::leak(args);
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            server_args: args,
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    let pids = listed(&fake.sb, 1);
    (fake, Followed(pids))
}

fn signal(pid: u32, signal: Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("a real pid");
    rustix::process::kill_process(pid, signal).expect("send a signal");
}

#[test]
fn the_host_closing_stdin_ends_the_servers_child_and_daemonised_grandchild() {
    let (mut fake, followed) = forking_session(&[]);
    fake.proxy.close_stdin();
    fake.proxy.wait_exit();
    followed.assert_gone("the host closed stdin", GONE_WITHIN);
}

#[test]
fn sigterm_to_the_proxy_ends_the_servers_child_and_daemonised_grandchild() {
    let (mut fake, followed) = forking_session(&[]);
    signal(fake.proxy.pid(), Signal::TERM);
    fake.proxy.wait_exit();
    followed.assert_gone("SIGTERM to the proxy", GONE_WITHIN);
}

#[test]
fn sigkill_to_the_proxy_ends_the_server_and_descendants_that_ignore_sigterm() {
    let (mut fake, mut followed) = forking_session(&["--linger", "--stubborn-descendants"]);
    followed.0.extend(descendants_of(fake.proxy.pid() as i32));
    signal(fake.proxy.pid(), Signal::KILL);
    fake.proxy.wait_exit();
    followed.assert_gone("SIGKILL to the proxy", GONE_WITHIN);
}

#[test]
fn a_server_that_exits_takes_what_it_started_with_it() {
    let (mut fake, followed) = forking_session(&["--stubborn-descendants"]);
    fake.proxy
        .notify("test/exit", serde_json::json!({"code": 4}));
    let status = fake.proxy.wait_exit();
    assert_eq!(status.code(), Some(4), "{}", fake.proxy.final_stderr());
    followed.assert_gone("the server exited", GONE_WITHIN);
}

/// A templated fake with descendants, restarted `restarts` times by adding and removing a root.
fn restarted_session(restarts: usize) -> (FakeSession, Followed) {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["one"],
            server_args: &["--descendants", PIDS, "{roots}"],
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    listed(&fake.sb, 1);
    fake.sb.mkdir("two");
    for turn in 0..restarts {
        if turn % 2 == 0 {
            add_wait(&fake.sb, &[Path::new("two")], &["--timeout", "20"]);
        } else {
            remove_wait(&fake.sb, &[Path::new("two")], &["--timeout", "20"]);
        }
    }
    let pids = listed(&fake.sb, restarts + 1);
    (fake, Followed(pids))
}

#[test]
fn a_restart_ends_the_old_servers_descendants_and_the_session_end_the_new_ones() {
    let (mut fake, followed) = restarted_session(1);
    let text = std::fs::read_to_string(fake.sb.path().join(PIDS)).expect("the pid file");
    let old: BTreeSet<i32> = text
        .lines()
        .take(2)
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    Followed(old).assert_gone("a restart", GONE_WITHIN);
    fake.proxy.close_stdin();
    fake.proxy.wait_exit();
    followed.assert_gone("the host closed stdin after a restart", GONE_WITHIN);
}

#[test]
fn a_storm_of_restarts_leaves_no_process_behind() {
    let (mut fake, followed) = restarted_session(20);
    fake.proxy.close_stdin();
    fake.proxy.wait_exit();
    followed.assert_gone("20 restarts and the host closing stdin", GONE_WITHIN);
}

/// `npx` from the local prefix (tests/interop), starting the reference filesystem server: npx
/// is the proxy's server, and node its child.
fn npx_filesystem_server() -> Vec<OsString> {
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop");
    let runs = Command::new("npx")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(
        runs,
        "npx is not installed or does not run; install node (with npm), then run `npm ci --prefix tests/interop`"
    );
    assert!(
        prefix
            .join("node_modules/@modelcontextprotocol/server-filesystem")
            .is_dir(),
        "server-filesystem is not installed: run `npm ci --prefix tests/interop`"
    );
    vec![
        "npx".into(),
        "--prefix".into(),
        prefix.into_os_string(),
        "--no-install".into(),
        "mcp-server-filesystem".into(),
        "/tmp".into(),
    ]
}

/// The proxy's descendants once npx has started node under it.
#[track_caller]
fn npx_tree(proxy: &Proxy) -> Followed {
    let tree = eventually("npx to start node", PATIENCE, || {
        let tree = descendants_of(proxy.pid() as i32);
        let node = tree.iter().any(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("server-filesystem"))
                && std::fs::read_link(format!("/proc/{pid}/exe"))
                    .is_ok_and(|e| e.to_string_lossy().contains("node"))
        });
        if node && tree.len() >= 2 {
            Ok(tree)
        } else {
            Err(tree
                .iter()
                .map(|&p| describe(p))
                .collect::<Vec<_>>()
                .join(", "))
        }
    });
    Followed(tree)
}

#[test]
fn an_npx_launched_server_leaves_nothing_when_the_host_closes_stdin_or_the_proxy_is_killed() {
    let sb = Sandbox::new();
    let _daemon = sb.start_daemon();
    for how in ["the host closed stdin", "SIGKILL to the proxy"] {
        let mut proxy = Proxy::spawn(&sb, &[], &npx_filesystem_server());
        proxy.initialize();
        let followed = npx_tree(&proxy);
        if how == "SIGKILL to the proxy" {
            signal(proxy.pid(), Signal::KILL);
        } else {
            proxy.close_stdin();
        }
        proxy.wait_exit();
        followed.assert_gone(how, GONE_WITHIN);
    }
}
