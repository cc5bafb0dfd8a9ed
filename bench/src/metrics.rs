//! The few Prometheus text lines the bench reads from `/metrics`: finished sagas by status and
//! the embedded backend's commit and transition counters. A tiny parser of the text format's
//! sample lines (`name{label="v",…} value`), not a general one: no escapes beyond `\"`, no
//! timestamps needed.

use std::collections::BTreeMap;

pub const SAGAS_FINISHED: &str = "fulfillment_sagas_finished_total";
pub const ENGINE_COMMITS: &str = "fulfillment_engine_commits_total";
pub const ENGINE_TRANSITIONS: &str = "fulfillment_engine_transitions_total";
pub const STORE_COMMITS: &str = "fulfillment_store_commits_total";

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample line of `text` (comments and lines that do not parse are skipped).
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, labels, rest) = match line.find(['{', ' ']) {
        Some(i) if line.as_bytes()[i] == b'{' => {
            let (labels, rest) = parse_labels(&line[i + 1..])?;
            (&line[..i], labels, rest)
        }
        Some(i) => (&line[..i], BTreeMap::new(), &line[i..]),
        None => return None,
    };
    // `value [timestamp]`
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// The labels after a sample's `{`, up to its closing `}` (braces inside quoted values, as in
/// a route template, are the value's); the labels and what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(rest) = s.strip_prefix('}') {
            return Some((labels, rest));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_owned();
        let rest = s[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => value.push(chars.next()?.1),
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.insert(key, value);
        s = &rest[end + 1..];
    }
}

/// The sum of the samples named `name` whose labels include every `(key, value)` of `labels`;
/// `None` when there is no such sample (the metric is absent).
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut matching = samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).is_some_and(|have| have == v))
        })
        .peekable();
    matching.peek()?;
    Some(matching.map(|s| s.value).sum())
}

/// Finished sagas with `status`, if the service exports the counter.
pub fn finished(samples: &[Sample], status: &str) -> Option<u64> {
    value(samples, SAGAS_FINISHED, &[("status", status)]).map(|v| v as u64)
}

/// The embedded backend's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    pub engine_commits: f64,
    pub transitions: f64,
    pub store_commits: f64,
}

impl Counters {
    /// `None` when the service does not export the engine's counters (the AWS backend, or a
    /// build without them).
    pub fn read(samples: &[Sample]) -> Option<Counters> {
        Some(Counters {
            engine_commits: value(samples, ENGINE_COMMITS, &[])?,
            transitions: value(samples, ENGINE_TRANSITIONS, &[]).unwrap_or_default(),
            store_commits: value(samples, STORE_COMMITS, &[]).unwrap_or_default(),
        })
    }

    /// `engine 35 commits/s, store 120 commits/s, 210.4 transitions/engine commit` over a
    /// window of `secs` from `before` to `self`.
    pub fn rates_since(&self, before: &Counters, secs: f64) -> String {
        let commits = self.engine_commits - before.engine_commits;
        let transitions = self.transitions - before.transitions;
        let store = self.store_commits - before.store_commits;
        let per_commit = if commits > 0.0 {
            transitions / commits
        } else {
            0.0
        };
        format!(
            "engine {:.0} commits/s, store {:.0} commits/s, {:.1} transitions/engine commit",
            commits / secs.max(1e-9),
            store / secs.max(1e-9),
            per_commit
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP fulfillment_sagas_finished_total Sagas that ended.
# TYPE fulfillment_sagas_finished_total counter
fulfillment_sagas_finished_total{status="COMPLETED"} 1234
fulfillment_sagas_finished_total{status="CANCELLED"} 5
fulfillment_engine_commits_total 17
fulfillment_engine_transitions_total 3400.0
fulfillment_http_requests_total{method="GET",route="/orders/{order_id}/status",status="200"} 9
fulfillment_weird{note="a \"quoted\" }, value"} 2.5 1700000000
fulfillment_http_request_duration_seconds_bucket{le="+Inf",route="/orders"} 3
not a sample line
"#;

    #[test]
    fn reads_labelled_and_plain_samples() {
        let samples = parse(TEXT);
        assert_eq!(finished(&samples, "COMPLETED"), Some(1234));
        assert_eq!(finished(&samples, "CANCELLED"), Some(5));
        assert_eq!(finished(&samples, "COMPENSATION_FAILED"), None);
        assert_eq!(value(&samples, ENGINE_COMMITS, &[]), Some(17.0));
        assert_eq!(
            value(
                &samples,
                "fulfillment_http_requests_total",
                &[("route", "/orders/{order_id}/status")]
            ),
            Some(9.0)
        );
    }

    #[test]
    fn quoted_braces_and_timestamps_do_not_confuse_it() {
        let samples = parse(TEXT);
        let weird = samples
            .iter()
            .find(|s| s.name == "fulfillment_weird")
            .unwrap();
        assert_eq!(weird.labels["note"], r#"a "quoted" }, value"#);
        assert_eq!(weird.value, 2.5);
        assert!(!samples.iter().any(|s| s.name == "not"));
    }

    #[test]
    fn absent_metrics_are_none_and_counters_need_the_engine() {
        let samples = parse("fulfillment_orders_total{outcome=\"accepted\"} 3\n");
        assert_eq!(finished(&samples, "COMPLETED"), None);
        assert_eq!(Counters::read(&samples), None);
        let c = Counters::read(&parse(TEXT)).unwrap();
        assert_eq!(c.transitions, 3400.0);
        assert_eq!(c.store_commits, 0.0);
        let before = Counters::default();
        assert_eq!(
            c.rates_since(&before, 1.0),
            "engine 17 commits/s, store 0 commits/s, 200.0 transitions/engine commit"
        );
    }

    #[test]
    fn sums_over_the_labels_not_asked_for() {
        let samples = parse(TEXT);
        assert_eq!(value(&samples, SAGAS_FINISHED, &[]), Some(1239.0));
    }
}
