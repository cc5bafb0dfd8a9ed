//! The writer thread: the only code that changes the database. It takes every queued command,
//! applies them and the events they cause to the interpreter, commits the lot in one
//! transaction (one fsync for many transitions), and only then answers callers, hands out
//! tasks, and invokes handlers.

mod apply;
mod commands;
mod commit;
mod handlers;
mod load;
mod poll;
mod redrive;
mod retention;
mod timers;
mod versions;

pub use commands::{Answer, Command};
pub use versions::VersionCommand;
pub(crate) use versions::revision_id;

use super::{EngineConfig, Machine};
use crate::db::Store;
use crate::error::EngineError;
use crate::sfn::TaskHandler;
use commit::Batch;
use durable::Syncer;
use load::Loaded;
use poll::Poller;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Instant;
use timers::millis;
use tokio::sync::oneshot;

pub type Reply<T> = oneshot::Sender<Result<T, EngineError>>;

pub struct Writer {
    pub store: Store,
    pub config: EngineConfig,
    pub rx: Receiver<Command>,
    pub tx: Sender<Command>,
    pub runtime: tokio::runtime::Handle,
    pub handler: Option<Arc<dyn TaskHandler>>,
    /// Parsed revisions by `definitions.id`.
    pub machines: HashMap<i64, Arc<Machine>>,
    /// What each state machine, version or alias ARN a start named resolves to; emptied by
    /// every command that changes a machine, a version or an alias (and on a rollback).
    targets: HashMap<String, Arc<versions::Target>>,
    pub activities: HashSet<String>,
    pub stats: Arc<super::Stats>,
    pollers: HashMap<String, VecDeque<Poller>>,
    watchers: HashMap<String, Vec<oneshot::Sender<()>>>,
    next_due: Option<i64>,
    /// Running executions as the last commit left them, so the next event of one is applied
    /// without reading and parsing its row and snapshot again. Only this thread writes the
    /// database, so an entry stays true until the execution is loaded into a batch (it is
    /// taken out then, and put back only once that batch has committed).
    warm: HashMap<i64, Loaded>,
    /// When the next retention pass may run (`prune_if_due`).
    next_prune: Instant,
    /// Makes each commit durable and then delivers what its batch owes (the `durable` crate).
    syncer: Syncer,
}

type Sql<T> = Result<T, rusqlite::Error>;

impl Writer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mut store: Store,
        config: EngineConfig,
        rx: Receiver<Command>,
        tx: Sender<Command>,
        runtime: tokio::runtime::Handle,
        handler: Option<Arc<dyn TaskHandler>>,
        stats: Arc<super::Stats>,
    ) -> Sql<Writer> {
        let activities = store.activity_arns()?.into_iter().collect();
        let next_due = store.next_due()?;
        // One flusher: nothing the engine commits is urgent (no request waits on a commit the
        // way an order's intake waits on the store's).
        let syncer = Syncer::start("sfn-engine-sync", store.take_wal(), 1)
            .map_err(|e| crate::db::io_failure(format!("cannot start the engine's syncer: {e}")))?;
        Ok(Writer {
            store,
            config,
            rx,
            tx,
            runtime,
            handler,
            machines: HashMap::new(),
            targets: HashMap::new(),
            activities,
            stats,
            pollers: HashMap::new(),
            watchers: HashMap::new(),
            next_due,
            warm: HashMap::new(),
            next_prune: Instant::now(),
            syncer,
        })
    }

    pub fn run(mut self) {
        loop {
            let first = match self.wake_in() {
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => self.rx.recv_timeout(d),
            };
            let mut commands = Vec::new();
            match first {
                Ok(c) => commands.push(c),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            while commands.len() < self.config.max_batch {
                match self.rx.try_recv() {
                    Ok(c) => commands.push(c),
                    Err(_) => break,
                }
            }
            let mut shutdown = None;
            commands.retain_mut(|c| match c {
                Command::Shutdown { reply } => {
                    shutdown = Some(reply.take());
                    false
                }
                _ => true,
            });
            self.batch(commands);
            self.prune_if_due();
            if let Some(reply) = shutdown {
                // Everything committed so far is durable and delivered before the stop is.
                self.syncer.finish();
                self.close_pollers();
                if let Some(r) = reply {
                    let _ = r.send(());
                }
                break;
            }
        }
        self.syncer.finish();
        self.close_pollers();
    }

    /// How long the loop may sleep: until the next timer or poll deadline.
    fn wake_in(&self) -> Option<std::time::Duration> {
        let now = Instant::now();
        let poll = self
            .pollers
            .values()
            .flatten()
            .map(|p| p.deadline.saturating_duration_since(now))
            .min();
        let timer = self.next_due.map(|due| {
            let ms = (due - millis(self.config.clock.now())).max(0) as u64;
            std::time::Duration::from_millis(ms)
        });
        let prune = self.prune_due().map(|at| at.saturating_duration_since(now));
        [poll, timer, prune].into_iter().flatten().min()
    }
}
