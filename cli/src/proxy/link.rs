//! The proxy's connection to rootsd: register the session, receive the workspace's lists, report
//! what the server fetched, and survive the daemon going away.
//!
//! The link runs as its own task so that the relay never waits for the daemon: roots are served
//! from the last list the daemon pushed, and reports queue while the daemon is away.

use std::time::Duration;

use rootsd_proto::wire::{
    EmptyParams, FetchedParams, RegisterParams, RegisterSession, RootsChanged, RootsSnapshot,
    SessionFetched, SessionNotified, SessionUpdate, UpdateSession,
};
use tokio::sync::mpsc;

use super::relay::Report;
use crate::autostart::Target;
use crate::client::{Client, ClientError};

/// Reconnection backoff bounds.
const FIRST_RETRY: Duration = Duration::from_millis(50);
const LAST_RETRY: Duration = Duration::from_secs(2);

/// What the link tells the relay.
#[derive(Debug)]
pub enum LinkEvent {
    /// The newest list for the session's workspace (on registration and on every change).
    Roots(RootsSnapshot),
}

/// Starts the link. Reports sent on the returned channel reach the daemon; dropping it ends the
/// link.
pub fn spawn(
    target: Target,
    params: RegisterParams,
    events: mpsc::UnboundedSender<LinkEvent>,
) -> mpsc::UnboundedSender<Report> {
    let (reports, receiver) = mpsc::unbounded_channel();
    tokio::spawn(run(target, params, events, receiver));
    reports
}

async fn run(
    target: Target,
    mut params: RegisterParams,
    events: mpsc::UnboundedSender<LinkEvent>,
    mut reports: mpsc::UnboundedReceiver<Report>,
) {
    let mut backoff = FIRST_RETRY;
    let mut connected_before = false;
    // Autostart only when the proxy starts: a daemon that goes away later may have been stopped
    // on purpose, and under systemd socket activation reconnecting starts it anyway.
    let mut target_now = target.clone();
    loop {
        match register(&target_now, &params).await {
            Ok((mut client, snapshot)) => {
                if connected_before {
                    eprintln!(
                        "rootsctl proxy: reconnected to rootsd at {}",
                        target.socket.display()
                    );
                }
                connected_before = true;
                backoff = FIRST_RETRY;
                if events.send(LinkEvent::Roots(snapshot)).is_err() {
                    return;
                }
                match serve(&mut client, &mut params.update, &events, &mut reports).await {
                    Ended::ProxyDone => return,
                    Ended::Lost(reason) => {
                        eprintln!(
                            "rootsctl proxy: lost rootsd ({reason}); serving the last roots and reconnecting"
                        );
                    }
                }
            }
            Err(err) if !connected_before && backoff == FIRST_RETRY => {
                eprintln!("rootsctl proxy: {err}; relaying anyway and retrying in the background");
            }
            Err(_) => {}
        }
        target_now.autostart = false;
        // Keep taking reports while away, so the registration that follows is up to date.
        let retry_at = tokio::time::Instant::now() + backoff;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(retry_at) => break,
                report = reports.recv() => match report {
                    Some(report) => apply(&mut params.update, &report),
                    None => return,
                },
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
    update: &mut SessionUpdate,
    events: &mpsc::UnboundedSender<LinkEvent>,
    reports: &mut mpsc::UnboundedReceiver<Report>,
) -> Ended {
    loop {
        tokio::select! {
            pushed = client.next_push::<RootsChanged>() => match pushed {
                Ok(snapshot) => {
                    if events.send(LinkEvent::Roots(snapshot)).is_err() {
                        return Ended::ProxyDone;
                    }
                }
                Err(err) => return Ended::Lost(err.to_string()),
            },
            report = reports.recv() => {
                let Some(report) = report else { return Ended::ProxyDone };
                apply(update, &report);
                let sent = match report {
                    Report::Update { .. } => client.notify::<UpdateSession>(update).await,
                    Report::Fetched(revision) => {
                        client.notify::<SessionFetched>(&FetchedParams { revision }).await
                    }
                    Report::Notified => client.notify::<SessionNotified>(&EmptyParams {}).await,
                };
                if let Err(err) = sent {
                    return Ended::Lost(err.to_string());
                }
            }
        }
    }
}

/// Folds a report into what the next registration will tell the daemon.
fn apply(update: &mut SessionUpdate, report: &Report) {
    match report {
        Report::Update {
            era,
            protocol_version,
            server,
        } => {
            update.era = *era;
            update.protocol_version = protocol_version.clone();
            update.server = server.clone();
        }
        Report::Fetched(revision) => update.fetched_revision = Some(*revision),
        Report::Notified => update.notifications_sent += 1,
    }
}
