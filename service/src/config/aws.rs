//! Where AWS is, and `provision`.

use super::*;

/// Where AWS is: the standard AWS configuration (environment, profiles, instance roles) read by
/// `aws-config`, with these flags on top.
#[derive(Debug, Clone, Args)]
pub struct AwsArgs {
    /// The AWS region (default: AWS_REGION, then the profile's region).
    #[arg(long, value_parser = parse_region, value_name = "REGION")]
    pub aws_region: Option<String>,

    /// The AWS profile of the shared config files (default: AWS_PROFILE, then `default`).
    #[arg(long, value_name = "NAME")]
    pub aws_profile: Option<String>,

    /// One endpoint for both Step Functions and DynamoDB (an emulator). Without it the standard
    /// variables apply: AWS_ENDPOINT_URL, or per service AWS_ENDPOINT_URL_SFN and
    /// AWS_ENDPOINT_URL_DYNAMODB.
    #[arg(long, value_parser = parse_url, value_name = "URL")]
    pub endpoint_url: Option<String>,

    /// The DynamoDB table holding orders, stock, reservations and the sandbox ledgers.
    #[arg(long, env = "FULFILLMENT_TABLE", default_value = "fulfillment", value_parser = parse_table)]
    pub table: String,
}

/// The AWS settings of `serve --backend aws` and `provision`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSettings {
    pub region: Option<String>,
    pub profile: Option<String>,
    pub endpoint_url: Option<String>,
    pub table: String,
}

impl From<AwsArgs> for AwsSettings {
    fn from(a: AwsArgs) -> Self {
        AwsSettings {
            region: a.aws_region,
            profile: a.aws_profile,
            endpoint_url: a.endpoint_url,
            table: a.table,
        }
    }
}

#[derive(Debug, Args)]
pub struct ProvisionArgs {
    #[command(flatten)]
    pub aws: AwsArgs,

    /// The IAM role the state machine runs as (it needs no permissions: every Task is an
    /// activity; only its trust policy must allow states.amazonaws.com). Any ARN works on an
    /// emulator.
    #[arg(long, env = "FULFILLMENT_STATE_MACHINE_ROLE_ARN", value_parser = parse_arn, value_name = "ARN")]
    pub state_machine_role_arn: String,

    /// Log format; the level comes from RUST_LOG (default `info`).
    #[arg(long, env = "FULFILLMENT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Everything `provision` runs with.
#[derive(Debug, Clone)]
pub struct ProvisionSettings {
    pub aws: AwsSettings,
    pub role_arn: String,
}

impl From<ProvisionArgs> for ProvisionSettings {
    fn from(a: ProvisionArgs) -> Self {
        ProvisionSettings {
            aws: a.aws.into(),
            role_arn: a.state_machine_role_arn,
        }
    }
}
