//! Group commit's last step off the writer's thread, for the two SQLite writers of the service
//! (the embedded engine's and the store's). SQLite runs with `synchronous=NORMAL`: a commit writes
//! its pages into the WAL and returns without waiting for the disk. The writer hands what the
//! commit owes (its callers' answers, the tasks it handed out, the handlers it invokes) to a
//! [`Syncer`], whose thread makes the WAL durable (`fdatasync`, one for every commit that queued
//! while the last one ran) and only then delivers them, in commit order. The writer meanwhile
//! runs and commits the next group, so its CPU work overlaps the disk's flush instead of
//! waiting for it (BENCHMARKS.md, "The performance goals", fourth look).
//!
//! What a caller is told is as durable as with `synchronous=FULL`: nothing is delivered before
//! the `fdatasync` that covers its commit has returned. What changes is only what other
//! connections may *read*: a commit is visible to readers for the length of one flush before it
//! is durable, and a power cut (not a process crash: the WAL is in the page cache then) in that
//! window loses it, as it loses every commit nobody was answered for. SQLite itself syncs the WAL
//! before each checkpoint and the database after it, and the WAL's header when it is reused, in
//! this mode as in FULL.
//!
//! A failed `fdatasync` leaves it unknown which pages reached the disk, and the kernel may have
//! dropped them from the page cache (a later `fdatasync` would then succeed with the data lost):
//! the process aborts, and the next open recovers from what the disk holds.

use std::fs::File;
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// What a commit owes once it is durable.
pub type After = Box<dyn FnOnce() + Send>;

/// The flushing thread of one database.
pub struct Syncer {
    queue: Option<mpsc::Sender<Vec<After>>>,
    thread: Option<JoinHandle<()>>,
}

/// Makes what was written durable (`fdatasync` of the WAL).
type Flush = Box<dyn FnMut() -> std::io::Result<()> + Send>;

impl Syncer {
    /// `wal`: the file to flush before delivering (see [`wal_of`]), or `None` when commits need
    /// not be durable; deliveries still keep commit order. `name`: the thread's.
    pub fn start(name: &str, wal: Option<File>) -> std::io::Result<Syncer> {
        Syncer::with_flush(
            name,
            wal.map(|wal| Box::new(move || wal.sync_data()) as Flush),
        )
    }

    fn with_flush(name: &str, flush: Option<Flush>) -> std::io::Result<Syncer> {
        let (queue, batches) = mpsc::channel::<Vec<After>>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || run(flush, &batches))?;
        Ok(Syncer {
            queue: Some(queue),
            thread: Some(thread),
        })
    }

    /// Delivers `work` once every commit so far is durable.
    pub fn after_sync(&self, work: Vec<After>) {
        if work.is_empty() {
            return;
        }
        if let Some(queue) = &self.queue {
            // The thread only ends once the queue is closed, so the send cannot fail.
            let _ = queue.send(work);
        }
    }

    /// Waits until everything queued has been delivered; later work is dropped.
    pub fn finish(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
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

fn run(mut flush: Option<Flush>, batches: &mpsc::Receiver<Vec<After>>) {
    while let Ok(first) = batches.recv() {
        let mut due = vec![first];
        due.extend(batches.try_iter());
        if let Some(flush) = flush.as_mut()
            && let Err(e) = flush()
        {
            tracing::error!(error = %e, "a WAL could not be made durable; stopping the process");
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
        let mut syncer = Syncer::start("test-sync", Some(wal)).unwrap();
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
        let mut syncer = Syncer::with_flush("test-sync", Some(flush)).unwrap();
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
