//! The service's own audit (`fulfillment audit`, read-only, with the variant's store and
//! payment provider) over what the run left: its `violation: …` lines, and its last line
//! `audit: {N} orders, {S} SKUs, {C} charges, {V} violations`.

use std::process::Command;

/// What the audit found.
pub struct Audit {
    /// Its summary line, when it printed one.
    pub summary: Option<String>,
    /// Its `violation: …` lines.
    pub listed: Vec<String>,
    /// The `V` of its summary.
    pub counted: usize,
    /// Why it could not be believed: it did not run, printed no summary, or its exit status
    /// disagrees with its count.
    pub problems: Vec<String>,
}

impl Audit {
    /// The violations it adds to the run's.
    pub fn violations(&self) -> usize {
        self.counted + self.problems.len()
    }
}

pub fn run(mut audit: Command) -> Audit {
    let output = match audit.output() {
        Ok(output) => output,
        Err(e) => return unbelievable(format!("the audit did not run: {e}")),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let Some((summary, counted)) = stdout.lines().last().and_then(|l| Some((l, count(l)?))) else {
        return unbelievable(format!(
            "the audit printed no summary ({}): {}{}",
            output.status,
            stdout,
            stderr.trim()
        ));
    };
    let mut problems = Vec::new();
    if output.status.success() != (counted == 0) {
        problems.push(format!(
            "the audit counted {counted} violations and exited with {}",
            output.status
        ));
    }
    Audit {
        summary: Some(summary.to_owned()),
        listed: stdout
            .lines()
            .filter(|l| l.starts_with("violation:"))
            .map(str::to_owned)
            .collect(),
        counted,
        problems,
    }
}

fn unbelievable(why: String) -> Audit {
    Audit {
        summary: None,
        listed: Vec::new(),
        counted: 0,
        problems: vec![why],
    }
}

/// `V` of `audit: N orders, S SKUs, C charges, V violations`.
fn count(line: &str) -> Option<usize> {
    let rest = line.strip_prefix("audit: ")?;
    let last = rest.rsplit(", ").next()?;
    last.strip_suffix(" violations")
        .or_else(|| last.strip_suffix(" violation"))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn reads_the_violation_count_of_the_summary() {
        assert_eq!(
            count("audit: 300 orders, 30 SKUs, 212 charges, 0 violations"),
            Some(0)
        );
        assert_eq!(
            count("audit: 3 orders, 1 SKUs, 2 charges, 7 violations"),
            Some(7)
        );
        assert_eq!(
            count("audit: 3 orders, 1 SKU, 2 charges, 1 violation"),
            Some(1)
        );
        assert_eq!(count("violation: t0001 charged twice"), None);
        assert_eq!(count("audit: garbled"), None);
    }
}
