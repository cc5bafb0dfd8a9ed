//! The phases `bench peers` runs on each system, each on a fresh state: small sagas in a
//! closed loop (completed sagas/s, CPU and RSS), then the accept latency at fixed rates (open
//! loop) on the same running system; orders parked for approval (RSS, disk, restart to ready,
//! approvals); and a SIGKILL with orders in flight (time until all are terminal). Every phase
//! ends with the audit of that system's records.

use super::records::Expect;
use super::{ALL_NEED_APPROVAL, Goal, Kind, NO_APPROVAL, Peer, launch};
use crate::load::{closed, open};
use crate::scenarios::Figure;
use crate::service::{PRICE_CENTS, order_ids};
use anyhow::{Context, Result};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The sizes of the peers' phases.
#[derive(Debug, Clone)]
pub struct PeerSizes {
    pub orders: u64,
    pub connections: usize,
    pub accept_rates: Vec<f64>,
    pub accept_secs: f64,
    pub parked: u64,
    pub recovery: u64,
    /// The most any one wait may take.
    pub timeout: Duration,
}

impl PeerSizes {
    /// The sizes over `divisor` (at least a handful of each), the rates kept: for a peer that
    /// runs the full sizes in hours.
    pub fn divided(&self, divisor: u64) -> PeerSizes {
        let d = divisor.max(1);
        PeerSizes {
            orders: (self.orders / d).max(10),
            accept_secs: (self.accept_secs / d as f64).max(1.0),
            parked: (self.parked / d).max(10),
            recovery: (self.recovery / d).max(10),
            ..self.clone()
        }
    }

    /// `20000 orders, 10 s at each rate, 100000 parked, 10000 at the SIGKILL`.
    pub fn describe(&self) -> String {
        format!(
            "{} orders, {} s at each rate, {} parked, {} at the SIGKILL",
            self.orders, self.accept_secs, self.parked, self.recovery
        )
    }
}

/// Every phase on `kind`: its figures, and one line per phase (stderr progress).
pub async fn measure(kind: Kind, sizes: &PeerSizes, run: &str) -> Result<Vec<Figure>> {
    let mut figures = Vec::new();
    let name = kind.label();
    figures.extend(
        sagas_and_accept(kind, sizes, run)
            .await
            .with_context(|| format!("{name}: sagas"))?,
    );
    figures.extend(
        parked(kind, sizes, run)
            .await
            .with_context(|| format!("{name}: parked"))?,
    );
    figures.extend(
        recovery(kind, sizes, run)
            .await
            .with_context(|| format!("{name}: recovery"))?,
    );
    Ok(figures)
}

/// Samples the peer's RSS every 100 ms until ended: the highest seen.
struct RssPeak {
    peak: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl RssPeak {
    fn watch(peer: &Arc<Box<dyn Peer>>) -> RssPeak {
        let (peak, done) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (p, d, peer) = (peak.clone(), done.clone(), peer.clone());
        let task = tokio::spawn(async move {
            while !d.load(Ordering::SeqCst) {
                p.fetch_max(peer.rss(), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        RssPeak { peak, done, task }
    }

    /// Stops sampling (and lets go of the peer): the peak.
    async fn end(self) -> u64 {
        self.done.store(true, Ordering::SeqCst);
        let _ = self.task.await;
        self.peak.load(Ordering::SeqCst)
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

async fn audit(peer: &dyn Peer, ids: &[String], parked_ok: bool) -> Result<String> {
    peer.audit(&Expect {
        ids,
        total_cents: PRICE_CENTS as i64,
        parked_ok,
    })
    .await
    .context("audit")
}

/// Small orders as fast as a closed loop of `connections` goes, then each open-loop rate.
async fn sagas_and_accept(kind: Kind, s: &PeerSizes, run: &str) -> Result<Vec<Figure>> {
    let name = kind.label();
    let peer: Arc<Box<dyn Peer>> = Arc::new(launch(kind, NO_APPROVAL).await?);
    let mut figures = Vec::new();
    let ids = order_ids(run, "s", s.orders);
    let cpu_before = peer.cpu();
    let rss = RssPeak::watch(&peer);
    let t0 = Instant::now();
    let placed = closed::run(
        peer.ingress(),
        s.connections,
        closed::Until::count(s.orders),
        peer.place(run, "s"),
        None,
    )
    .await?;
    placed.require_all(peer.accepted_status(), "placing the orders")?;
    let done = peer
        .await_goal(&ids, Goal::Finished, Instant::now() + s.timeout)
        .await?;
    let peak = rss.end().await;
    let secs = (done - t0).as_secs_f64();
    let per_saga = |after: Duration, before: Duration| {
        after.saturating_sub(before).as_secs_f64() * 1e3 / s.orders.max(1) as f64
    };
    let cpu_after = peer.cpu();
    let all = per_saga(
        cpu_after.iter().map(|(_, t)| *t).sum(),
        cpu_before.iter().map(|(_, t)| *t).sum(),
    );
    let rate = s.orders as f64 / secs;
    figures.push(Figure::rate("completed sagas/s", rate, "/s"));
    figures.push(Figure::cost("CPU-ms a saga", all, "ms"));
    let mut parts = Vec::new();
    if cpu_after.len() > 1 {
        for ((proc_name, after), (_, before)) in cpu_after.iter().zip(&cpu_before) {
            let ms = per_saga(*after, *before);
            parts.push(format!("{proc_name} {ms:.2}"));
            figures.push(Figure::cost(
                format!("CPU-ms a saga: {proc_name}"),
                ms,
                "ms",
            ));
        }
    }
    figures.push(Figure::cost("peak RSS, sagas", mib(peak), "MiB"));
    eprintln!(
        "bench peers: {name}: {rate:.0} sagas/s ({} orders in {secs:.2} s), {all:.2} CPU-ms a saga{}, peak RSS {:.1} MiB",
        s.orders,
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        },
        mib(peak)
    );

    let mut all_ids = ids;
    for (k, rate) in s.accept_rates.iter().enumerate() {
        let scenario = format!("a{k}");
        let n = open::count_for(*rate, Duration::from_secs_f64(s.accept_secs));
        let out = open::run(peer.ingress(), *rate, n, peer.place(run, &scenario), None).await?;
        out.require_all(peer.accepted_status(), "placing at a fixed rate")?;
        let (p50, p99) = (out.latencies.quantile(0.5), out.latencies.quantile(0.99));
        figures.push(Figure::millis(format!("accept p50 at {rate} /s"), p50));
        figures.push(Figure::millis(format!("accept p99 at {rate} /s"), p99));
        eprintln!(
            "bench peers: {name}: accept at {rate}/s: {}",
            out.latencies.summary()
        );
        let ids = order_ids(run, &scenario, n);
        // Idle again before the next rate: the sagas of this one finish first.
        peer.await_goal(&ids, Goal::Finished, Instant::now() + s.timeout)
            .await?;
        all_ids.extend(ids);
    }
    let summary = audit(peer.as_ref().as_ref(), &all_ids, false).await?;
    eprintln!("bench peers: {name}: after the sagas: {summary}");
    let Ok(mut peer) = Arc::try_unwrap(peer) else {
        anyhow::bail!("the peer is still shared");
    };
    peer.stop().await?;
    Ok(figures)
}

/// Orders parked for approval: what they cost, a restart with all of them parked, then all
/// approved.
async fn parked(kind: Kind, s: &PeerSizes, run: &str) -> Result<Vec<Figure>> {
    let name = kind.label();
    let mut peer = launch(kind, ALL_NEED_APPROVAL).await?;
    let ids = order_ids(run, "p", s.parked);
    let t0 = Instant::now();
    closed::run(
        peer.ingress(),
        s.connections,
        closed::Until::count(s.parked),
        peer.place(run, "p"),
        None,
    )
    .await?
    .require_all(peer.accepted_status(), "placing the orders")?;
    peer.await_goal(&ids, Goal::Parked, Instant::now() + s.timeout)
        .await?;
    let park_secs = t0.elapsed().as_secs_f64();
    let rss = peer.rss();
    peer.stop().await?;
    let disk = peer.disk_bytes();
    let ready = peer.restart().await?;
    let rss_after = peer.rss();
    let t1 = Instant::now();
    let approved = closed::run(
        peer.ingress(),
        s.connections,
        closed::Until::count(s.parked),
        peer.approve(run, "p"),
        None,
    )
    .await?;
    let approvals = approved.rate(approved.answered());
    anyhow::ensure!(
        approved.failures == 0 && approved.statuses.keys().all(|c| (200..300).contains(c)),
        "approving: {:?}, {}",
        approved.statuses,
        approved.first_failure.as_deref().unwrap_or("")
    );
    let done = peer
        .await_goal(&ids, Goal::Finished, Instant::now() + s.timeout)
        .await?;
    let summary = audit(peer.as_ref(), &ids, false).await?;
    peer.stop().await?;
    eprintln!(
        "bench peers: {name}: {} parked in {park_secs:.1} s: RSS {:.1} MiB, disk {:.1} MiB, restart to ready {:.0} ms (RSS after {:.1} MiB), {approvals:.0} approvals/s, all finished {:.1} s after the first; {summary}",
        s.parked,
        mib(rss),
        mib(disk),
        ready.as_secs_f64() * 1e3,
        mib(rss_after),
        (done - t1).as_secs_f64()
    );
    Ok(vec![
        Figure::cost("RSS, all parked", mib(rss), "MiB"),
        Figure::cost(
            "disk per parked order",
            disk as f64 / s.parked.max(1) as f64,
            "B",
        ),
        Figure::millis("restart to ready, all parked", ready),
        Figure::rate("approvals/s", approvals, "/s"),
    ])
}

/// SIGKILL with the orders in flight, a restart, the time until all are terminal.
async fn recovery(kind: Kind, s: &PeerSizes, run: &str) -> Result<Vec<Figure>> {
    let name = kind.label();
    let mut peer = launch(kind, NO_APPROVAL).await?;
    let ids = order_ids(run, "r", s.recovery);
    closed::run(
        peer.ingress(),
        s.connections,
        closed::Until::count(s.recovery),
        peer.place(run, "r"),
        None,
    )
    .await?
    .require_all(peer.accepted_status(), "placing the orders")?;
    let finished = peer.count(&ids, Goal::Finished).await?;
    peer.kill().await;
    let t0 = Instant::now();
    let ready = peer.restart().await?;
    let done = peer
        .await_goal(&ids, Goal::Finished, Instant::now() + s.timeout)
        .await?;
    let secs = (done - t0).as_secs_f64();
    let summary = audit(peer.as_ref(), &ids, false).await?;
    peer.stop().await?;
    eprintln!(
        "bench peers: {name}: SIGKILL with {} placed, {} unfinished: ready again in {:.0} ms, all terminal {secs:.1} s after the restart; {summary}",
        s.recovery,
        s.recovery - finished.min(s.recovery),
        ready.as_secs_f64() * 1e3
    );
    // Each system has finished a different share of the orders by the kill (its intake and
    // its sagas race differently), so the time is also given per 1,000 left unfinished.
    let unfinished = s.recovery - finished.min(s.recovery);
    Ok(vec![
        Figure::cost("SIGKILL: restart to all terminal", secs, "s"),
        Figure::fact(
            "SIGKILL: orders unfinished at the kill",
            unfinished as f64,
            "",
        ),
        Figure::cost(
            "SIGKILL: restart to all terminal, per 1,000 unfinished",
            secs * 1000.0 / unfinished.max(1) as f64,
            "s",
        ),
    ])
}
