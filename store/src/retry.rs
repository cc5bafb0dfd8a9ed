//! The pauses between tries of a call that decided nothing and may be tried again (a throttled
//! or conflicting DynamoDB request, an unavailable workflow service): exponential, capped, with
//! a jitter drawn for each caller, so that callers that failed together do not all try again
//! together. One implementation for the whole service, `backon`'s; the AWS SDK's own retries
//! (standard mode) come before these, inside each call.

use backon::{BackoffBuilder, ExponentialBuilder};
use std::time::Duration;

/// A sequence of pauses: `first`, then doubling up to `max`, each lengthened by a random part of
/// itself (so between the pause and twice it); `None` after `times` pauses, or never when
/// `times` is `None`.
pub fn pauses(first: Duration, max: Duration, times: Option<usize>) -> Pauses {
    let builder = ExponentialBuilder::default()
        .with_min_delay(first)
        .with_max_delay(max.max(first))
        .with_jitter();
    let builder = match times {
        Some(n) => builder.with_max_times(n),
        None => builder.without_max_times(),
    };
    Pauses(builder.build())
}

/// The pauses [`pauses`] makes, in order.
#[derive(Debug)]
pub struct Pauses(backon::ExponentialBackoff);

impl Iterator for Pauses {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.0.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn pauses_double_up_to_their_cap_with_a_jitter_of_up_to_themselves() {
        let seen: Vec<Duration> = pauses(10 * MS, 80 * MS, Some(6)).collect();
        assert_eq!(seen.len(), 6, "{seen:?}");
        for (pause, base) in seen.iter().zip([10, 20, 40, 80, 80, 80]) {
            assert!(
                *pause >= base * MS && *pause <= 2 * base * MS,
                "{pause:?} for {base} ms"
            );
        }
        assert_eq!(pauses(MS, MS, None).take(1000).count(), 1000, "unbounded");
    }

    /// Concurrent callers that failed at the same moment get different pauses (a jitter taken
    /// from the clock's nanoseconds gave them all the same one).
    #[test]
    fn callers_starting_together_pause_differently() {
        let first: Vec<Duration> = (0..16)
            .map(|_| pauses(100 * MS, 100 * MS, Some(1)).next().unwrap())
            .collect();
        let distinct: std::collections::BTreeSet<_> = first.iter().collect();
        assert!(distinct.len() > 8, "{first:?}");
    }
}
