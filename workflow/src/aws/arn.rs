//! The saga's Step Functions ARNs, derived from one: its activities and executions live in the
//! partition, region and account of its state machine, so the service is configured with the
//! state machine's ARN alone.

/// `arn:<partition>:states:<region>:<account>`: the part every ARN of the saga shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope(String);

impl Scope {
    /// The scope and the name of `arn` when it is an unqualified Step Functions ARN of `kind`
    /// (`stateMachine`, `activity`): `arn:<partition>:states:<region>:<account>:<kind>:<name>`.
    /// A version or alias ARN (`…:stateMachine:<name>:<qualifier>`) is not one.
    pub(crate) fn of<'a>(arn: &'a str, kind: &str) -> Option<(Scope, &'a str)> {
        let fields: Vec<&str> = arn.split(':').collect();
        let [prefix, partition, service, region, account, resource, name] = fields[..] else {
            return None;
        };
        let filled = [partition, region, account, name]
            .iter()
            .all(|f| !f.is_empty());
        (prefix == "arn" && service == "states" && resource == kind && filled).then(|| {
            let scope = format!("arn:{partition}:states:{region}:{account}");
            (Scope(scope), name)
        })
    }

    /// The ARN of the `kind` resource named `name` in this scope.
    pub(crate) fn arn(&self, kind: &str, name: &str) -> String {
        format!("{}:{kind}:{name}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_activities_and_executions_in_the_same_partition_region_and_account() {
        let (scope, name) = Scope::of(
            "arn:aws-cn:states:cn-north-1:111122223333:stateMachine:saga",
            "stateMachine",
        )
        .unwrap();
        assert_eq!(name, "saga");
        assert_eq!(
            scope.arn("activity", "work"),
            "arn:aws-cn:states:cn-north-1:111122223333:activity:work"
        );
        assert_eq!(
            scope.arn("execution", "saga:order-1"),
            "arn:aws-cn:states:cn-north-1:111122223333:execution:saga:order-1"
        );
    }

    #[test]
    fn refuses_what_is_not_an_unqualified_arn_of_the_kind() {
        for arn in [
            "saga",
            "arn:aws:states:us-east-1:123456789012:activity:saga",
            "arn:aws:states:us-east-1:123456789012:stateMachine:saga:1",
            "arn:aws:lambda:us-east-1:123456789012:stateMachine:saga",
            "arn:aws:states::123456789012:stateMachine:saga",
            "arn:aws:states:us-east-1:123456789012:stateMachine:",
            "urn:aws:states:us-east-1:123456789012:stateMachine:saga",
        ] {
            assert_eq!(Scope::of(arn, "stateMachine"), None, "{arn}");
        }
    }
}
