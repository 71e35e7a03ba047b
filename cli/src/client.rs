//! A connection to rootsd: connect, say hello, call methods, receive pushed notifications.

use std::collections::VecDeque;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use futures::{SinkExt, StreamExt};
use interprocess::local_socket::tokio::{Stream, prelude::*};
use interprocess::local_socket::{GenericFilePath, ToFsName};
use rootsd_proto::modes;
use rootsd_proto::wire::{self, Hello, HelloParams, HelloResult, Incoming, Method, Request};
use serde_json::Value;
use tokio_util::codec::{Framed, LinesCodec};

// Defined with every other error rootsctl reports; named here too, where it is raised.
pub use crate::errors::ClientError;
use crate::errors::OtherProtocol;

/// Refuses a daemon rootsctl must not talk to ([`modes::listener`]): the socket's listener must
/// be this user, root, or a system service (another user's socket in a directory only root may
/// write to). Anyone else may have created the socket to receive this user's requests and answer
/// with roots of their choosing, so nothing is sent to them, not even hello.
///
/// The listener's uid comes from the connected socket (`SO_PEERCRED`), which nobody can forge;
/// the file and its directory are inspected after connecting, and only matter for the system
/// service, whose directory only root can change.
fn check_listener(stream: &Stream, socket: &Path) -> Result<(), ClientError> {
    let creds = stream.peer_creds().map_err(|error| ClientError::Connect {
        socket: socket.to_owned(),
        error,
    })?;
    let me = rustix::process::geteuid().as_raw();
    let Some(peer_uid) = creds.euid() else {
        return Err(ClientError::Connect {
            socket: socket.to_owned(),
            error: io::Error::other("the kernel did not say who listens on it"),
        });
    };
    let perms = |meta: std::fs::Metadata| modes::Perms {
        uid: meta.uid(),
        gid: meta.gid(),
        mode: meta.mode() & 0o7777,
    };
    let dir = match socket.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let verdict = modes::listener(
        peer_uid,
        me,
        std::fs::symlink_metadata(socket).ok().map(perms),
        std::fs::metadata(dir).ok().map(perms),
    );
    if verdict.trusted() {
        return Ok(());
    }
    Err(ClientError::Untrusted {
        socket: socket.to_owned(),
        peer_uid,
        peer_pid: creds.pid(),
        me,
    })
}

/// An open, greeted connection.
pub struct Client {
    framed: Framed<Stream, LinesCodec>,
    socket: PathBuf,
    next_id: u64,
    /// Notifications that arrived while waiting for a response, in order.
    pushed: VecDeque<Incoming>,
    pub hello: HelloResult,
}

impl Client {
    /// Connects to `socket` and exchanges hello. Fails with [`ClientError::NotRunning`] when
    /// nothing listens there.
    pub async fn connect(socket: &Path, client_name: &str) -> Result<Self, ClientError> {
        let name =
            socket
                .to_fs_name::<GenericFilePath>()
                .map_err(|error| ClientError::Connect {
                    socket: socket.to_owned(),
                    error,
                })?;
        let stream = Stream::connect(name).await.map_err(|error| {
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) {
                ClientError::NotRunning {
                    socket: socket.to_owned(),
                    hint: String::new(),
                }
            } else {
                ClientError::Connect {
                    socket: socket.to_owned(),
                    error,
                }
            }
        })?;
        check_listener(&stream, socket)?;
        let mut client = Self {
            framed: Framed::new(
                stream,
                LinesCodec::new_with_max_length(wire::MAX_LINE_BYTES * 16),
            ),
            socket: socket.to_owned(),
            next_id: 1,
            pushed: VecDeque::new(),
            hello: HelloResult {
                protocol_version: 0,
                daemon_version: String::new(),
                pid: 0,
            },
        };
        let mismatch = |daemon| ClientError::VersionMismatch {
            socket: socket.to_owned(),
            daemon,
        };
        let hello = match client
            .call::<Hello>(&HelloParams {
                protocol_version: wire::PROTOCOL_VERSION,
                client: client_name.to_owned(),
            })
            .await
        {
            Ok(hello) => hello,
            Err(ClientError::Refused(error)) if error.code == wire::code::VERSION_MISMATCH => {
                return Err(mismatch(OtherProtocol::Refused {
                    message: error.message,
                }));
            }
            Err(other) => return Err(other),
        };
        if hello.protocol_version != wire::PROTOCOL_VERSION {
            return Err(mismatch(OtherProtocol::Greeted {
                protocol: hello.protocol_version,
                daemon_version: hello.daemon_version,
            }));
        }
        client.hello = hello;
        Ok(client)
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Calls `M` and waits for its response, queueing any notification that arrives first.
    pub async fn call<M: Method>(&mut self, params: &M::Params) -> Result<M::Result, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&Request::new::<M>(id, params)).await?;
        loop {
            let incoming = self.read().await?;
            if incoming.id.is_none() {
                self.pushed.push_back(incoming);
                continue;
            }
            if incoming.id != Some(Value::from(id)) {
                return Err(ClientError::Protocol(format!(
                    "a response to request {:?} arrived while waiting for {id}",
                    incoming.id
                )));
            }
            if let Some(error) = incoming.error {
                return Err(ClientError::Refused(error));
            }
            let result = incoming.result.ok_or_else(|| {
                ClientError::Protocol(format!("the response to {} has no result", M::NAME))
            })?;
            return serde_json::from_value(result).map_err(|e| {
                ClientError::Protocol(format!("the result of {} is malformed: {e}", M::NAME))
            });
        }
    }

    /// Sends `M` as a notification: no response comes back.
    pub async fn notify<M: Method>(&mut self, params: &M::Params) -> Result<(), ClientError> {
        self.send(&Request::notification::<M>(params)).await
    }

    /// The next notification pushed by the daemon, typed as `M`'s params.
    pub async fn next_push<M: Method>(&mut self) -> Result<M::Params, ClientError> {
        loop {
            let incoming = match self.pushed.pop_front() {
                Some(incoming) => incoming,
                None => self.read().await?,
            };
            if incoming.method.as_deref() != Some(M::NAME) {
                continue;
            }
            let params = incoming.params.unwrap_or(Value::Null);
            return serde_json::from_value(params).map_err(|e| {
                ClientError::Protocol(format!("a {} notification is malformed: {e}", M::NAME))
            });
        }
    }

    async fn send(&mut self, request: &Request) -> Result<(), ClientError> {
        let line = serde_json::to_string(request).expect("wire requests always serialise");
        self.framed.send(line).await.map_err(|e| ClientError::Lost {
            socket: self.socket.clone(),
            reason: e.to_string(),
        })
    }

    async fn read(&mut self) -> Result<Incoming, ClientError> {
        let line = match self.framed.next().await {
            Some(Ok(line)) => line,
            Some(Err(e)) => {
                return Err(ClientError::Lost {
                    socket: self.socket.clone(),
                    reason: e.to_string(),
                });
            }
            None => {
                return Err(ClientError::Lost {
                    socket: self.socket.clone(),
                    reason: "the daemon closed the connection".to_owned(),
                });
            }
        };
        serde_json::from_str(&line).map_err(|e| ClientError::Protocol(format!("{e} in {line:?}")))
    }
}
