//! Letting go of replaced workspace states on a thread of their own.
//!
//! A workspace's state shares its roots with the states before and after it, one reference
//! count per root (`model.rs`), so the last reference to a state of 2,000 roots releases 2,000
//! counts, each on its own cache line. On the commit thread that work came between one change's
//! answer and the next change's planning and sync: a rename at 2,000 roots was answered in
//! 1.21–1.25 times the time of one at 10 (`rootsd-bench --only by-size`), against 1.07–1.12
//! with the reaper. The reaper takes it off that path: the commit thread hands it what it
//! replaced, and the reaper drops it while the commit thread goes on.
//!
//! The commit thread hands over each sync's replaced states at once, as one batch: handed over
//! one by one, every state woke the reaper from its wait, a switch between threads per state and
//! two per change in a burst of changes.
//!
//! The queue is bounded: when it is full (the reaper is behind), or the thread could not be
//! started, the batch is dropped where it was retired, as before.

use std::sync::Arc;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::store::model::StoredWorkspaceV1;

/// How many batches may wait for the reaper. A batch holds at most two states per change of one
/// sync (the committed state's and the database's), each with its roots' list (16 KB at 2,000
/// roots), and batches only wait while writes come faster than the reaper drops them.
const WAITING: usize = 64;

/// The states one sync replaced.
pub type Retired = Vec<Arc<StoredWorkspaceV1>>;

pub struct Reaper {
    queue: Option<SyncSender<Retired>>,
    thread: Option<JoinHandle<()>>,
}

impl Reaper {
    pub fn start() -> Self {
        let (queue, retired) = sync_channel::<Retired>(WAITING);
        let thread = std::thread::Builder::new()
            .name("rootsd-reaper".to_owned())
            .spawn(move || {
                for batch in retired {
                    drop(batch);
                }
            });
        match thread {
            Ok(thread) => Self {
                queue: Some(queue),
                thread: Some(thread),
            },
            Err(error) => {
                tracing::warn!(%error, "could not start the reaper thread; replaced states are dropped where they are replaced");
                Self {
                    queue: None,
                    thread: None,
                }
            }
        }
    }

    /// Lets go of `states`, on the reaper's thread if it has room, else here.
    pub fn retire(&self, states: Retired) {
        if states.is_empty() {
            return;
        }
        if let Some(queue) = &self.queue {
            // A full queue, or a reaper gone, hands the batch back, and it is dropped here.
            let _ = queue.try_send(states);
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has dropped what waits.
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_state_is_released_and_a_full_queue_drops_in_place() {
        let reaper = Reaper::start();
        let state = Arc::new(StoredWorkspaceV1::default());
        let watcher = Arc::downgrade(&state);
        reaper.retire(vec![state]);
        // Many more batches than the queue holds: none is kept, whichever thread drops it.
        let many: Vec<_> = (0..WAITING * 4)
            .map(|_| Arc::new(StoredWorkspaceV1::default()))
            .collect();
        let watchers: Vec<_> = many.iter().map(Arc::downgrade).collect();
        for pair in many.chunks(2) {
            reaper.retire(pair.to_vec());
        }
        drop(many);
        drop(reaper);
        assert!(
            watcher.upgrade().is_none(),
            "the retired state was released"
        );
        assert!(
            watchers.iter().all(|w| w.upgrade().is_none()),
            "every retired state was released, queued or not"
        );
    }
}
