//! A connection to rootsd: connect, say hello, call methods, receive pushed notifications.
//!
//! Before it sends anything, it checks who listens ([`check_listener`]); and it never waits on
//! the daemon without a deadline, except for pushes, which may rightly take hours.

use std::collections::VecDeque;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use interprocess::local_socket::tokio::{Stream, prelude::*};
use interprocess::local_socket::{GenericFilePath, ToFsName};
use rootsd_proto::modes;
use rootsd_proto::wire::{
    self, ErrorObject, Hello, HelloParams, HelloResult, Incoming, Method, Request, WaitForSessions,
};
use serde_json::Value;
use tokio_util::codec::{Framed, LinesCodec};

// Defined with every other error rootsctl reports; named here too, where it is raised.
pub use crate::errors::ClientError;
use crate::errors::OtherProtocol;
use crate::reach::Blocked;

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
    /// How long to wait for each answer.
    timeout: Duration,
    pub hello: HelloResult,
}

impl Client {
    /// Connects to `socket` and exchanges hello, waiting at most `timeout` for the daemon to
    /// accept and then for each answer. Fails with [`ClientError::NotRunning`] when nothing
    /// listens there, and [`ClientError::Untrusted`] when someone rootsctl must not talk to does.
    pub async fn connect(
        socket: &Path,
        client_name: &str,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let name =
            socket
                .to_fs_name::<GenericFilePath>()
                .map_err(|error| ClientError::Connect {
                    socket: socket.to_owned(),
                    error,
                })?;
        let connected = tokio::time::timeout(timeout, Stream::connect(name))
            .await
            .map_err(|_| ClientError::TimedOut {
                socket: socket.to_owned(),
                waiting_for: "accept the connection".to_owned(),
                after: timeout,
            })?;
        let stream = connected.map_err(|error| {
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) {
                ClientError::NotRunning {
                    socket: socket.to_owned(),
                    hint: String::new(),
                }
            } else if let Some(blocked) = (error.kind() == io::ErrorKind::PermissionDenied)
                .then(|| Blocked::find(socket))
                .flatten()
            {
                ClientError::Blocked {
                    socket: socket.to_owned(),
                    blocked,
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
            timeout,
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
    /// Gives up after the connection's timeout; a `wait` may take its own timeout on top.
    pub async fn call<M: Method>(&mut self, params: &M::Params) -> Result<M::Result, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request::new::<M>(id, params);
        let patience = self.timeout + long_poll(&request);
        tokio::time::timeout(patience, self.exchange::<M>(id, &request))
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::TimedOut {
                    socket: self.socket.clone(),
                    waiting_for: format!("answer {}", M::NAME),
                    after: patience,
                })
            })
    }

    async fn exchange<M: Method>(
        &mut self,
        id: u64,
        request: &Request,
    ) -> Result<M::Result, ClientError> {
        self.send(request).await?;
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
        let request = Request::notification::<M>(params);
        tokio::time::timeout(self.timeout, self.send(&request))
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::TimedOut {
                    socket: self.socket.clone(),
                    waiting_for: format!("take {}", M::NAME),
                    after: self.timeout,
                })
            })
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
        let incoming: Incoming = serde_json::from_str(&line)
            .map_err(|e| ClientError::Protocol(format!("{e} in {line:?}")))?;
        match incoming {
            // An error that answers no request is about the connection itself, which the daemon
            // closes after it.
            Incoming {
                id: None,
                error: Some(error),
                ..
            } => Err(self.closed_with(error)),
            incoming => Ok(incoming),
        }
    }

    /// What the daemon's last word on a connection means.
    fn closed_with(&self, error: ErrorObject) -> ClientError {
        let socket = self.socket.clone();
        if error.code == wire::code::NOT_ADMITTED {
            ClientError::NotAdmitted {
                socket,
                message: error.message,
            }
        } else {
            ClientError::Lost {
                socket,
                reason: format!("rootsd closed it: {}", error.message),
            }
        }
    }
}

/// How much longer than an ordinary request a request may rightly take: a `wait` resolves only
/// when its own timeout passes, if sessions lag.
fn long_poll(request: &Request) -> Duration {
    if request.method != WaitForSessions::NAME {
        return Duration::ZERO;
    }
    let millis = request.params["timeout_ms"].as_u64().unwrap_or(0);
    Duration::from_millis(millis)
}
