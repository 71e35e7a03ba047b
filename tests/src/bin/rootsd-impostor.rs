//! A stand-in for rootsd run by *another* user, for the tests in which that user plays an
//! attacker who created the victim's socket first: it listens on `SOCKET` (mode 0666, so that
//! the victim can connect), greets like rootsd, answers `roots.list` with the roots given on its
//! command line and every other request with an empty success, and prints each line it receives
//! to stdout, so that a test can tell what reached it.
//!
//! Usage: `rootsd-impostor SOCKET [URI...]`. It prints `listening` once it accepts connections.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;

use serde_json::{Value, json};

fn main() {
    let mut args = std::env::args().skip(1);
    let socket = args.next().expect("usage: rootsd-impostor SOCKET [URI...]");
    let roots: Vec<Value> = args
        .map(|uri| json!({"uri": uri, "name": "planted"}))
        .collect();
    let listener = UnixListener::bind(&socket).expect("bind the socket");
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))
        .expect("open the socket to everyone");
    println!("listening");
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let mut writer = stream.try_clone().expect("clone the stream");
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            println!("received {line}");
            let _ = std::io::stdout().flush();
            let Ok(request) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let result = match request["method"].as_str() {
                Some("hello") => {
                    json!({"protocol_version": rootsd_tests::PROTOCOL_VERSION, "daemon_version": "0.1.0", "pid": std::process::id()})
                }
                Some("roots.list") => {
                    json!({"workspace": "default", "revision": 1, "roots": roots})
                }
                _ => json!({}),
            };
            let response = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
            if writeln!(writer, "{response}").is_err() {
                break;
            }
        }
    }
}
