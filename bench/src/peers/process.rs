//! A peer's server process: started with its output in a log file of the run's directory,
//! measured through `/proc` (CPU, RSS), stopped with SIGTERM or killed with SIGKILL, and
//! killed when dropped so that a failed run leaves nothing behind.

use anyhow::{Context, Result, bail};
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process of the bench.
pub struct Proc {
    pub name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr appended to `<dir>/<name>.log`.
    pub fn spawn(name: &'static str, mut cmd: Command, dir: &Path) -> Result<Proc> {
        let log = dir.join(format!("{name}.log"));
        let out = File::options().create(true).append(true).open(&log)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {name}: {cmd:?}"))?;
        Ok(Proc { name, child, log })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time (user + system) of the process, its ended threads included.
    pub fn cpu(&self) -> Duration {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .ok()
            .and_then(|s| crate::service::stat_cpu(&s))
            .unwrap_or_default()
    }

    /// Resident set (VmRSS), bytes; 0 once it has exited.
    pub fn rss(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    }

    /// Fails with the log's last lines when the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited ({status}): {}", self.name, self.log_tail());
        }
        Ok(())
    }

    /// The last lines of its log, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub fn stop(mut self, grace: Duration) {
        // SAFETY: kill(2) on our own child's pid, which it keeps until waited for.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGKILL: a crash.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A loopback port free at the time of asking (the peers take their ports as settings).
/// A port free now, below the kernel's ephemeral range (`ip_local_port_range`). A peer keeps
/// its ports across restarts, and a port from that range, once released, may be taken meanwhile
/// as the local end of any outgoing connection (a restart of restate-server failed so,
/// "Address in use"); ports below it are only ever taken by a listener that asks for them.
pub fn free_port() -> Result<u16> {
    const LOWEST: u16 = 10_000;
    let ephemeral_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if ephemeral_from > LOWEST {
        // Where to start looking: different for each call and each process.
        let seed = std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            std::time::Instant::now(),
        );
        // Each port once a run: one released a moment ago is free again to `bind`.
        static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
        let mut given = GIVEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let span = u64::from(ephemeral_from - LOWEST);
        for step in 0..span.min(1_000) {
            let port = LOWEST + (seed.wrapping_add(step) % span) as u16;
            if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.push(port);
                return Ok(port);
            }
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Bytes of every file under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// The processes of one system, in the order they were started.
#[derive(Default)]
pub struct Procs(Vec<Proc>);

impl Procs {
    pub fn push(&mut self, p: Proc) {
        self.0.push(p);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each one's CPU time so far (name, time).
    pub fn cpu(&self) -> Vec<(&'static str, Duration)> {
        self.0.iter().map(|p| (p.name, p.cpu())).collect()
    }

    /// Their resident sets together, bytes.
    pub fn rss(&self) -> u64 {
        self.0.iter().map(Proc::rss).sum()
    }

    /// Fails with a log's last lines when one of them has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        self.0.iter_mut().try_for_each(Proc::check_alive)
    }

    /// SIGTERM to each, the last started first (a front before what it calls), each waited
    /// for.
    pub async fn stop(&mut self) {
        let procs: Vec<Proc> = self.0.drain(..).rev().collect();
        tokio::task::block_in_place(|| {
            for p in procs {
                p.stop(Duration::from_secs(30));
            }
        });
    }

    /// SIGKILL to every one: a crash.
    pub async fn kill(&mut self) {
        let procs: Vec<Proc> = self.0.drain(..).collect();
        tokio::task::block_in_place(|| procs.into_iter().for_each(Proc::kill));
    }
}
