//! Rate limits: a token bucket per API key (GCRA, from `governor`), so one caller at its limit
//! is answered `429` while every other key keeps its own budget; and a bucket of failed
//! authentications per source address, so guessing keys is slow and costs the store nothing
//! once an address is over it: while it is, a request from it is served only with a key this
//! replica has already checked (in the authenticator's cache), any other is answered `429`
//! without a lookup.
//!
//! The buckets live in each replica's memory: with N replicas behind a load balancer a key
//! gets up to N times its rate. That is the usual trade (no shared counter on the hot path);
//! the limit is there to keep one caller from starving the others and the account's quotas.

use super::problem::{Problem, ProblemKind};
use axum::extract::ConnectInfo;
use axum::http::HeaderName;
use axum::http::request::Parts;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// How many addresses the failure buckets hold before the idle ones are dropped.
const TRACKED_ADDRESSES: usize = 10_000;

/// The limits, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitSettings {
    /// Requests per second per key, and the burst a key may send at once; `None`: no limit.
    pub per_key: Option<(NonZeroU32, NonZeroU32)>,
    /// Failed authentications per minute per source address (also the burst).
    pub failed_auth_per_minute: NonZeroU32,
    /// A header the proxy in front sets to the caller's address (its last value counts, as
    /// appended by the nearest proxy); `None`: the connection's peer address.
    pub address_header: Option<HeaderName>,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        RateLimitSettings {
            per_key: Some((nonzero(100), nonzero(200))),
            failed_auth_per_minute: nonzero(20),
            address_header: None,
        }
    }
}

fn nonzero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

/// The buckets of one replica.
pub struct RateLimits {
    per_key: Option<DefaultKeyedRateLimiter<String>>,
    failures: DefaultKeyedRateLimiter<IpAddr>,
    /// Addresses over their failure budget, until when.
    blocked: moka::future::Cache<IpAddr, Instant>,
    address_header: Option<HeaderName>,
    clock: DefaultClock,
}

impl RateLimits {
    pub fn new(settings: &RateLimitSettings) -> RateLimits {
        RateLimits {
            per_key: settings.per_key.map(|(rate, burst)| {
                DefaultKeyedRateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
            }),
            failures: DefaultKeyedRateLimiter::keyed(Quota::per_minute(
                settings.failed_auth_per_minute,
            )),
            blocked: moka::future::Cache::builder()
                .max_capacity(TRACKED_ADDRESSES as u64)
                .time_to_live(Duration::from_secs(60))
                .build(),
            address_header: settings.address_header.clone(),
            clock: DefaultClock::default(),
        }
    }

    /// The caller's address: the last value of the configured header, else the connection's
    /// peer (unspecified when neither is known, as in tests without a socket).
    pub fn address(&self, parts: &Parts) -> IpAddr {
        let forwarded = self.address_header.as_ref().and_then(|name| {
            let value = parts.headers.get_all(name).iter().next_back()?;
            let last = value.to_str().ok()?.rsplit(',').next()?.trim();
            last.parse::<IpAddr>().ok()
        });
        forwarded
            .or_else(|| {
                parts
                    .extensions
                    .get::<ConnectInfo<SocketAddr>>()
                    .map(|c| c.0.ip())
            })
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }

    /// How long `address` stays blocked, if it is.
    pub async fn blocked(&self, address: IpAddr) -> Option<Duration> {
        let until = self.blocked.get(&address).await?;
        until.checked_duration_since(Instant::now())
    }

    /// Counts a failed authentication from `address`; past its budget, blocks it until the
    /// bucket has room again, and tells for how long.
    pub async fn failed(&self, address: IpAddr) -> Option<Duration> {
        if self.failures.len() > TRACKED_ADDRESSES {
            self.failures.retain_recent();
        }
        let not_until = self.failures.check_key(&address).err()?;
        let wait = not_until.wait_time_from(self.clock.now());
        self.blocked.insert(address, Instant::now() + wait).await;
        tracing::warn!(%address, "failed authentications over the limit; address throttled");
        Some(wait)
    }

    /// Takes one request from `key_id`'s bucket, or tells how long until it has one.
    pub fn check_key(&self, key_id: &str) -> Result<(), Duration> {
        let Some(limiter) = &self.per_key else {
            return Ok(());
        };
        limiter
            .check_key(&key_id.to_owned())
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

/// `429` with `Retry-After`: whole seconds, rounded up, at least one.
pub fn too_many(wait: Duration, detail: &str) -> Problem {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Problem {
        retry_after: Some(u32::try_from(secs.max(1)).unwrap_or(u32::MAX)),
        ..Problem::new(ProblemKind::RateLimited, detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn limits(rate: u32, burst: u32, failures: u32) -> RateLimits {
        RateLimits::new(&RateLimitSettings {
            per_key: Some((nonzero(rate), nonzero(burst))),
            failed_auth_per_minute: nonzero(failures),
            address_header: Some(HeaderName::from_static("x-forwarded-for")),
        })
    }

    #[test]
    fn a_key_over_its_burst_waits_and_another_key_does_not() {
        let limits = limits(1, 3, 5);
        for _ in 0..3 {
            assert_eq!(limits.check_key("k1"), Ok(()));
        }
        let wait = limits.check_key("k1").expect_err("over the burst");
        assert!(wait <= Duration::from_secs(1), "{wait:?}");
        assert_eq!(limits.check_key("k2"), Ok(()));
        let problem = too_many(wait, "slow down");
        assert_eq!(problem.status, 429);
        assert_eq!(problem.retry_after, Some(1));
    }

    #[tokio::test]
    async fn an_address_is_blocked_after_its_failures_and_others_are_not() {
        let limits = limits(10, 10, 2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        assert_eq!(limits.failed(a).await, None);
        assert_eq!(limits.failed(a).await, None);
        assert_eq!(limits.blocked(a).await, None, "two failures are the budget");
        assert!(limits.failed(a).await.is_some(), "the third one is over it");
        let wait = limits.blocked(a).await.expect("blocked");
        assert!(wait <= Duration::from_secs(30), "{wait:?}");
        assert_eq!(limits.blocked(b).await, None);
    }

    #[test]
    fn the_address_is_the_last_one_the_proxy_appended() {
        let limits = limits(1, 1, 1);
        let (parts, ()) = Request::builder()
            .header("x-forwarded-for", "1.2.3.4, 10.0.0.7")
            .body(())
            .unwrap()
            .into_parts();
        assert_eq!(
            limits.address(&parts),
            "10.0.0.7".parse::<IpAddr>().unwrap()
        );
        let (parts, ()) = Request::builder().body(()).unwrap().into_parts();
        assert_eq!(limits.address(&parts), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    }
}
