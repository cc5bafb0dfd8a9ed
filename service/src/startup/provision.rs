//! `fulfillment provision`: creates (or updates) the AWS resources the service needs.

use super::*;

/// `fulfillment provision`: creates the table, the activities and the state machine (each
/// idempotently), publishes this build's definition and routes the alias `live` to it (the
/// same upgrade every `serve --backend aws` runs at its start), and prints what `serve
/// --backend aws` needs.
pub async fn run_provision(settings: ProvisionSettings) -> Result<(), StartupError> {
    let sdk = aws_sdk_config(&settings.aws).await?;
    let table = &settings.aws.table;
    store_dynamodb::create_table(&aws_sdk_dynamodb::Client::new(&sdk), table)
        .await
        .map_err(|source| StartupError::Table {
            table: table.clone(),
            source,
        })?;
    tracing::info!(%table, "table ready");
    let provisioned =
        workflow::aws::provision(&aws_sdk_sfn::Client::new(&sdk), &settings.role_arn).await?;
    let mut workflow = workflow::AwsWorkflow::new(
        aws_sdk_sfn::Client::new(&sdk),
        &provisioned.state_machine_arn,
    )?;
    let upgraded = workflow.upgrade(None).await?;
    tracing::info!(
        state_machine = %provisioned.state_machine_arn,
        alias = workflow.start_arn(),
        live = ?upgraded.routing,
        "state machine ready"
    );
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "FULFILLMENT_TABLE={table}");
    let _ = writeln!(
        out,
        "FULFILLMENT_STATE_MACHINE_ARN={}",
        provisioned.state_machine_arn
    );
    let _ = out.flush();
    Ok(())
}
