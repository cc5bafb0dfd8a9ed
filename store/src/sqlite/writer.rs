//! Group commit: one writer thread owns the write connection and runs every queued write in one
//! SQLite transaction, each write inside a savepoint of its own, then commits once and hands the
//! answers to a syncer thread, which flushes the WAL (one fsync for the commits queued since its
//! last) and only then answers the writers, while this thread runs the next group (the `durable`
//! crate). Under load a commit carries as many writes as arrived
//! during the previous one, so the store is bound by CPU, not by the disk's fsyncs per second.
//!
//! A write sees the writes queued before it, as if run alone in that order, and a write that
//! fails (or panics, or returns without committing its savepoint) is rolled back alone. Nobody
//! is answered before the commit that carries their write is durable; a commit that fails fails
//! every write of its group.

use crate::error::StoreError;
use durable::{After, Syncer};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use std::fs::File;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::{JoinHandle, ThreadId};
use tokio::sync::oneshot;

/// The most writes one commit carries: enough to amortise an fsync, few enough that the first
/// writer of a group does not wait long for the last one's work.
const MAX_GROUP: usize = 512;

/// What a write leaves to do once its group's commit is known: answer its caller.
type Deliver = Box<dyn FnOnce(Option<StoreError>) + Send>;

/// A queued write.
trait Job: Send {
    /// Runs the write inside the group's transaction; the answer waits for the commit.
    fn run(self: Box<Self>, tx: &mut Transaction<'_>) -> Deliver;
    /// The group's transaction could not start: answers `error` without running.
    fn fail(self: Box<Self>, error: StoreError);
}

struct Queued<F, T> {
    write: F,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<F, T> Job for Queued<F, T>
where
    T: Send + 'static,
    F: for<'c> FnOnce(&mut Transaction<'c>) -> Result<T, StoreError> + Send + 'static,
{
    fn run(self: Box<Self>, tx: &mut Transaction<'_>) -> Deliver {
        let Queued { write, reply } = *self;
        let result = catch_unwind(AssertUnwindSafe(|| write(tx))).unwrap_or_else(|panic| {
            Err(StoreError::Internal(format!(
                "a store write panicked: {}",
                panic_text(panic.as_ref())
            )))
        });
        Box::new(move |commit_failed| {
            let _ = reply.send(match (result, commit_failed) {
                (Ok(_), Some(e)) => Err(e),
                (result, _) => result,
            });
        })
    }

    fn fail(self: Box<Self>, error: StoreError) {
        let _ = self.reply.send(Err(error));
    }
}

/// Counters of the writer thread, for `/metrics` and the benchmarks.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Transactions committed that wrote (each flushed by at most one fsync of the WAL: one
    /// covers every commit that queued while the last ran).
    pub commits: AtomicU64,
    /// Writes those commits carried (a failed one, rolled back to its savepoint, included).
    pub writes: AtomicU64,
}

/// The handle of the writer thread; dropping it lets the queued writes finish, then closes the
/// connection.
pub(super) struct Writer {
    jobs: Option<mpsc::Sender<Box<dyn Job>>>,
    thread: Option<JoinHandle<()>>,
    thread_id: ThreadId,
    stats: Arc<WriterStats>,
}

impl Writer {
    /// `wal`: the WAL to flush before answering for a commit, or `None` (no durability asked).
    pub(super) fn start(conn: Connection, wal: Option<File>) -> Result<Writer, StoreError> {
        let (jobs, queue) = mpsc::channel::<Box<dyn Job>>();
        let stats = Arc::new(WriterStats::default());
        let cannot =
            |e: std::io::Error| StoreError::Internal(format!("cannot start the store writer: {e}"));
        let mut syncer = Syncer::start("store-sync", wal).map_err(cannot)?;
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn({
                let stats = stats.clone();
                move || {
                    let mut conn = conn;
                    run(&mut conn, &queue, &stats, &syncer);
                    // Every answer is given before the connection closes and the thread (and
                    // the store's drop) ends.
                    syncer.finish();
                }
            })
            .map_err(cannot)?;
        Ok(Writer {
            jobs: Some(jobs),
            thread_id: thread.thread().id(),
            thread: Some(thread),
            stats,
        })
    }

    pub(super) fn stats(&self) -> &WriterStats {
        &self.stats
    }

    /// Queues `f` and waits until the commit that carries it is durable.
    pub(super) async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&mut Transaction<'c>) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Box::new(Queued { write: f, reply });
        let stopped = || StoreError::Unavailable("the store is closed".into());
        self.jobs
            .as_ref()
            .ok_or_else(stopped)?
            .send(job)
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has committed what was queued; waiting for
        // it closes the connection before the store is gone (a reopen then finds the WAL
        // checkpointed). The thread never drops a store itself, but if a write's closure did,
        // waiting for itself would hang.
        self.jobs.take();
        if std::thread::current().id() != self.thread_id
            && let Some(thread) = self.thread.take()
        {
            let _ = thread.join();
        }
    }
}

fn run(
    conn: &mut Connection,
    queue: &mpsc::Receiver<Box<dyn Job>>,
    stats: &WriterStats,
    syncer: &Syncer,
) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while let Ok(first) = queue.recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        commit_group(conn, &mut group, stats, syncer);
    }
}

fn commit_group(
    conn: &mut Connection,
    group: &mut Vec<Box<dyn Job>>,
    stats: &WriterStats,
    syncer: &Syncer,
) {
    let size = group.len() as u64;
    let changes_before = conn.total_changes();
    let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => {
            let e = StoreError::from(e);
            tracing::error!(error = %e, writes = size, "a store transaction did not start");
            for job in group.drain(..) {
                job.fail(e.clone());
            }
            return;
        }
    };
    let deliveries: Vec<Deliver> = group.drain(..).map(|job| job.run(&mut tx)).collect();
    match tx.commit() {
        Ok(()) => {
            // A group whose writes all declined (conditions that did not hold) wrote nothing
            // to disk: it is no commit in the sense of the metric (one fsync).
            if conn.total_changes() != changes_before {
                stats.commits.fetch_add(1, Ordering::Relaxed);
            }
            stats.writes.fetch_add(size, Ordering::Relaxed);
            syncer.after_sync(
                deliveries
                    .into_iter()
                    .map(|deliver| Box::new(move || deliver(None)) as After)
                    .collect(),
            );
        }
        Err(e) => {
            let e = StoreError::from(e);
            tracing::error!(error = %e, writes = size, "a store commit failed");
            // After the answers of the commits before, as every answer is.
            syncer.after_sync(
                deliveries
                    .into_iter()
                    .map(|deliver| {
                        let e = e.clone();
                        Box::new(move || deliver(Some(e))) as After
                    })
                    .collect(),
            );
        }
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}
