//! `argo-results get`: a workflow's results as a table, or one result.

use argo_results_client::proto::{NodeResult, ResultList};
use argo_results_client::{Client, ListOptions};
use clap::Args;

use super::connect::{Connection, namespaced};
use super::failure::Failure;
use super::output::{self, Cell, Format};

/// Show a workflow's results, or one node's.
///
/// Examples:
///   argo-results get argo/etl-x7k2p
///   argo-results get argo/etl-x7k2p etl-x7k2p-1529417052 -o yaml
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct GetArgs {
    /// NAMESPACE/WORKFLOW
    workflow: String,

    /// One node's result instead of the table.
    node_id: Option<String>,

    /// The workflow incarnation [default: the newest of that name].
    #[arg(long)]
    workflow_uid: Option<String>,

    #[arg(short, long, value_enum, default_value = "table")]
    output: Format,

    #[command(flatten)]
    connection: Connection,
}

/// Every page of the workflow, with the first page's summary and revision.
async fn all_pages(
    client: &Client,
    namespace: &str,
    workflow: &str,
    uid: Option<String>,
) -> Result<ResultList, Failure> {
    let mut options = ListOptions {
        workflow_uid: uid,
        ..Default::default()
    };
    let mut list = client.list_results(namespace, workflow, &options).await?;
    while let Some(token) = list.continue_token.take() {
        options.continue_token = Some(token);
        let mut page = client.list_results(namespace, workflow, &options).await?;
        list.items.append(&mut page.items);
        list.continue_token = page.continue_token;
    }
    Ok(list)
}

fn result_rows(result: &NodeResult) -> String {
    let or_dash = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
    let rows = vec![
        vec![Cell::from("node"), Cell::from(result.node_id.clone())],
        vec![
            Cell::from("workflow"),
            Cell::from(format!("{} ({})", result.workflow, result.workflow_uid)),
        ],
        vec![Cell::from("state"), output::state_cell(result.state)],
        vec![
            Cell::from("pod"),
            Cell::from(format!(
                "{} ({})",
                or_dash(&result.pod_name),
                or_dash(&result.pod_uid)
            )),
        ],
        vec![
            Cell::from("progress"),
            Cell::from(or_dash(&result.progress)),
        ],
        vec![
            Cell::from("outputs"),
            Cell::from(output::outputs_summary(result)),
        ],
        vec![
            Cell::from("revision"),
            Cell::from(result.revision.to_string()),
        ],
        vec![
            Cell::from("updated"),
            Cell::from(format!("{} ago", output::age(&result.updated_at))),
        ],
    ];
    output::table(&["FIELD", "VALUE"], rows)
}

pub async fn run(args: &GetArgs) -> Result<(), Failure> {
    let (namespace, workflow) = namespaced(&args.workflow)?;
    let client = args.connection.client()?;
    let text = if let Some(node_id) = &args.node_id {
        let result = client
            .get_result(&namespace, &workflow, node_id, args.workflow_uid.as_deref())
            .await?;
        match args.output {
            Format::Table => result_rows(&result),
            format => output::document(&result, format).map_err(Failure::Other)?,
        }
    } else {
        let list = all_pages(&client, &namespace, &workflow, args.workflow_uid.clone()).await?;
        match args.output {
            Format::Table if list.items.is_empty() => {
                format!("no results for {namespace}/{workflow}\n")
            }
            Format::Table => {
                let rows = list
                    .items
                    .iter()
                    .map(|r| {
                        vec![
                            Cell::from(r.node_id.clone()),
                            output::state_cell(r.state),
                            Cell::from(r.progress.clone().unwrap_or_else(|| "-".into())),
                            Cell::from(output::outputs_summary(r)),
                            Cell::from(r.pod_name.clone().unwrap_or_else(|| "-".into())),
                            Cell::from(output::age(&r.updated_at)),
                        ]
                    })
                    .collect();
                output::table(
                    &["NODE", "STATE", "PROGRESS", "OUTPUTS", "POD", "AGE"],
                    rows,
                )
            }
            format => output::document(&list, format).map_err(Failure::Other)?,
        }
    };
    print!("{text}");
    Ok(())
}
