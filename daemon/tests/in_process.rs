//! The daemon started in-process through `server::run`, the way a test or an embedding program
//! injects what it touches: its own socket, its own store, its own shutdown token.

use std::sync::Arc;

use rootsd::info::{Access, DaemonInfo};
use rootsd::registry::Registry;
use rootsd::server;
use rootsd::store::{self, Outcome};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

struct Line {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: tokio::net::unix::OwnedWriteHalf,
}

impl Line {
    async fn connect(path: &std::path::Path) -> Self {
        let (read, writer) = UnixStream::connect(path)
            .await
            .expect("connect")
            .into_split();
        Self {
            reader: BufReader::new(read),
            writer,
        }
    }

    async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.writer
            .write_all(format!("{request}\n").as_bytes())
            .await
            .expect("write");
        let mut line = String::new();
        self.reader.read_line(&mut line).await.expect("read");
        serde_json::from_str(&line).expect("JSON")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_until_cancelled_then_stops_and_keeps_every_acknowledged_change() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state dir");
    let socket_path = dir.path().join("s.sock");
    let opened = store::open(&state).expect("open the store");
    assert_eq!(opened.outcome(), &Outcome::New);
    let registry = Arc::new(Registry::new(opened).expect("serve the store"));
    let (listener, closer) = rootsd::socket::bind(&socket_path, &state)
        .expect("bind")
        .split();
    let shutdown = CancellationToken::new();
    let info = DaemonInfo {
        socket: socket_path.clone(),
        state_dir: state.clone(),
        socket_activated: false,
        access: Access::Owner,
        admin_group: None,
    };
    let daemon = tokio::spawn(server::run(listener, registry, info, shutdown.clone()));

    let mut client = Line::connect(&socket_path).await;
    let hello = client
        .call(
            1,
            "hello",
            json!({"protocol_version": rootsd_proto::wire::PROTOCOL_VERSION}),
        )
        .await;
    assert_eq!(
        hello["result"]["protocol_version"],
        rootsd_proto::wire::PROTOCOL_VERSION,
        "{hello}"
    );
    let added = client
        .call(
            2,
            "roots.add",
            json!({"roots": [{"uri": "file:///srv/app"}]}),
        )
        .await;
    assert_eq!(added["result"]["revision"], 1, "{added}");
    shutdown.cancel();
    daemon
        .await
        .expect("the server task")
        .expect("run ends cleanly");
    closer.close();
    assert!(
        !socket_path.exists(),
        "the socket rootsd created is removed"
    );

    let reopened = store::open(&state).expect("reopen the store");
    assert_eq!(
        reopened.outcome(),
        &Outcome::Consistent,
        "the final checkpoint left the database and the journal in agreement"
    );
    let contents = reopened.contents();
    assert_eq!(contents.revision, 1);
    let roots: Vec<&str> = contents
        .workspaces
        .values()
        .flat_map(|w| w.roots.iter().map(|r| &*r.uri))
        .collect();
    assert_eq!(roots, vec!["file:///srv/app"]);
}

impl Line {
    /// The next line, or `None` once the daemon closed the connection.
    async fn next(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line).await.expect("read") {
            0 => None,
            _ => Some(serde_json::from_str(&line).expect("JSON")),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_with_nothing_registered_or_watched_is_closed_and_told_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state dir");
    let socket_path = dir.path().join("s.sock");
    let registry = Arc::new(Registry::new(store::open(&state).expect("open")).expect("serve"));
    let (listener, closer) = rootsd::socket::bind(&socket_path, &state)
        .expect("bind")
        .split();
    let shutdown = CancellationToken::new();
    let info = DaemonInfo {
        socket: socket_path.clone(),
        state_dir: state.clone(),
        socket_activated: false,
        access: Access::Owner,
        admin_group: None,
    };
    let tuning = server::Tuning {
        idle_timeout: std::time::Duration::from_millis(300),
        ..server::Tuning::default()
    };
    let daemon = tokio::spawn(server::run_tuned(
        listener,
        registry,
        info,
        shutdown.clone(),
        tuning,
    ));
    let hello = json!({"protocol_version": rootsd_proto::wire::PROTOCOL_VERSION});
    // A watcher and a session wait for pushes: they are never idle.
    let mut watcher = Line::connect(&socket_path).await;
    watcher.call(1, "hello", hello.clone()).await;
    watcher.call(2, "watch", json!({})).await;
    let mut session = Line::connect(&socket_path).await;
    session.call(1, "hello", hello.clone()).await;
    let registered = session.call(2, "session.register", json!({"pid": 1})).await;
    assert!(registered.get("result").is_some(), "{registered}");
    // A client that greets, asks once, and then holds its connection doing nothing.
    let started = std::time::Instant::now();
    let mut idle = Line::connect(&socket_path).await;
    idle.call(1, "hello", hello.clone()).await;
    idle.call(2, "status", json!({})).await;
    let told = idle.next().await.expect("told why before the close");
    let waited = started.elapsed();
    assert_eq!(told["error"]["code"], json!(-32009), "{told}");
    assert_eq!(told["id"], Value::Null, "{told}");
    let message = told["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("idle for 0.3 s") && message.contains("reconnect"),
        "{message}"
    );
    assert!(idle.next().await.is_none(), "the idle connection is closed");
    assert!(waited >= tuning.idle_timeout, "closed after {waited:?}");
    // Both connected before the idle one and are still served, past the timeout.
    let status = watcher.call(3, "status", json!({})).await;
    assert_eq!(status["result"]["clients"], json!(2), "{status}");
    let listed = session.call(3, "sessions.list", json!({})).await;
    assert_eq!(
        listed["result"]["sessions"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    shutdown.cancel();
    daemon
        .await
        .expect("the server task")
        .expect("run ends cleanly");
    closer.close();
}

/// A daemon served by [`server::run_tuned`] from a fresh state directory, until `stop`.
struct Served {
    _dir: tempfile::TempDir,
    socket_path: std::path::PathBuf,
    shutdown: CancellationToken,
    daemon: tokio::task::JoinHandle<Result<(), rootsd::error::StoreError>>,
    closer: rootsd::socket::SocketCloser,
}

impl Served {
    fn start(tuning: server::Tuning) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("state");
        std::fs::create_dir(&state).expect("state dir");
        let socket_path = dir.path().join("s.sock");
        let registry = Arc::new(Registry::new(store::open(&state).expect("open")).expect("serve"));
        let (listener, closer) = rootsd::socket::bind(&socket_path, &state)
            .expect("bind")
            .split();
        let shutdown = CancellationToken::new();
        let info = DaemonInfo {
            socket: socket_path.clone(),
            state_dir: state,
            socket_activated: false,
            access: Access::Owner,
            admin_group: None,
        };
        let daemon = tokio::spawn(server::run_tuned(
            listener,
            registry,
            info,
            shutdown.clone(),
            tuning,
        ));
        Self {
            _dir: dir,
            socket_path,
            shutdown,
            daemon,
            closer,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.daemon
            .await
            .expect("the server task")
            .expect("run ends cleanly");
        self.closer.close();
    }
}

// On tokio's paused clock the daemon's real 10 s limit passes as soon as nothing else is left to
// do, so the default bound and its message are checked without waiting for them.
#[tokio::test(start_paused = true)]
async fn a_line_left_unfinished_is_cut_off_with_an_error() {
    let tuning = server::Tuning::default();
    let served = Served::start(tuning);
    let hello = json!({"protocol_version": rootsd_proto::wire::PROTOCOL_VERSION});
    let mut client = Line::connect(&served.socket_path).await;
    client.call(1, "hello", hello.clone()).await;
    let mut raw = Line::connect(&served.socket_path).await;
    raw.call(1, "hello", hello.clone()).await;
    let started = tokio::time::Instant::now();
    raw.writer
        .write_all(br#"{"jsonrpc":"2.0","id":2,"method":"sta"#)
        .await
        .expect("write half a line");
    let error = raw.next().await.expect("an error before the close");
    let waited = started.elapsed();
    assert_eq!(error["id"], Value::Null, "{error}");
    assert_eq!(error["error"]["code"], json!(-32600), "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("not finished within 10s"), "{message}");
    assert!(raw.next().await.is_none(), "the connection is closed");
    assert!(
        waited >= tuning.partial_line_timeout,
        "cut off too early, after {waited:?}"
    );
    // Other connections are untouched.
    let status = client.call(2, "status", json!({})).await;
    assert!(status["result"]["pid"].is_u64(), "{status}");
    served.stop().await;
}
