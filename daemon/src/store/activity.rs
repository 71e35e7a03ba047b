//! Whether the runtime that plans changes is still at work, so that the commit thread syncs a
//! burst of changes once, when it ends, rather than its first change alone.
//!
//! Fifty clients that each send a change at once are read and planned one after another by a
//! runtime worker, about 10 µs each. Woken by the first change, the commit thread synced what
//! was queued as soon as it got a core: the first two to four changes, then about half of the
//! rest during that sync's 150–250 µs, then the others, so that a burst took three syncs in a
//! row, each with its publications and answers, where one after the last change would do. The
//! runtime's workers tell this module when they park and unpark ([`worker_parked`],
//! [`worker_unparked`], from tokio's hooks, which `main.rs` installs), and the commit thread,
//! with changes queued, waits until no worker is at work ([`wait_until_idle`]) before it syncs,
//! up to a patience: a runtime kept busy by something else never holds a change back longer.
//!
//! Without the hooks (the tests' runtimes, a writer on another thread) no worker ever counts as
//! at work, and the commit thread syncs at once, as before.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Workers at work: unparked since they last parked. A worker counts only from its first park,
/// so that a thread of the runtime that never parks (its blocking pool's) never counts.
static AT_WORK: AtomicUsize = AtomicUsize::new(0);
/// The commit thread waits for [`AT_WORK`] to reach 0, and the worker that takes it there must
/// wake it.
static AWAITED: AtomicBool = AtomicBool::new(false);
static IDLE: Mutex<()> = Mutex::new(());
static BECAME_IDLE: Condvar = Condvar::new();

thread_local! {
    /// This worker is counted in [`AT_WORK`].
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

/// A runtime worker is about to park: it found nothing to do.
pub fn worker_parked() {
    if !COUNTED.replace(false) {
        return;
    }
    if AT_WORK.fetch_sub(1, Ordering::SeqCst) == 1 && AWAITED.load(Ordering::SeqCst) {
        // Under the lock, so that the commit thread is either still before its check (and will
        // see 0) or already waiting (and is woken).
        let _idle = IDLE.lock().unwrap_or_else(PoisonError::into_inner);
        BECAME_IDLE.notify_all();
    }
}

/// A runtime worker unparked: it may plan changes from now on.
pub fn worker_unparked() {
    if !COUNTED.replace(true) {
        AT_WORK.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits until no runtime worker is at work, or `patience` has passed.
pub fn wait_until_idle(patience: Duration) {
    if AT_WORK.load(Ordering::SeqCst) == 0 {
        return;
    }
    let deadline = Instant::now() + patience;
    let mut idle = IDLE.lock().unwrap_or_else(PoisonError::into_inner);
    AWAITED.store(true, Ordering::SeqCst);
    while AT_WORK.load(Ordering::SeqCst) > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        idle = BECAME_IDLE
            .wait_timeout(idle, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    AWAITED.store(false, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    /// The counters are the process's: one test at a time changes them.
    static SERIAL: Mutex<()> = Mutex::new(());

    /// A worker counted at work (it parked once, then unparked), which parks when told to.
    fn worker_at_work() -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
        let (unparked, at_work) = mpsc::channel();
        let (park, parking) = mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            // A worker is counted from its first park on.
            worker_parked();
            worker_unparked();
            unparked.send(()).unwrap();
            parking.recv().unwrap();
            worker_parked();
        });
        at_work.recv().unwrap();
        (park, worker)
    }

    #[test]
    fn the_wait_ends_when_the_last_worker_parks_or_at_its_patience() {
        let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        // Nobody at work: no wait at all.
        let start = Instant::now();
        wait_until_idle(Duration::from_secs(60));
        assert!(start.elapsed() < Duration::from_secs(10));

        // A worker at work, which parks once the commit thread waits.
        let (park, worker) = worker_at_work();
        let waiting = std::thread::spawn(move || {
            let start = Instant::now();
            wait_until_idle(Duration::from_secs(60));
            start.elapsed()
        });
        while !AWAITED.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        park.send(()).unwrap();
        worker.join().unwrap();
        let waited = waiting.join().unwrap();
        assert!(waited < Duration::from_secs(10), "woken when it parked");
        assert_eq!(AT_WORK.load(Ordering::SeqCst), 0);

        // A worker that stays at work holds the commit thread back only for the patience.
        let (park, busy) = worker_at_work();
        let start = Instant::now();
        wait_until_idle(Duration::from_millis(20));
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
        park.send(()).unwrap();
        busy.join().unwrap();
    }

    #[test]
    fn a_thread_that_never_parked_is_not_counted() {
        let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        // As the runtime's blocking threads, and a worker before its first park.
        std::thread::spawn(worker_parked).join().unwrap();
        assert_eq!(AT_WORK.load(Ordering::SeqCst), 0);
        let start = Instant::now();
        wait_until_idle(Duration::from_secs(60));
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}
