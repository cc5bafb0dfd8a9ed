//! The one table of `bench peers`: every figure of every system, and beside each peer how
//! far ahead (or behind) we are, with each system's version and durability in the header.

use super::Kind;
use crate::report::{advantage, value};
use crate::scenarios::Figure;
use std::fmt::Write;

/// One system's results: its figures, or why it failed.
pub struct Column {
    pub kind: Kind,
    pub settings: String,
    pub result: Result<Vec<Figure>, String>,
}

/// `fulfillment ×2.4` when we are better by 2.4 times, `Restate ×1.3` when it is.
fn ratio(ours: &Figure, peer: &Figure, peer_kind: Kind) -> String {
    match advantage(ours, peer) {
        Some(r) if r >= 1.0 => format!("{} ×{r:.1}", Kind::Ours.label()),
        Some(r) if r > 0.0 => format!("**{} ×{:.1}**", peer_kind.label(), 1.0 / r),
        _ => String::new(),
    }
}

pub fn table(columns: &[Column], machine: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## bench peers\n\n{machine}\n");
    for c in columns {
        let _ = writeln!(out, "- **{}**: {}", c.kind.label(), c.settings);
    }
    let _ = writeln!(out);
    let mut names: Vec<String> = Vec::new();
    for c in columns {
        for f in c.result.iter().flatten() {
            if !names.contains(&f.name) {
                names.push(f.name.clone());
            }
        }
    }
    let peers: Vec<&Column> = columns.iter().filter(|c| c.kind != Kind::Ours).collect();
    let ours = columns.iter().find(|c| c.kind == Kind::Ours);
    let mut header = "| figure |".to_owned();
    let mut rule = "|---|".to_owned();
    for c in columns {
        let _ = write!(header, " {} |", c.kind.label());
        rule.push_str("---|");
    }
    for p in &peers {
        let _ = write!(header, " vs {}: ahead |", p.kind.label());
        rule.push_str("---|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    let find = |c: &Column, name: &str| -> Option<Figure> {
        c.result
            .as_ref()
            .ok()?
            .iter()
            .find(|f| f.name == name)
            .cloned()
    };
    for name in &names {
        let mut row = format!("| {name} |");
        for c in columns {
            let cell = match (&c.result, find(c, name)) {
                (Err(_), _) => "failed".to_owned(),
                (Ok(_), Some(f)) => value(&f),
                (Ok(_), None) => "—".to_owned(),
            };
            let _ = write!(row, " {cell} |");
        }
        for p in &peers {
            let cell = match (ours.and_then(|o| find(o, name)), find(p, name)) {
                (Some(o), Some(f)) => ratio(&o, &f, p.kind),
                _ => String::new(),
            };
            let _ = write!(row, " {cell} |");
        }
        let _ = writeln!(out, "{row}");
    }
    for c in columns {
        if let Err(e) = &c.result {
            let _ = writeln!(out, "\n{} failed: {}", c.kind.label(), e.replace('\n', " "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_peer_gets_a_column_and_a_ratio_that_says_who_is_ahead() {
        let columns = vec![
            Column {
                kind: Kind::Ours,
                settings: "synchronous=FULL".to_owned(),
                result: Ok(vec![
                    Figure::rate("completed sagas/s", 1000.0, "/s"),
                    Figure::cost("CPU-ms a saga", 2.0, "ms"),
                ]),
            },
            Column {
                kind: Kind::Restate,
                settings: "fsync".to_owned(),
                result: Ok(vec![
                    Figure::rate("completed sagas/s", 500.0, "/s"),
                    Figure::cost("CPU-ms a saga", 1.0, "ms"),
                ]),
            },
            Column {
                kind: Kind::Temporal,
                settings: "synchronous=FULL".to_owned(),
                result: Err("did not start".to_owned()),
            },
        ];
        let t = table(&columns, "2 cores");
        assert!(t.contains("- **Restate**: fsync"), "{t}");
        assert!(
            t.contains("| completed sagas/s | 1000 /s | 500 /s | failed | fulfillment ×2.0 |  |"),
            "{t}"
        );
        assert!(
            t.contains("| CPU-ms a saga | 2.0 ms | 1.0 ms | failed | **Restate ×2.0** |  |"),
            "{t}"
        );
        assert!(t.contains("Temporal failed: did not start"), "{t}");
    }
}
