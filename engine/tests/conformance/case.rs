//! A conformance case as stored in the corpus (`shared/conformance/README.md`, "Case format"),
//! and how the cases are found on disk.

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    pub name: String,
    /// `"JSONata"` for cases that use JSONata anywhere.
    #[serde(default)]
    pub query_language: Option<String>,
    pub definition: Value,
    pub input: Value,
    /// Keyed by the exact `Resource` string of each Task state.
    #[serde(default)]
    pub task_mocks: HashMap<String, TaskMock>,
    /// Kept as JSON: an absent `error`/`cause` (not recorded) differs from `null` (none).
    pub expected: Value,
    #[serde(default)]
    pub expected_states_entered: Option<Vec<String>>,
}

impl Case {
    pub fn is_jsonata(&self) -> bool {
        self.query_language.as_deref() == Some("JSONata")
    }

    /// The name used for both the state machine and the execution: valid for Step Functions
    /// (at most 80 of `[A-Za-z0-9_-]`) and still unique when a long name had to be cut.
    pub fn resource_name(&self) -> String {
        const MAX: usize = 80;
        let clean: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if clean == self.name && clean.len() <= MAX {
            return clean;
        }
        let hash = format!("{:08x}", fnv1a(self.name.as_bytes()) as u32);
        let keep = clean.len().min(MAX - hash.len() - 1);
        format!("{}-{hash}", &clean[..keep])
    }
}

/// What a mocked Task resource does (`task_mocks` in the README).
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TaskMock {
    /// The result is the task's effective input.
    Echo,
    /// The result is `value`, whatever the input.
    Return { value: Value },
    /// The task fails with this error and cause.
    Fail {
        error: String,
        #[serde(default)]
        cause: Option<String>,
    },
}

/// Every `*.json` below `dir`, parsed, sorted by name so runs print in a stable order.
pub fn load_cases(dir: &Path) -> Result<Vec<Case>> {
    let mut files = Vec::new();
    collect_json_files(dir, &mut files)
        .with_context(|| format!("reading the cases directory {}", dir.display()))?;
    let mut cases = files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str::<Case>(&text)
                .with_context(|| format!("parsing case {}", path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = cases.windows(2).find(|w| w[0].name == w[1].name) {
        anyhow::bail!("two cases are named {}", w[0].name);
    }
    Ok(cases)
}

fn collect_json_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_json_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    Ok(())
}

/// FNV-1a, 64 bits: a stable short hash without another dependency.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str) -> Case {
        Case {
            name: name.to_owned(),
            query_language: None,
            definition: Value::Null,
            input: Value::Null,
            task_mocks: HashMap::new(),
            expected: Value::Null,
            expected_states_entered: None,
        }
    }

    #[test]
    fn resource_names_are_valid_and_distinct() {
        assert_eq!(case("pass_result").resource_name(), "pass_result");
        let long_a = case(&format!("{}_a", "x".repeat(80))).resource_name();
        let long_b = case(&format!("{}_b", "x".repeat(80))).resource_name();
        assert_eq!(long_a.len(), 80);
        assert_ne!(long_a, long_b);
        assert_eq!(case("a b/c").resource_name().len(), 5 + 1 + 8);
    }

    #[test]
    fn mocks_parse_from_the_corpus_format() {
        let mocks: HashMap<String, TaskMock> = serde_json::from_str(
            r#"{"a": {"kind": "echo"}, "b": {"kind": "return", "value": [1]},
                "c": {"kind": "fail", "error": "E", "cause": "C"}}"#,
        )
        .unwrap();
        assert!(matches!(mocks["a"], TaskMock::Echo));
        assert!(
            matches!(&mocks["b"], TaskMock::Return { value } if value == &serde_json::json!([1]))
        );
        assert!(
            matches!(&mocks["c"], TaskMock::Fail { error, cause } if error == "E" && cause.as_deref() == Some("C"))
        );
    }
}
