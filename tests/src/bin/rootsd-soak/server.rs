//! The scripted MCP server the soak's proxies run (`rootsd-soak --mcp-server`): a handshake-era
//! server that declares nothing, asks `roots/list` after `notifications/initialized` and after
//! every `list_changed`, and answers `tools/call` with the roots it holds, so that the host can
//! see what the server sees.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

pub fn run() -> ExitCode {
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut send = |message: Value| {
        // The proxy going away ends the server: nothing to report.
        let _ = writeln!(stdout, "{message}").and_then(|()| stdout.flush());
    };
    let mut roots = Value::Null;
    let mut asked = 0u64;
    for line in stdin.lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = message.get("id").filter(|id| !id.is_null()).cloned();
        match (message["method"].as_str(), id) {
            (Some("initialize"), Some(id)) => send(json!({
                "jsonrpc": "2.0", "id": id,
                "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "rootsd-soak", "version": "1"}
                }
            })),
            (Some("notifications/initialized" | "notifications/roots/list_changed"), None) => {
                asked += 1;
                send(
                    json!({"jsonrpc": "2.0", "id": format!("roots-{asked}"), "method": "roots/list"}),
                );
            }
            (Some("tools/call"), Some(id)) => send(json!({
                "jsonrpc": "2.0", "id": id,
                "result": {"content": [], "roots": roots, "asked": asked}
            })),
            (Some(_), Some(id)) => send(json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "the soak server knows initialize and tools/call"}
            })),
            (None, Some(_)) => {
                if let Some(list) = message.pointer("/result/roots") {
                    roots = list.clone();
                }
            }
            _ => {}
        }
    }
    ExitCode::SUCCESS
}
