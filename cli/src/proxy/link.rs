//! The proxy's connection to rootsd: register the session, receive the workspace's lists, report
//! the session's state, and survive the daemon going away.
//!
//! The link runs as its own task so that the relay never waits for the daemon: roots are served
//! from the last list the daemon pushed. The relay hands the link its whole session state each
//! time it changes; the link keeps only the newest, sends it, and registers with it after a
//! reconnection, so the daemon always holds exactly what the proxy knows.

use std::time::Duration;

use rootsd_proto::session::SessionState;
use rootsd_proto::wire::{
    RegisterParams, RegisterSession, RootsChanged, RootsSnapshot, UpdateSession,
};
use tokio::sync::watch;

use crate::autostart::Target;
use crate::client::{Client, ClientError};
use crate::output::escape_controls;

/// Reconnection backoff bounds.
const FIRST_RETRY: Duration = Duration::from_millis(50);
const LAST_RETRY: Duration = Duration::from_secs(2);

/// Starts the link. The newest list for the session's workspace (on registration and on every
/// change) arrives on `roots`; states sent on the returned channel reach the daemon. Both
/// channels hold only the newest value, which is all either side needs. Dropping the returned
/// sender ends the link.
pub fn spawn(
    target: Target,
    params: RegisterParams,
    roots: watch::Sender<Option<RootsSnapshot>>,
) -> watch::Sender<SessionState> {
    let (states, receiver) = watch::channel(params.state.clone());
    tokio::spawn(run(target, params, roots, receiver));
    states
}

async fn run(
    target: Target,
    mut params: RegisterParams,
    roots: watch::Sender<Option<RootsSnapshot>>,
    mut states: watch::Receiver<SessionState>,
) {
    let mut backoff = FIRST_RETRY;
    let mut connected_before = false;
    // Autostart only when the proxy starts: a daemon that goes away later may have been stopped
    // on purpose, and under systemd socket activation reconnecting starts it anyway.
    let mut target_now = target.clone();
    loop {
        params.state = states.borrow_and_update().clone();
        match register(&target_now, &params).await {
            Ok((mut client, snapshot)) => {
                if connected_before {
                    eprintln!(
                        "rootsctl proxy: reconnected to rootsd at {}",
                        escape_controls(&target.socket.display().to_string())
                    );
                }
                connected_before = true;
                backoff = FIRST_RETRY;
                if roots.send(Some(snapshot)).is_err() {
                    return;
                }
                match serve(&mut client, &roots, &mut states).await {
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
                changed = states.changed() => if changed.is_err() { return },
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
) -> Result<(Client, RootsSnapshot), ClientError> {
    let mut client = target.connect().await?;
    let result = client.call::<RegisterSession>(params).await?;
    Ok((client, result.snapshot))
}

async fn serve(
    client: &mut Client,
    roots: &watch::Sender<Option<RootsSnapshot>>,
    states: &mut watch::Receiver<SessionState>,
) -> Ended {
    loop {
        tokio::select! {
            pushed = client.next_push::<RootsChanged>() => match pushed {
                Ok(snapshot) => {
                    if roots.send(Some(snapshot)).is_err() {
                        return Ended::ProxyDone;
                    }
                }
                Err(err) => return Ended::Lost(err.to_string()),
            },
            changed = states.changed() => {
                if changed.is_err() {
                    return Ended::ProxyDone;
                }
                let state = states.borrow_and_update().clone();
                if let Err(err) = client.notify::<UpdateSession>(&state).await {
                    return Ended::Lost(err.to_string());
                }
            }
        }
    }
}
