//! What the daemon and the proxy tell the user about sessions: a proxy on a workspace that does
//! not exist, and `--wait` right after the daemon restarted, while proxies reconnect.

use rootsd_tests::{PATIENCE, eventually};
use serde_json::json;

use crate::support::FakeLog;
use crate::support::{FakeSession, FakeSetup, Proxy, assert_exit, ctl, fake_server, stdout_of};

/// The proxy's stderr once it holds `needle`.
#[track_caller]
fn stderr_with(proxy: &Proxy, needle: &str) -> String {
    eventually(&format!("the proxy to say {needle:?}"), PATIENCE, || {
        let stderr = proxy.stderr();
        if stderr.contains(needle) {
            Ok(stderr)
        } else {
            Err(format!("stderr:\n{stderr}"))
        }
    })
}

#[test]
fn a_proxy_on_a_workspace_that_does_not_exist_warns_and_sessions_shows_it() {
    let mut fake = FakeSession::start(
        "quiet",
        FakeSetup {
            roots: &["a"],
            proxy_options: &["--workspace", "wrok"],
            ..FakeSetup::default()
        },
    );
    fake.proxy.initialize();
    let session = fake.session("its workspace missing", |s| {
        s["workspace_missing"] == json!(true)
    });
    assert_eq!(session["workspace"], json!("wrok"), "{session}");
    let said = stderr_with(&fake.proxy, "workspace wrok does not exist");
    assert!(
        said.contains("`rootsctl add -w wrok PATH`") && said.contains("the workspaces are default"),
        "{said}"
    );

    let output = ctl(&fake.sb, &["sessions"]);
    assert_exit(&output, 0, "rootsctl sessions");
    let table = stdout_of(&output);
    assert!(table.contains("wrok (no such workspace)"), "{table}");

    // Once the user creates it, the session is an ordinary one again.
    let w = fake.sb.mkdir("w");
    fake.sb.ctl_ok(&["add", "-w", "wrok", w.to_str().unwrap()]);
    fake.session("its workspace, now created", |s| {
        s.get("workspace_missing").is_none()
    });
    let output = ctl(&fake.sb, &["sessions"]);
    assert!(
        !stdout_of(&output).contains("no such workspace"),
        "{}",
        stdout_of(&output)
    );

    // A proxy on a workspace that exists says nothing of the kind.
    let log = FakeLog::new(&fake.sb, "second");
    let mut second = Proxy::spawn(&fake.sb, &["-w", "default"], &fake_server("quiet", &log));
    second.initialize();
    crate::support::wait_for_session(&fake.sb, second.pid(), "registration", |_| true);
    let said = second.stderr();
    assert!(!said.contains("does not exist"), "{said}");
}
