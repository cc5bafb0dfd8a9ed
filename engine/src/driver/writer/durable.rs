//! Durability off the writer's thread. SQLite runs with `synchronous=NORMAL`: a commit writes its
//! pages into the WAL and returns without waiting for the disk. Each committed batch hands what
//! it owes its callers (answers, handed-out tasks, handler invocations, completion watchers) to
//! this thread, which makes the WAL durable (`fdatasync`, one for every batch that queued while
//! the last one ran) and only then delivers them, in commit order. The writer meanwhile applies
//! and commits the next batch, so its CPU work overlaps the disk's flush instead of waiting for it
//! (BENCHMARKS.md, "The performance goals", fourth look).
//!
//! What a caller is told is as durable as with `synchronous=FULL`: nothing is answered before
//! the `fdatasync` that covers its commit has returned. What changes is only what other
//! connections may *read*: a commit is visible to the engine's readers for the length of one
//! flush before it is durable, and a power cut (not a process crash: the WAL is in the page
//! cache then) in that window loses it, as it loses every commit nobody was answered for; the
//! execution then continues from the last durable commit, and its steps are idempotent. SQLite
//! itself syncs the WAL before each checkpoint and the database after it, and the WAL's header
//! when it is reused, in this mode as in FULL.
//!
//! A failed `fdatasync` leaves it unknown which pages reached the disk, and the kernel may have
//! dropped them from the page cache (a later `fdatasync` would then succeed with the data lost):
//! the process aborts, and the next open recovers from what the disk holds.

use std::fs::File;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// What a batch owes once its commit is durable.
pub(super) type After = Box<dyn FnOnce() + Send>;

pub(super) struct Syncer {
    queue: Option<mpsc::Sender<Vec<After>>>,
    thread: Option<JoinHandle<()>>,
}

/// Makes what was written durable (`fdatasync` of the WAL).
type Flush = Box<dyn FnMut() -> std::io::Result<()> + Send>;

impl Syncer {
    /// `wal`: the file to flush before delivering (the database's `-wal`), or `None` when commits
    /// need not be durable ([`crate::SyncPolicy::Normal`]); deliveries still keep commit order.
    pub(super) fn start(wal: Option<File>) -> std::io::Result<Syncer> {
        Syncer::with_flush(wal.map(|wal| Box::new(move || wal.sync_data()) as Flush))
    }

    fn with_flush(flush: Option<Flush>) -> std::io::Result<Syncer> {
        let (queue, batches) = mpsc::channel::<Vec<After>>();
        let thread = std::thread::Builder::new()
            .name("sfn-engine-sync".to_owned())
            .spawn(move || run(flush, &batches))?;
        Ok(Syncer {
            queue: Some(queue),
            thread: Some(thread),
        })
    }

    /// Delivers `work` once every commit so far is durable.
    pub(super) fn after_sync(&self, work: Vec<After>) {
        if work.is_empty() {
            return;
        }
        if let Some(queue) = &self.queue {
            // The thread only ends once the queue is closed, so the send cannot fail.
            let _ = queue.send(work);
        }
    }

    /// Waits until everything queued has been delivered; later work is dropped.
    pub(super) fn finish(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.finish();
    }
}

fn run(mut flush: Option<Flush>, batches: &mpsc::Receiver<Vec<After>>) {
    while let Ok(first) = batches.recv() {
        let mut due = vec![first];
        due.extend(batches.try_iter());
        if let Some(flush) = flush.as_mut()
            && let Err(e) = flush()
        {
            tracing::error!(error = %e, "the engine's WAL could not be made durable; stopping the process");
            std::process::abort();
        }
        for work in due.into_iter().flatten() {
            work();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    fn recorder(seen: &Arc<Mutex<Vec<u32>>>, n: u32) -> After {
        let seen = seen.clone();
        Box::new(move || seen.lock().unwrap().push(n))
    }

    #[test]
    fn work_is_delivered_in_the_order_it_was_queued_and_all_of_it_before_finish_returns() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let dir = tempfile::tempdir().unwrap();
        let wal = File::create(dir.path().join("x-wal")).unwrap();
        let mut syncer = Syncer::start(Some(wal)).unwrap();
        for batch in 0..50 {
            syncer.after_sync((0..3).map(|i| recorder(&seen, batch * 3 + i)).collect());
        }
        syncer.finish();
        assert_eq!(*seen.lock().unwrap(), (0..150).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_is_delivered_before_the_flush_that_covers_it_has_returned() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (flushing_tx, flushing) = mpsc::channel::<()>();
        let (release, released) = mpsc::channel::<()>();
        let flush: Flush = Box::new(move || {
            flushing_tx.send(()).unwrap();
            released.recv().unwrap();
            Ok(())
        });
        let mut syncer = Syncer::with_flush(Some(flush)).unwrap();
        syncer.after_sync(vec![recorder(&seen, 1)]);
        flushing.recv_timeout(Duration::from_secs(10)).unwrap();
        // The first flush is under way: work queued now waits for a flush of its own.
        syncer.after_sync(vec![recorder(&seen, 2)]);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            seen.lock().unwrap().is_empty(),
            "delivered during its flush"
        );
        release.send(()).unwrap();
        flushing.recv_timeout(Duration::from_secs(10)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            *seen.lock().unwrap(),
            [1],
            "the second batch waits for the second flush"
        );
        release.send(()).unwrap();
        syncer.finish();
        assert_eq!(*seen.lock().unwrap(), [1, 2]);
    }
}
