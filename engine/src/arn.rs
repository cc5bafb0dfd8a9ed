//! Names and ARNs as Step Functions forms and checks them.

/// Checks a state machine, activity or execution name: 1–80 characters, none of whitespace,
/// `< > { } [ ] ? * " # % \ ^ | ~ ` $ & , ; : /` or control characters.
pub fn validate_name(name: &str) -> Result<(), String> {
    let len = name.chars().count();
    if len == 0 || len > 80 {
        return Err(format!(
            "Invalid Name: '{name}' (must be 1 to 80 characters)"
        ));
    }
    const FORBIDDEN: &str = "<>{}[]?*\"#%\\^|~`$&,;:/";
    if let Some(c) = name
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || FORBIDDEN.contains(*c))
    {
        return Err(format!(
            "Invalid Name: '{name}' (character {c:?} is not allowed)"
        ));
    }
    Ok(())
}

/// Builds an ARN: `arn:aws:states:<region>:<account>:<kind>:<rest>`.
pub fn make(region: &str, account: &str, kind: &str, rest: &str) -> String {
    format!("arn:aws:states:{region}:{account}:{kind}:{rest}")
}

/// Splits a Step Functions ARN of `kind` into its trailing name parts, or `None` when it is not
/// one (`arn:<partition>:states:<region>:<account>:<kind>:<parts…>`).
pub fn parts<'a>(arn: &'a str, kind: &str) -> Option<Vec<&'a str>> {
    let fields: Vec<&str> = arn.split(':').collect();
    if fields.len() < 7 || fields[0] != "arn" || fields[2] != "states" || fields[5] != kind {
        return None;
    }
    Some(fields[6..].to_vec())
}

/// What a state machine ARN names: the machine itself, one of its versions
/// (`…:stateMachine:<name>:<number>`) or one of its aliases (`…:stateMachine:<name>:<alias>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineRef {
    /// The machine's own (unqualified) ARN.
    pub machine: String,
    pub qualifier: Qualifier,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Qualifier {
    None,
    Version(u32),
    Alias(String),
}

impl MachineRef {
    /// Parses a state machine, version or alias ARN; `None` when it is none of them.
    pub fn parse(arn: &str) -> Option<MachineRef> {
        let parts = parts(arn, "stateMachine")?;
        let qualifier = match parts.as_slice() {
            [_] => Qualifier::None,
            [_, q] if !q.is_empty() && q.bytes().all(|b| b.is_ascii_digit()) => {
                Qualifier::Version(q.parse().ok().filter(|n| *n > 0)?)
            }
            [_, q] => {
                validate_alias_name(q).ok()?;
                Qualifier::Alias((*q).to_owned())
            }
            _ => return None,
        };
        let machine = match qualifier {
            Qualifier::None => arn.to_owned(),
            _ => arn.rsplit_once(':')?.0.to_owned(),
        };
        Some(MachineRef { machine, qualifier })
    }

    /// The ARN of a version of `machine`.
    pub fn version_arn(machine: &str, number: u32) -> String {
        format!("{machine}:{number}")
    }

    /// The ARN of an alias of `machine`.
    pub fn alias_arn(machine: &str, alias: &str) -> String {
        format!("{machine}:{alias}")
    }
}

/// Checks an alias name as AWS does: 1–80 characters of letters, digits, `-`, `_` and `.`, not
/// all digits (a number names a version).
pub fn validate_alias_name(name: &str) -> Result<(), String> {
    let ok = (1..=80).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !name.bytes().all(|b| b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Invalid alias name: '{name}' (1 to 80 letters, digits, '-', '_' or '.', not only digits)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_arns_name_the_machine_a_version_or_an_alias() {
        let m = "arn:aws:states:us-east-1:123456789012:stateMachine:orders";
        assert_eq!(
            MachineRef::parse(m),
            Some(MachineRef {
                machine: m.to_owned(),
                qualifier: Qualifier::None
            })
        );
        assert_eq!(
            MachineRef::parse(&format!("{m}:12")).map(|r| (r.machine, r.qualifier)),
            Some((m.to_owned(), Qualifier::Version(12)))
        );
        assert_eq!(
            MachineRef::parse(&format!("{m}:live")).map(|r| r.qualifier),
            Some(Qualifier::Alias("live".to_owned()))
        );
        assert_eq!(MachineRef::parse(&format!("{m}:0")), None);
        assert_eq!(MachineRef::parse(&format!("{m}:a b")), None);
        assert_eq!(MachineRef::parse(&format!("{m}:1:2")), None);
        assert_eq!(
            MachineRef::parse("arn:aws:states:us-east-1:1:activity:a"),
            None
        );
        assert!(validate_alias_name("live").is_ok());
        assert!(validate_alias_name("v1.2-canary_x").is_ok());
        assert!(validate_alias_name("42").is_err());
        assert!(validate_alias_name("").is_err());
    }

    #[test]
    fn names_follow_aws_rules() {
        assert!(validate_name("order-123_A").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name(&"a".repeat(81)).is_err());
        assert!(validate_name("has space").is_err());
        assert!(validate_name("a:b").is_err());
        assert!(validate_name("tab\there").is_err());
    }

    #[test]
    fn execution_arns_split_into_machine_and_name() {
        let arn = make("us-east-1", "123456789012", "execution", "sm:run-1");
        assert_eq!(parts(&arn, "execution"), Some(vec!["sm", "run-1"]));
        assert_eq!(parts(&arn, "stateMachine"), None);
        assert_eq!(parts("nonsense", "execution"), None);
    }
}
