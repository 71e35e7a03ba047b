//! The proxy's connection to rootsd: register the session, receive the workspace's lists, report
//! the session's state, publish the host's roots, and survive the daemon going away.
//!
//! The link runs on a thread of its own, with a runtime of its own, so that the relay never waits
//! for the daemon (roots are served from the last list the daemon pushed) and the daemon's pushes
//! are read while the relay loop waits for its pipes without the runtime (`wait`), which it
//! wakes with a bell. The relay hands the link its whole session state each
//! time it changes; the link keeps only the newest, sends it, and registers with it after a
//! reconnection, so the daemon always holds exactly what the proxy knows. Publications of the
//! host's roots (`--host-roots publish`) work the same way: the newest replaces the last, and
//! after a reconnection it is published again before the session's first list is handed over,
//! since a restarted daemon withdrew it.

use std::time::Duration;

use rootsd_proto::WorkspaceName;
use rootsd_proto::host_roots::HostRootsMode;
use rootsd_proto::session::SessionState;
use rootsd_proto::wire::{
    PublishParams, PublishRoots, RegisterParams, RegisterSession, RootsChanged, RootsSnapshot,
    UnknownWorkspace, UpdateSession,
};
use rootsd_relay::{Publication, PublishAck};
use tokio::sync::watch;

use super::wait::Ringer;
use rootsd_client::autostart::Target;
use rootsd_client::client::{Client, ClientError};
use rootsd_proto::text::escape_controls;

/// Reconnection backoff bounds.
const FIRST_RETRY: Duration = Duration::from_millis(50);
const LAST_RETRY: Duration = Duration::from_secs(2);

/// This proxy's own id, which it presents at every registration so that a restarted daemon
/// recognises its session coming back (`session.register`'s `instance`): the kernel's random
/// UUID, or, where `/proc` does not give one, the pid and the time it started, which no other
/// proxy shares either.
pub fn instance_id() -> String {
    match std::fs::read_to_string("/proc/sys/kernel/random/uuid") {
        Ok(uuid) if !uuid.trim().is_empty() => uuid.trim().to_owned(),
        _ => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!("{}-{nanos:x}", std::process::id())
        }
    }
}

/// The proxy's end of the link.
pub struct Link {
    /// The session's state, for the daemon. Dropping it ends the link.
    pub states: watch::Sender<SessionState>,
    /// The host's roots, to publish.
    pub publications: watch::Sender<Option<Publication>>,
    /// What became of the last publication.
    pub acks: watch::Receiver<Option<PublishAck>>,
}

/// Starts the link. The newest list for the session's workspace (on registration and on every
/// change) arrives on `roots`; states and publications sent on the returned channels reach the
/// daemon. Every channel holds only the newest value, which is all either side needs.
pub fn spawn(
    target: Target,
    params: RegisterParams,
    roots: watch::Sender<Option<RootsSnapshot>>,
    bell: Ringer,
) -> Link {
    let (states, receiver) = watch::channel(params.state.clone());
    let (publications, publication_receiver) = watch::channel(None);
    let (ack_sender, acks) = watch::channel(None);
    let channels = Channels {
        roots,
        states: receiver,
        publications: publication_receiver,
        acks: ack_sender,
        bell,
        declined: Vec::new(),
    };
    // A thread of its own, with a runtime of its own: the relay loop waits for its pipes without
    // the runtime when it can (`wait`), and the link must go on reading the daemon meanwhile.
    let started = std::thread::Builder::new()
        .name("rootsctl-link".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on(run(target, params, channels)),
                Err(error) => not_started(&error),
            }
        });
    if let Err(error) = started {
        not_started(&error);
    }
    Link {
        states,
        publications,
        acks,
    }
}

/// Says that the link could not start (its thread or its runtime), and that the session goes on.
fn not_started(error: &std::io::Error) {
    eprintln!(
        "rootsctl proxy: cannot start the link to rootsd ({error}); the session goes on without the daemon's roots"
    );
}

/// The link task's ends of the channels.
struct Channels {
    roots: watch::Sender<Option<RootsSnapshot>>,
    states: watch::Receiver<SessionState>,
    publications: watch::Receiver<Option<Publication>>,
    acks: watch::Sender<Option<PublishAck>>,
    /// Rung after each list or acknowledgement handed over, for the relay loop's own wait.
    bell: Ringer,
    /// What the daemon last said it did not publish because the user removed it, to say so
    /// once per change.
    declined: Vec<String>,
}

impl Channels {
    /// Hands the relay a list; an error once it is gone.
    fn hand_over(
        &self,
        snapshot: RootsSnapshot,
    ) -> Result<(), watch::error::SendError<Option<RootsSnapshot>>> {
        self.roots.send(Some(snapshot))?;
        self.bell.ring();
        Ok(())
    }

    /// Tells the relay what became of a publication.
    fn acknowledge(&self, ack: PublishAck) {
        if self.acks.send(Some(ack)).is_ok() {
            self.bell.ring();
        }
    }
}

async fn run(target: Target, mut params: RegisterParams, mut channels: Channels) {
    let mut backoff = FIRST_RETRY;
    let mut connected_before = false;
    let mut warned_unknown = false;
    // Autostart only when the proxy starts: a daemon that goes away later may have been stopped
    // on purpose, and under systemd socket activation reconnecting starts it anyway.
    let mut target_now = target.clone();
    loop {
        params.state = channels.states.borrow_and_update().clone();
        match register(&target_now, &params).await {
            Ok((mut client, snapshot, unknown)) => {
                // A session that publishes its host's roots creates its workspace itself, and
                // one that merges them gives its server the host's: only a session that serves
                // the workspace alone is left with nothing.
                let serves_workspace_alone = params.state.host_roots.mode == HostRootsMode::Replace;
                match unknown {
                    Some(unknown) if !warned_unknown && serves_workspace_alone => {
                        warned_unknown = true;
                        warn_unknown_workspace(&params.workspace, &unknown);
                    }
                    Some(_) => {}
                    // Created meanwhile: should it go again, say so again.
                    None => warned_unknown = false,
                }
                if connected_before {
                    eprintln!(
                        "rootsctl proxy: reconnected to rootsd at {}",
                        escape_controls(&target.socket.display().to_string())
                    );
                }
                connected_before = true;
                backoff = FIRST_RETRY;
                // What this session published is not in a new daemon's list: publish it before
                // handing the list over, so that the server is not told of a list without it.
                let publication = channels.publications.borrow_and_update().clone();
                let published = match publication {
                    Some(publication) => publish(&mut client, &publication, &mut channels)
                        .await
                        .map(|revision| revision > snapshot.revision),
                    None => Ok(false),
                };
                let ended = match published {
                    Err(lost) => Ended::Lost(lost),
                    Ok(newer) => {
                        // A newer list than the registration's follows as a push.
                        if !newer && channels.hand_over(snapshot).is_err() {
                            return;
                        }
                        serve(&mut client, &mut channels).await
                    }
                };
                match ended {
                    Ended::ProxyDone => return,
                    Ended::Lost(reason) => {
                        eprintln!(
                            "rootsctl proxy: lost rootsd ({}); serving the last roots and reconnecting",
                            escape_controls(&reason)
                        );
                    }
                }
            }
            Err(err) if !connected_before && backoff == FIRST_RETRY => {
                eprintln!(
                    "rootsctl proxy: {}; relaying anyway and retrying in the background",
                    escape_controls(&err.to_string())
                );
            }
            Err(_) => {}
        }
        target_now.autostart = false;
        // The registration that follows reads the newest state, so changes made meanwhile are
        // not lost; only the end of the proxy stops the wait early.
        let retry_at = tokio::time::Instant::now() + backoff;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(retry_at) => break,
                changed = channels.states.changed() => if changed.is_err() { return },
            }
        }
        backoff = (backoff * 2).min(LAST_RETRY);
    }
}

enum Ended {
    ProxyDone,
    Lost(String),
}

async fn register(
    target: &Target,
    params: &RegisterParams,
) -> Result<(Client, RootsSnapshot, Option<UnknownWorkspace>), ClientError> {
    let mut client = target.connect().await?;
    let result = client.call::<RegisterSession>(params).await?;
    Ok((client, result.snapshot, result.unknown_workspace))
}

/// A proxy on a workspace that does not exist gives its server no roots: almost always a
/// misspelt `--workspace`, which would otherwise go unnoticed.
fn warn_unknown_workspace(workspace: &WorkspaceName, unknown: &UnknownWorkspace) {
    let existing = if unknown.existing.is_empty() {
        "there are no workspaces yet".to_owned()
    } else {
        let names: Vec<String> = unknown.existing.iter().map(ToString::to_string).collect();
        let more = if unknown.more > 0 {
            format!(" and {} more", unknown.more)
        } else {
            String::new()
        };
        format!("the workspaces are {}{more}", names.join(", "))
    };
    eprintln!(
        "rootsctl proxy: warning: workspace {workspace} does not exist, so the server is given no roots until it does: create it with `rootsctl add -w {workspace} PATH`, or give --workspace one that exists ({existing})"
    );
}

async fn serve(client: &mut Client, channels: &mut Channels) -> Ended {
    loop {
        tokio::select! {
            pushed = client.next_push::<RootsChanged>() => match pushed {
                Ok(snapshot) => {
                    if channels.hand_over(snapshot).is_err() {
                        return Ended::ProxyDone;
                    }
                }
                Err(err) => return Ended::Lost(err.to_string()),
            },
            changed = channels.states.changed() => {
                if changed.is_err() {
                    return Ended::ProxyDone;
                }
                let state = channels.states.borrow_and_update().clone();
                if let Err(err) = client.notify::<UpdateSession>(&state).await {
                    return Ended::Lost(err.to_string());
                }
            }
            changed = channels.publications.changed() => {
                if changed.is_err() {
                    return Ended::ProxyDone;
                }
                let publication = channels.publications.borrow_and_update().clone();
                if let Some(publication) = publication
                    && let Err(lost) = publish(client, &publication, channels).await
                {
                    return Ended::Lost(lost);
                }
            }
        }
    }
}

/// Publishes the host's roots and acknowledges the publication to the relay. Returns the
/// revision from which the workspace holds them (the current one if the daemon refused them),
/// or why the daemon was lost.
async fn publish(
    client: &mut Client,
    publication: &Publication,
    channels: &mut Channels,
) -> Result<u64, String> {
    let params = PublishParams {
        roots: publication.roots.clone(),
    };
    let generation = publication.generation;
    let (ack, revision) = match client.call::<PublishRoots>(&params).await {
        Ok(result) => {
            if result.declined != channels.declined {
                if !result.declined.is_empty() {
                    eprintln!(
                        "rootsctl proxy: not publishing {} of the host's roots, which were removed from workspace {} by hand while published (rootsctl remove); they are published again once the host drops them and offers them anew: {}",
                        result.declined.len(),
                        result.workspace,
                        escape_controls(&result.declined.join(", "))
                    );
                }
                channels.declined = result.declined;
            }
            (
                PublishAck::Done {
                    generation,
                    revision: result.revision,
                },
                result.revision,
            )
        }
        Err(ClientError::Refused(error)) => {
            eprintln!(
                "rootsctl proxy: rootsd refused to publish the host's roots (the session goes on with the workspace's roots): {}",
                escape_controls(&error.message)
            );
            (PublishAck::Failed { generation }, 0)
        }
        Err(other) => {
            channels.acknowledge(PublishAck::Failed { generation });
            return Err(other.to_string());
        }
    };
    channels.acknowledge(ack);
    Ok(revision)
}
