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

#[cfg(test)]
mod tests {
    use super::*;

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
