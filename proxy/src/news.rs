//! What the proxy hears besides the lines it relays: the daemon's lists and acknowledgements,
//! its own signals, a server's exit. These come seldom, so the event loop polls them as one
//! stream kept across its turns ([`News`]), in which only a source that woke the loop is polled
//! again: polling each of them on every turn (a watch channel's `changed()`, the signal stream,
//! a `Child::wait` made anew) cost about a fifth of relaying a line.

use std::future::Future;
use std::process::ExitStatus;

use futures::StreamExt as _;
use futures::stream::{LocalBoxStream, SelectAll};
use rootsd_proto::wire::RootsSnapshot;
use rootsd_relay::PublishAck;
use tokio::sync::watch;

/// One piece of news.
pub(super) enum Item {
    /// The newest list of the session's workspace (`None` until the daemon's first).
    Roots(Option<RootsSnapshot>),
    /// What became of the last publication of the host's roots.
    Ack(Option<PublishAck>),
    /// The proxy's own SIGTERM, SIGINT or SIGHUP.
    Signal(i32),
    /// The server with this pid exited, and was reaped.
    Exited(u32, std::io::Result<ExitStatus>),
}

/// Every source of news, polled together; never ends.
pub(super) struct News {
    sources: SelectAll<LocalBoxStream<'static, Item>>,
}

impl News {
    pub fn new(
        roots: watch::Receiver<Option<RootsSnapshot>>,
        acks: watch::Receiver<Option<PublishAck>>,
        signals: signal_hook_tokio::Signals,
    ) -> Self {
        let mut sources = SelectAll::new();
        sources.push(newest(roots).map(Item::Roots).boxed_local());
        sources.push(newest(acks).map(Item::Ack).boxed_local());
        sources.push(signals.map(Item::Signal).boxed_local());
        // A set whose sources have all ended would end the stream; this one never does.
        sources.push(futures::stream::pending().boxed_local());
        Self { sources }
    }

    /// Tells of the exit of the server with this pid, when `exit` (which reaps it) resolves.
    pub fn watch_exit(
        &mut self,
        pid: u32,
        exit: impl Future<Output = std::io::Result<ExitStatus>> + 'static,
    ) {
        self.sources.push(
            futures::stream::once(async move { Item::Exited(pid, exit.await) }).boxed_local(),
        );
    }

    /// The next piece of news.
    pub async fn next(&mut self) -> Item {
        loop {
            if let Some(item) = self.sources.next().await {
                return item;
            }
        }
    }
}

/// Each new value of a watch channel, once it changes; ends when its sender is gone.
fn newest<T: Clone + 'static>(receiver: watch::Receiver<T>) -> impl futures::Stream<Item = T> {
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.changed().await.ok()?;
        let value = receiver.borrow_and_update().clone();
        Some((value, receiver))
    })
}
