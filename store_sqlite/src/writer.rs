//! Group commit: one writer thread owns the write connection and runs every queued write in one
//! SQLite transaction, each write inside a savepoint of its own, then commits once and hands the
//! answers to a syncer thread, which flushes the WAL (one fsync for the commits queued since its
//! last) and only then answers the writers, while this thread runs the next group (the `durable`
//! crate). Under load a commit carries as many writes as arrived
//! during the previous one, so the store is bound by CPU, not by the disk's fsyncs per second.
//!
//! Writes wait in one of two lanes ([`Lane`]). A write in the first lane (an order's intake,
//! which a client's request waits on) runs next, before the queued writes of the other lane,
//! and its group is committed as soon as it has run, and flushed at once, beside a flush of
//! the saga's writes under way if any ([`durable::Syncer::after_sync_urgent`]): it waits for the write running
//! when it arrived, not for a burst of the saga's writes queued before it, nor for a flush of
//! theirs. Each lane keeps the order
//! its writes were queued in; a write sees the writes that ran before it, as if run alone in
//! that order, and a write that fails (or panics, or returns without committing its
//! savepoint) is rolled back alone. Nobody is answered before the commit that carries their
//! write is durable; a commit that fails fails every write of its group.

use durable::{After, Syncer};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use std::collections::VecDeque;
use std::fs::File;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::{JoinHandle, ThreadId};
use store::error::StoreError;
use tokio::sync::oneshot;

/// The most writes one commit carries: enough to amortise an fsync, few enough that the first
/// writer of a group does not wait long for the last one's work.
const MAX_GROUP: usize = 512;

/// Which queue a write waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// A write a request waits on: runs before the writes queued in turn, and its group is
    /// committed as soon as it has run and flushed at once.
    First,
    /// Everything else, in the order queued.
    InTurn,
}

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
    jobs: Option<mpsc::Sender<(Lane, Box<dyn Job>)>>,
    thread: Option<JoinHandle<()>>,
    thread_id: ThreadId,
    stats: Arc<WriterStats>,
}

impl Writer {
    /// `wal`: the WAL to flush before answering for a commit, or `None` (no durability asked).
    pub(super) fn start(conn: Connection, wal: Option<File>) -> Result<Writer, StoreError> {
        let (jobs, queue) = mpsc::channel::<(Lane, Box<dyn Job>)>();
        let stats = Arc::new(WriterStats::default());
        let cannot =
            |e: std::io::Error| StoreError::Internal(format!("cannot start the store writer: {e}"));
        // Two flushers: a group that carries a first-lane write starts its flush at once, beside
        // a flush of in-turn writes under way (`Syncer::after_sync_urgent`).
        let mut syncer = Syncer::start("store-sync", wal, 2).map_err(cannot)?;
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

    /// Queues `f` in `lane` and waits until the commit that carries it is durable.
    pub(super) async fn write<T, F>(&self, lane: Lane, f: F) -> Result<T, StoreError>
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
            .send((lane, job))
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

/// The writes taken off the queue and not yet run, by lane.
#[derive(Default)]
struct Waiting {
    first: VecDeque<Box<dyn Job>>,
    in_turn: VecDeque<Box<dyn Job>>,
}

impl Waiting {
    fn push(&mut self, (lane, job): (Lane, Box<dyn Job>)) {
        match lane {
            Lane::First => self.first.push_back(job),
            Lane::InTurn => self.in_turn.push_back(job),
        }
    }

    /// Takes every write queued meanwhile, without waiting.
    fn take_queued(&mut self, queue: &mpsc::Receiver<(Lane, Box<dyn Job>)>) {
        while let Ok(queued) = queue.try_recv() {
            self.push(queued);
        }
    }

    fn is_empty(&self) -> bool {
        self.first.is_empty() && self.in_turn.is_empty()
    }
}

fn run(
    conn: &mut Connection,
    queue: &mpsc::Receiver<(Lane, Box<dyn Job>)>,
    stats: &WriterStats,
    syncer: &Syncer,
) {
    let mut waiting = Waiting::default();
    loop {
        if waiting.is_empty() {
            match queue.recv() {
                Ok(queued) => waiting.push(queued),
                // Closed, and everything queued has been committed.
                Err(_) => return,
            }
        }
        commit_group(conn, queue, &mut waiting, stats, syncer);
    }
}

/// Runs the waiting writes in one transaction, first lane first, and commits: after the
/// writes queued in turn when it started (at most [`MAX_GROUP`] writes), or right after a
/// first-lane write has run.
fn commit_group(
    conn: &mut Connection,
    queue: &mpsc::Receiver<(Lane, Box<dyn Job>)>,
    waiting: &mut Waiting,
    stats: &WriterStats,
    syncer: &Syncer,
) {
    let changes_before = conn.total_changes();
    let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => {
            let e = StoreError::from(e);
            waiting.take_queued(queue);
            let writes = waiting.first.len() + waiting.in_turn.len();
            tracing::error!(error = %e, writes, "a store transaction did not start");
            for job in waiting.first.drain(..).chain(waiting.in_turn.drain(..)) {
                job.fail(e.clone());
            }
            return;
        }
    };
    // The writes queued in turn when the group starts: those that arrive while it runs wait
    // for the next one, so a group carries what arrived during the last (and no first-lane
    // write that arrives meanwhile waits for a group that keeps growing).
    waiting.take_queued(queue);
    let mut in_turn_now = waiting.in_turn.len();
    let mut deliveries: Vec<Deliver> = Vec::new();
    let mut ran_first = false;
    while deliveries.len() < MAX_GROUP {
        waiting.take_queued(queue);
        let job = match waiting.first.pop_front() {
            Some(job) => {
                ran_first = true;
                job
            }
            None if ran_first || in_turn_now == 0 => break,
            None => {
                in_turn_now -= 1;
                match waiting.in_turn.pop_front() {
                    Some(job) => job,
                    None => break,
                }
            }
        };
        deliveries.push(job.run(&mut tx));
    }
    let size = deliveries.len() as u64;
    match tx.commit() {
        Ok(()) => {
            // A group whose writes all declined (conditions that did not hold) wrote nothing
            // to disk: it is no commit in the sense of the metric (one fsync).
            if conn.total_changes() != changes_before {
                stats.commits.fetch_add(1, Ordering::Relaxed);
            }
            stats.writes.fetch_add(size, Ordering::Relaxed);
            let owed = deliveries
                .into_iter()
                .map(|deliver| Box::new(move || deliver(None)) as After)
                .collect();
            // A first-lane write's caller is a request, waiting: its flush starts now, beside
            // a flush of in-turn writes under way if any.
            if ran_first {
                syncer.after_sync_urgent(owed);
            } else {
                syncer.after_sync(owed);
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Waker};
    use std::time::Duration;

    type Answer = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>;

    /// A writer on a fresh file with a table `t` of names.
    fn writer() -> (tempfile::TempDir, Arc<Writer>) {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("writer.db")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (name TEXT NOT NULL)")
            .unwrap();
        (dir, Arc::new(Writer::start(conn, None).unwrap()))
    }

    /// Closes the writer and reads back the names, in the order their writes ran.
    fn committed(dir: &tempfile::TempDir, writer: Arc<Writer>) -> Vec<String> {
        drop(Arc::into_inner(writer).unwrap());
        let conn = Connection::open(dir.path().join("writer.db")).unwrap();
        let mut names = conn.prepare("SELECT name FROM t ORDER BY rowid").unwrap();
        names
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// A write that inserts `name` into `t`, queued now (its first poll sends it).
    fn queued(writer: &Arc<Writer>, lane: Lane, name: &'static str) -> Answer {
        queued_with(writer, lane, name, || ())
    }

    /// As [`queued`], running `before` on the writer's thread first.
    fn queued_with(
        writer: &Arc<Writer>,
        lane: Lane,
        name: &'static str,
        before: impl FnOnce() + Send + 'static,
    ) -> Answer {
        let writer = writer.clone();
        let mut answer: Answer = Box::pin(async move {
            writer
                .write(lane, move |tx| {
                    before();
                    tx.execute("INSERT INTO t (name) VALUES (?1)", [name])?;
                    Ok(())
                })
                .await
        });
        let polled = answer
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(polled.is_pending(), "{name} is queued, not answered");
        answer
    }

    /// Queues a write named `running` and returns once the writer runs it; it holds the writer
    /// until the returned sender is told to release it.
    fn hold(writer: &Arc<Writer>) -> (Answer, mpsc::Sender<()>) {
        let (started, running_started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let running = queued_with(writer, Lane::InTurn, "running", move || {
            started.send(()).unwrap();
            released.recv().unwrap();
        });
        running_started.recv().unwrap();
        (running, release)
    }

    #[tokio::test]
    async fn a_first_lane_write_is_answered_while_writes_queued_before_it_wait() {
        let (dir, writer) = writer();

        // The writer runs `running` and holds it until released; meanwhile two writes queue in
        // turn, the first of which holds the writer again until the first-lane write queued
        // after them is answered.
        let (running, release_running) = hold(&writer);
        let (release_held, held_released) = mpsc::channel::<()>();
        let held = queued_with(&writer, Lane::InTurn, "held", move || {
            // Long enough for the test below to fail, not hang, if the first-lane write
            // waited for this one.
            let _ = held_released.recv_timeout(Duration::from_secs(60));
        });
        let after = queued(&writer, Lane::InTurn, "after");
        let first = queued(&writer, Lane::First, "first");
        release_running.send(()).unwrap();

        tokio::time::timeout(Duration::from_secs(20), first)
            .await
            .expect(
                "the first-lane write is answered without waiting for the writes queued before it",
            )
            .unwrap();
        release_held.send(()).unwrap();
        for answer in [running, held, after] {
            answer.await.unwrap();
        }

        let order = committed(&dir, writer);
        assert_eq!(order, ["running", "first", "held", "after"]);
    }

    #[tokio::test]
    async fn writes_of_one_lane_run_in_the_order_queued() {
        let (dir, writer) = writer();
        let (running, release_running) = hold(&writer);
        let answers = vec![
            running,
            queued(&writer, Lane::InTurn, "a1"),
            queued(&writer, Lane::First, "f1"),
            queued(&writer, Lane::InTurn, "a2"),
            queued(&writer, Lane::First, "f2"),
        ];
        release_running.send(()).unwrap();
        for answer in answers {
            answer.await.unwrap();
        }
        let order = committed(&dir, writer);
        assert_eq!(order, ["running", "f1", "f2", "a1", "a2"]);
    }

    #[tokio::test]
    async fn writes_that_arrive_while_a_group_runs_wait_for_the_next_one() {
        let (dir, writer) = writer();
        let (running, release_running) = hold(&writer);
        let answers = vec![
            running,
            queued(&writer, Lane::InTurn, "a1"),
            queued(&writer, Lane::InTurn, "a2"),
        ];
        release_running.send(()).unwrap();
        for answer in answers {
            answer.await.unwrap();
        }
        // `running` alone, then the two that queued while it ran, together.
        assert_eq!(writer.stats().commits.load(Ordering::Relaxed), 2);
        assert_eq!(writer.stats().writes.load(Ordering::Relaxed), 3);
        assert_eq!(committed(&dir, writer), ["running", "a1", "a2"]);
    }
}
