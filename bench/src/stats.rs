//! Latency percentiles: an HdrHistogram of microseconds (1 µs to 1 h at three significant
//! digits), and how the figures are written.

use hdrhistogram::Histogram;
use std::time::Duration;

/// Latencies of one run.
#[derive(Debug, Clone)]
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies::new()
    }
}

impl Latencies {
    pub fn new() -> Latencies {
        Latencies(Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds"))
    }

    pub fn record(&mut self, latency: Duration) {
        // Beyond an hour is clamped: it is a failed run anyway, and must not panic.
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.0.saturating_record(micros.max(1));
    }

    /// Adds every latency of `other`.
    pub fn merge(&mut self, other: &Latencies) {
        // Same bounds on both sides: it cannot fail.
        let _ = self.0.add(&other.0);
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// The latency at quantile `q` (0.5, 0.99, …); zero when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_micros(self.0.value_at_quantile(q))
    }

    pub fn max(&self) -> Duration {
        Duration::from_micros(self.0.max())
    }

    /// `p50 1.2 ms p99 4.0 ms p99.9 9.1 ms max 12.0 ms`.
    pub fn summary(&self) -> String {
        format!(
            "p50 {} p99 {} p99.9 {} max {}",
            ms(self.quantile(0.5)),
            ms(self.quantile(0.99)),
            ms(self.quantile(0.999)),
            ms(self.max())
        )
    }
}

/// Milliseconds with one decimal: `12.1 ms`.
pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Mebibytes with one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_uniform_spread() {
        let mut l = Latencies::new();
        for ms in 1..=1000 {
            l.record(Duration::from_millis(ms));
        }
        let close =
            |d: Duration, want_ms: f64| (d.as_secs_f64() * 1e3 - want_ms).abs() < want_ms * 0.002;
        assert!(close(l.quantile(0.5), 500.0), "{:?}", l.quantile(0.5));
        assert!(close(l.quantile(0.99), 990.0), "{:?}", l.quantile(0.99));
        assert!(close(l.quantile(0.999), 999.0), "{:?}", l.quantile(0.999));
        assert!(close(l.max(), 1000.0));
        assert_eq!(l.len(), 1000);
    }

    #[test]
    fn one_outlier_shows_in_the_tail_not_the_median() {
        let mut l = Latencies::new();
        for _ in 0..999 {
            l.record(Duration::from_millis(2));
        }
        l.record(Duration::from_secs(5));
        assert!(l.quantile(0.5) < Duration::from_millis(3));
        assert!(l.quantile(0.99) < Duration::from_millis(3));
        assert!(l.max() > Duration::from_millis(4990));
    }

    #[test]
    fn an_empty_run_and_absurd_latencies_do_not_panic() {
        let mut l = Latencies::new();
        assert_eq!(l.quantile(0.99), Duration::ZERO);
        l.record(Duration::ZERO);
        l.record(Duration::from_secs(1_000_000));
        assert_eq!(l.len(), 2);
        assert_eq!(ms(Duration::from_micros(12_140)), "12.1 ms");
    }
}
