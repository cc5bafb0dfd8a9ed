//! Group commit's last step off the writer's thread, for the two SQLite writers of the service
//! (the embedded engine's and the store's). SQLite runs with `synchronous=NORMAL`: a commit writes
//! its pages into the WAL and returns without waiting for the disk. The writer hands what the
//! commit owes (its callers' answers, the tasks it handed out, the handlers it invokes) to a
//! [`Syncer`], whose thread makes the WAL durable (`fdatasync`, one for every commit that queued
//! while the last one ran) and only then delivers them, in commit order. The writer meanwhile
//! runs and commits the next group, so its CPU work overlaps the disk's flush instead of
//! waiting for it (docs/benchmarks/performance-goals.md, the fourth look).
//!
//! What a caller is told is as durable as with `synchronous=FULL`: nothing is delivered before
//! the `fdatasync` that covers its commit has returned. What changes is only what other
//! connections may *read*: a commit is visible to readers for the length of one flush before it
//! is durable, and a power cut (not a process crash: the WAL is in the page cache then) in that
//! window loses it, as it loses every commit nobody was answered for. SQLite itself syncs the WAL
//! before each checkpoint and the database after it, and the WAL's header when it is reused, in
//! this mode as in FULL.
//!
//! A commit a request waits on (the store's intake of an order) may be flushed *urgently*
//! ([`Syncer::after_sync_urgent`]): a flush starts for it at once, beside the one under way,
//! instead of waiting for that one to return first (with the WAL flushed ~1,200 times a second
//! under load, half the time a flush is under way, and its p99 is ~1.7 ms). An `fdatasync` makes
//! durable everything written to the file before it was called, so a flush started after a
//! commit covers it and every commit before it, and whichever flush returns first makes all it
//! covers deliverable, still in commit order. Only a flush of other work is overtaken so: an
//! urgent commit waits for an urgent flush under way, as any commit does, so that a stream of
//! them (an intake at saturation) is flushed once for all that queued meanwhile, not twice as
//! often (overlapping every flush cost 4 – 10 % of the accepts a second at saturation).
//!
//! A failed `fdatasync` leaves it unknown which pages reached the disk, and the kernel may have
//! dropped them from the page cache (a later `fdatasync` would then succeed with the data lost):
//! the process aborts, and the next open recovers from what the disk holds.

use std::collections::VecDeque;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// What a commit owes once it is durable.
pub type After = Box<dyn FnOnce() + Send>;

/// The flushing threads of one database.
pub struct Syncer {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// Makes what was written durable (`fdatasync` of the WAL); called from several threads at once
/// when urgent work overlaps a flush.
type Flush = Box<dyn Fn() -> std::io::Result<()> + Send + Sync>;

struct Shared {
    state: Mutex<State>,
    /// Told when work is queued that a waiting flusher can start a flush for, and when the
    /// syncer closes.
    changed: Condvar,
    flush: Option<Flush>,
    /// At most this many flushes at once (the first, plus those started for urgent work).
    flushers: usize,
}

#[derive(Default)]
struct State {
    /// Batches queued and not yet delivered, oldest first, with their sequence numbers.
    waiting: VecDeque<(u64, Vec<After>)>,
    /// The sequence number of the next batch queued.
    next: u64,
    /// Every batch numbered below this is covered by a flush that has started.
    started: u64,
    /// Every batch numbered below this is durable: a flush that covers it has returned.
    durable: u64,
    /// Flushes under way.
    flushing: usize,
    /// Flushes under way that were started with urgent work among what they cover.
    urgent_flushing: usize,
    /// An urgent batch is queued that no flush started so far covers.
    urgent: bool,
    /// A thread is delivering (deliveries are made by one thread at a time, in order).
    delivering: bool,
    closed: bool,
}

impl State {
    /// Whether a flush may start now: there is work no flush covers, and either none is under
    /// way, or the work is urgent, no flush under way is urgent, and another may run beside.
    fn may_flush(&self, flushers: usize) -> bool {
        self.next > self.started
            && (self.flushing == 0
                || (self.urgent && self.urgent_flushing == 0 && self.flushing < flushers))
    }
}

impl Syncer {
    /// `wal`: the file to flush before delivering (see [`wal_of`]), or `None` when commits need
    /// not be durable; deliveries still keep commit order. `name`: the threads'. `flushers`: how
    /// many flushes may run at once (1: urgent work waits like any other; 2: an urgent batch
    /// starts its flush beside a flush of other work under way).
    pub fn start(name: &str, wal: Option<File>, flushers: usize) -> std::io::Result<Syncer> {
        Syncer::with_flush(
            name,
            wal.map(|wal| Box::new(move || wal.sync_data()) as Flush),
            flushers,
        )
    }

    fn with_flush(name: &str, flush: Option<Flush>, flushers: usize) -> std::io::Result<Syncer> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            flush,
            flushers: flushers.max(1),
        });
        let mut syncer = Syncer {
            shared: shared.clone(),
            threads: Vec::new(),
        };
        for _ in 0..shared.flushers {
            let shared = shared.clone();
            let thread = std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(move || run(&shared))?;
            syncer.threads.push(thread);
        }
        Ok(syncer)
    }

    /// Delivers `work` once every commit so far is durable.
    pub fn after_sync(&self, work: Vec<After>) {
        self.queue(work, false);
    }

    /// As [`Syncer::after_sync`], and a flush for it starts at once even while a flush of other
    /// (not urgent) work is under way, when this syncer has more than one flusher; it waits for
    /// an urgent flush under way, as any work does. For a commit a request waits on.
    pub fn after_sync_urgent(&self, work: Vec<After>) {
        self.queue(work, true);
    }

    fn queue(&self, work: Vec<After>, urgent: bool) {
        if work.is_empty() {
            return;
        }
        let mut state = self.shared.lock();
        if state.closed {
            return;
        }
        let seq = state.next;
        state.next += 1;
        state.waiting.push_back((seq, work));
        state.urgent |= urgent;
        // A flusher is woken only when it can start a flush: while one is under way, the work
        // waits for it to return (and that thread to look again), without a wake-up a commit.
        let wake = state.may_flush(self.shared.flushers);
        drop(state);
        if wake {
            self.shared.changed.notify_one();
        }
    }

    /// Waits until everything queued has been delivered; later work is dropped.
    pub fn finish(&mut self) {
        self.shared.lock().closed = true;
        self.shared.changed.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is only changed in small steps that cannot panic midway.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Delivers every durable batch, in order, unless another thread is at it (it will
    /// deliver these too before it stops).
    fn deliver<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        if state.delivering {
            return state;
        }
        state.delivering = true;
        loop {
            let mut due = Vec::new();
            while state
                .waiting
                .front()
                .is_some_and(|(seq, _)| *seq < state.durable)
            {
                due.extend(state.waiting.pop_front().map(|(_, work)| work));
            }
            if due.is_empty() {
                break;
            }
            drop(state);
            for work in due.into_iter().flatten() {
                // A delivery that panics (its message is with the panic hook) is its own
                // caller's loss: the deliveries after it are still made, and this thread stays
                // able to make them, where it would otherwise stop every answer to come.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).is_err() {
                    tracing::error!("a delivery after a WAL flush panicked; the others go on");
                }
            }
            state = self.lock();
        }
        state.delivering = false;
        state
    }
}

/// The WAL of the database at `db`, opened for flushing, with its directory entry made durable:
/// SQLite creates the file when the database is first opened in WAL mode and, with
/// `synchronous=NORMAL`, syncs the directory only at its first checkpoint. Call it once a
/// connection has the database open: the file then lives as long as a connection does (SQLite
/// truncates it in place, never replaces it).
pub fn wal_of(db: &Path) -> std::io::Result<File> {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    let wal = File::open(&name)?;
    let dir = match db.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()?;
    Ok(wal)
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A flusher thread: starts a flush whenever one may start, delivers what it made durable,
/// and ends once the syncer is closed and everything queued is delivered.
fn run(shared: &Shared) {
    let mut state = shared.lock();
    loop {
        if state.may_flush(shared.flushers) {
            let upto = state.next;
            let urgent = std::mem::take(&mut state.urgent);
            state.started = upto;
            state.flushing += 1;
            state.urgent_flushing += usize::from(urgent);
            drop(state);
            if let Some(flush) = &shared.flush
                && let Err(e) = flush()
            {
                tracing::error!(error = %e, "a WAL could not be made durable; stopping the process");
                std::process::abort();
            }
            state = shared.lock();
            state.flushing -= 1;
            state.urgent_flushing -= usize::from(urgent);
            state.durable = state.durable.max(upto);
            state = shared.deliver(state);
            // This thread looks for more work itself; the other is woken only to end.
            if state.closed {
                shared.changed.notify_all();
            }
            continue;
        }
        if state.closed && state.next == state.started && state.flushing == 0 {
            break;
        }
        state = shared
            .changed
            .wait(state)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn recorder(seen: &Arc<Mutex<Vec<u32>>>, n: u32) -> After {
        let seen = seen.clone();
        Box::new(move || seen.lock().unwrap().push(n))
    }

    /// A flush the test holds until it lets it return: each flush, as it starts, hands the
    /// test the sender that releases it.
    fn held_flushes() -> (Flush, mpsc::Receiver<mpsc::Sender<()>>) {
        let (started, flushes) = mpsc::channel::<mpsc::Sender<()>>();
        let flush: Flush = Box::new(move || {
            let (release, released) = mpsc::channel();
            // A test that fails drops its releases: the flush then returns, and the syncer
            // can finish (as the failing test's unwinding drops it) instead of hanging.
            let _ = started.send(release);
            let _ = released.recv();
            Ok(())
        });
        (flush, flushes)
    }

    fn next_flush(flushes: &mpsc::Receiver<mpsc::Sender<()>>) -> mpsc::Sender<()> {
        flushes
            .recv_timeout(Duration::from_secs(10))
            .expect("a flush should have started")
    }

    /// Gives the syncer's threads time to do what they would wrongly do (deliver, start a
    /// flush) before the test looks: a slow machine can only make such a check pass without
    /// having looked long, never fail falsely.
    fn settle() {
        std::thread::sleep(Duration::from_millis(50));
    }

    #[test]
    fn work_is_delivered_in_the_order_it_was_queued_and_all_of_it_before_finish_returns() {
        for flushers in [1, 2] {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let dir = tempfile::tempdir().unwrap();
            let wal = File::create(dir.path().join("x-wal")).unwrap();
            let mut syncer = Syncer::start("test-sync", Some(wal), flushers).unwrap();
            for batch in 0..300 {
                let work = (0..3).map(|i| recorder(&seen, batch * 3 + i)).collect();
                // Every third batch urgent: flushes overlap and return in either order.
                if batch % 3 == 0 {
                    syncer.after_sync_urgent(work);
                } else {
                    syncer.after_sync(work);
                }
            }
            syncer.finish();
            assert_eq!(
                *seen.lock().unwrap(),
                (0..900).collect::<Vec<_>>(),
                "with {flushers} flusher(s)"
            );
        }
    }

    #[test]
    fn under_overlapping_flushes_each_batch_is_delivered_after_a_flush_begun_since_it_was_queued() {
        use std::time::Instant;
        // Flushes of varying length, batches urgent or not at varying intervals: every batch
        // must be delivered, in order, and only after some flush that began once the batch was
        // queued has returned (the instant taken before queuing, so the check cannot fail
        // falsely; a delivery without any such flush fails it).
        let flushes: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
        let flush: Flush = Box::new({
            let flushes = flushes.clone();
            let calls = Mutex::new(0u64);
            move || {
                let began = Instant::now();
                let n = {
                    let mut calls = calls.lock().unwrap();
                    *calls += 1;
                    *calls
                };
                std::thread::sleep(Duration::from_micros(n * 7919 % 400));
                flushes.lock().unwrap().push((began, Instant::now()));
                Ok(())
            }
        });
        let delivered: Arc<Mutex<Vec<(u32, Instant, Instant)>>> = Arc::default();
        let mut syncer = Syncer::with_flush("test-sync", Some(flush), 2).unwrap();
        for i in 0..2000u32 {
            let queued = Instant::now();
            let delivered = delivered.clone();
            let work: After =
                Box::new(move || delivered.lock().unwrap().push((i, queued, Instant::now())));
            if i % 5 == 0 || i % 7 == 0 {
                syncer.after_sync_urgent(vec![work]);
            } else {
                syncer.after_sync(vec![work]);
            }
            if i % 3 == 0 {
                std::thread::sleep(Duration::from_micros(u64::from(i) * 31 % 200));
            }
        }
        syncer.finish();
        let delivered = delivered.lock().unwrap();
        let flushes = flushes.lock().unwrap();
        assert_eq!(
            delivered.iter().map(|(i, ..)| *i).collect::<Vec<_>>(),
            (0..2000).collect::<Vec<_>>()
        );
        for (i, queued, at) in delivered.iter() {
            assert!(
                flushes
                    .iter()
                    .any(|(began, ended)| began >= queued && ended <= at),
                "batch {i} was delivered before any flush begun after it had returned"
            );
        }
    }

    #[test]
    fn a_delivery_that_panics_does_not_stop_the_others() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let dir = tempfile::tempdir().unwrap();
        let wal = File::create(dir.path().join("x-wal")).unwrap();
        let syncer = Syncer::start("test-sync", Some(wal), 2).unwrap();
        syncer.after_sync(vec![
            recorder(&seen, 1),
            Box::new(|| panic!("a delivery's own bug")),
            recorder(&seen, 2),
        ]);
        syncer.after_sync_urgent(vec![recorder(&seen, 3)]);
        syncer.after_sync(vec![recorder(&seen, 4)]);
        // Finished on a thread of its own: a syncer that a panic stopped would never finish,
        // and the test must fail, not hang.
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            let mut syncer = syncer;
            syncer.finish();
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(10))
            .expect("the syncer did not finish: a delivery's panic stopped it");
        assert_eq!(*seen.lock().unwrap(), [1, 2, 3, 4]);
    }

    #[test]
    fn nothing_is_delivered_before_the_flush_that_covers_it_has_returned() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (flush, flushes) = held_flushes();
        let mut syncer = Syncer::with_flush("test-sync", Some(flush), 2).unwrap();
        syncer.after_sync(vec![recorder(&seen, 1)]);
        let first = next_flush(&flushes);
        // The first flush is under way: work queued now (not urgent) waits for a flush of its
        // own, which waits for the first to return.
        syncer.after_sync(vec![recorder(&seen, 2)]);
        settle();
        assert!(
            seen.lock().unwrap().is_empty(),
            "delivered during its flush"
        );
        assert!(
            flushes.try_recv().is_err(),
            "a second flush started for work that is not urgent"
        );
        first.send(()).unwrap();
        let second = next_flush(&flushes);
        settle();
        assert_eq!(
            *seen.lock().unwrap(),
            [1],
            "the second batch waits for the second flush"
        );
        second.send(()).unwrap();
        syncer.finish();
        assert_eq!(*seen.lock().unwrap(), [1, 2]);
    }

    /// Waits until `n` deliveries are seen (or gives up after ten seconds).
    fn delivered(seen: &Arc<Mutex<Vec<u32>>>, n: usize) -> Vec<u32> {
        for _ in 0..1000 {
            if seen.lock().unwrap().len() >= n {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        seen.lock().unwrap().clone()
    }

    #[test]
    fn urgent_work_is_flushed_beside_the_flush_under_way_and_delivered_with_all_before_it() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (flush, flushes) = held_flushes();
        let mut syncer = Syncer::with_flush("test-sync", Some(flush), 2).unwrap();
        syncer.after_sync(vec![recorder(&seen, 1)]);
        let first = next_flush(&flushes);
        syncer.after_sync_urgent(vec![recorder(&seen, 2)]);
        // Its flush starts while the first is still held.
        let urgent = next_flush(&flushes);
        // An urgent flush is under way (two in all): another urgent batch waits for it.
        syncer.after_sync_urgent(vec![recorder(&seen, 3)]);
        settle();
        assert!(flushes.try_recv().is_err(), "a third flush ran at once");
        urgent.send(()).unwrap();
        // Returned first, the urgent flush makes everything queued before it durable: batch 1
        // too (a flush covers every commit before it started), in commit order, though the
        // flush started for it is still held.
        assert_eq!(delivered(&seen, 2), [1, 2]);
        // Its place is free: batch 3's flush starts, still beside the held first one.
        next_flush(&flushes).send(()).unwrap();
        assert_eq!(delivered(&seen, 3), [1, 2, 3]);
        first.send(()).unwrap();
        syncer.finish();
        assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);
    }

    #[test]
    fn urgent_work_waits_for_an_urgent_flush_under_way() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (flush, flushes) = held_flushes();
        let mut syncer = Syncer::with_flush("test-sync", Some(flush), 2).unwrap();
        syncer.after_sync_urgent(vec![recorder(&seen, 1)]);
        let first = next_flush(&flushes);
        syncer.after_sync_urgent(vec![recorder(&seen, 2)]);
        settle();
        assert!(
            flushes.try_recv().is_err(),
            "a second flush overtook an urgent one"
        );
        first.send(()).unwrap();
        next_flush(&flushes).send(()).unwrap();
        syncer.finish();
        assert_eq!(*seen.lock().unwrap(), [1, 2]);
    }

    #[test]
    fn with_one_flusher_urgent_work_waits_for_the_flush_under_way() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (flush, flushes) = held_flushes();
        let mut syncer = Syncer::with_flush("test-sync", Some(flush), 1).unwrap();
        syncer.after_sync(vec![recorder(&seen, 1)]);
        let first = next_flush(&flushes);
        syncer.after_sync_urgent(vec![recorder(&seen, 2)]);
        settle();
        assert!(flushes.try_recv().is_err(), "a second flush started");
        first.send(()).unwrap();
        next_flush(&flushes).send(()).unwrap();
        syncer.finish();
        assert_eq!(*seen.lock().unwrap(), [1, 2]);
    }
}
