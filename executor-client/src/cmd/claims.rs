//! `argo-results claims`: which scheduled ticks of a cron workflow ran.

use argo_results_client::RunsOptions;
use clap::Args;

use super::connect::{Connection, namespaced};
use super::failure::Failure;
use super::output::{self, Cell, Format};

/// List the claimed runs of a cron workflow, newest first.
///
/// Example:
///   argo-results claims argo/nightly
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ClaimsArgs {
    /// NAMESPACE/CRONWORKFLOW
    cron_workflow: String,

    /// Only this incarnation's claims.
    #[arg(long)]
    cron_workflow_uid: Option<String>,

    #[arg(short, long, value_enum, default_value = "table")]
    output: Format,

    #[command(flatten)]
    connection: Connection,
}

pub async fn run(args: &ClaimsArgs) -> Result<(), Failure> {
    let (namespace, name) = namespaced(&args.cron_workflow)?;
    let client = args.connection.client()?;
    let options = RunsOptions {
        cron_workflow_uid: args.cron_workflow_uid.clone(),
        ..RunsOptions::default()
    };
    let list = client.runs(&namespace, &name, &options).await?;
    let text = match args.output {
        Format::Table if list.items.is_empty() => {
            format!("no claimed runs of {namespace}/{name}\n")
        }
        Format::Table => {
            let rows = list
                .items
                .iter()
                .map(|claim| {
                    vec![
                        Cell::from(claim.scheduled_time.clone()),
                        Cell::from(claim.workflow_name.clone()),
                        Cell::from(output::age(&claim.claimed_at)),
                    ]
                })
                .collect();
            output::table(&["SCHEDULED", "WORKFLOW", "CLAIMED"], rows)
        }
        format => output::document(&list, format).map_err(Failure::Other)?,
    };
    print!("{text}");
    Ok(())
}
