//! What the run prints beyond each scenario's line: the side-by-side comparison of the two
//! backends (the ratio per figure) and, for `all`, a Markdown table of every figure with the
//! machine it ran on.

use crate::scenarios::{Figure, Report};
use std::fmt::Write;

/// A scenario's results on each backend: `None` when not run, `Err` when it failed.
pub struct Row {
    pub scenario: &'static str,
    pub embedded: Option<Result<Report, String>>,
    pub aws: Option<Result<Report, String>>,
}

/// How many times better embedded is than AWS on `figure` (> 1: embedded better), whichever
/// way the figure is better.
pub fn advantage(embedded: &Figure, aws: &Figure) -> Option<f64> {
    if !embedded.compared {
        return None;
    }
    let (better, worse) = if embedded.higher_is_better {
        (embedded.value, aws.value)
    } else {
        (aws.value, embedded.value)
    };
    (worse > 0.0 && better.is_finite()).then(|| better / worse)
}

pub fn value(f: &Figure) -> String {
    let digits = if f.value.abs() >= 100.0 { 0 } else { 1 };
    if f.unit.is_empty() {
        format!("{:.*}", digits, f.value)
    } else {
        format!("{:.*} {}", digits, f.value, f.unit)
    }
}

/// `embedded 1234 /s completed sagas/s vs aws(fakecloud+moto) 12 /s: ×103`, from the
/// scenarios' first figures.
pub fn comparison(embedded: &Report, aws: &Report) -> String {
    let (Some(e), Some(a)) = (embedded.figures.first(), aws.figures.first()) else {
        return "no figures to compare".to_owned();
    };
    let ratio = advantage(e, a).map_or("n/a".to_owned(), |r| format!("×{r:.1}"));
    format!(
        "{}: embedded {} vs aws(fakecloud+moto) {}: {ratio}",
        e.name,
        value(e),
        value(a)
    )
}

fn cell(result: &Option<Result<Report, String>>, name: &str) -> (String, Option<Figure>) {
    match result {
        None => ("—".to_owned(), None),
        Some(Err(_)) => ("failed".to_owned(), None),
        Some(Ok(r)) => match r.figures.iter().find(|f| f.name == name) {
            Some(f) => (value(f), Some(f.clone())),
            None => ("—".to_owned(), None),
        },
    }
}

/// The Markdown table of every figure.
pub fn table(rows: &[Row], machine: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## bench results\n\n{machine}\n");
    let _ = writeln!(
        out,
        "| scenario | figure | embedded | aws (fakecloud+moto) | embedded better by |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for row in rows {
        let mut names: Vec<String> = Vec::new();
        for r in [&row.embedded, &row.aws].into_iter().flatten().flatten() {
            for f in &r.figures {
                if !names.contains(&f.name) {
                    names.push(f.name.clone());
                }
            }
        }
        if names.is_empty() {
            let why = |r: &Option<Result<Report, String>>| match r {
                Some(Err(e)) => format!("failed: {}", e.replace('|', "/")),
                Some(Ok(_)) => "ok".to_owned(),
                None => "—".to_owned(),
            };
            let _ = writeln!(
                out,
                "| {} | — | {} | {} | |",
                row.scenario,
                why(&row.embedded),
                why(&row.aws)
            );
        }
        for name in names {
            let (e, ef) = cell(&row.embedded, &name);
            let (a, af) = cell(&row.aws, &name);
            let ratio = match (ef, af) {
                (Some(e), Some(a)) => {
                    advantage(&e, &a).map_or(String::new(), |r| format!("×{r:.1}"))
                }
                _ => String::new(),
            };
            let _ = writeln!(out, "| {} | {name} | {e} | {a} | {ratio} |", row.scenario);
        }
    }
    out
}

/// `2 cores, 23.5 GiB, Linux 6.18.0, rustc 1.95.0 (…)`.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let rustc = std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "rustc unknown".to_owned());
    format!(
        "Machine: nproc {cores}, memory {:.1} GiB, Linux {}, {rustc}",
        mem_kib as f64 / (1024.0 * 1024.0),
        kernel.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advantage_reads_the_same_way_for_rates_and_latencies() {
        let rate = |v| Figure::rate("sagas/s", v, "/s");
        let lat = |v| Figure::cost("p99", v, "ms");
        assert_eq!(advantage(&rate(1000.0), &rate(10.0)), Some(100.0));
        assert_eq!(advantage(&lat(2.0), &lat(200.0)), Some(100.0));
        assert_eq!(advantage(&rate(1.0), &rate(0.0)), None);
    }

    #[test]
    fn the_table_has_a_row_per_figure_and_says_what_failed() {
        let report = Report {
            summary: String::new(),
            figures: vec![Figure::rate("sagas/s", 1234.0, "/s")],
        };
        let rows = [Row {
            scenario: "saga",
            embedded: Some(Ok(report)),
            aws: Some(Err("GetActivityTask: unknown operation".to_owned())),
        }];
        let t = table(&rows, "Machine: test");
        assert!(
            t.contains("| saga | sagas/s | 1234 /s | failed |  |"),
            "{t}"
        );
    }
}
