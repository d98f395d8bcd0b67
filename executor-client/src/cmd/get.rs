//! `argo-results get`: a workflow's results as a table, or one result.

use argo_results_client::ListOptions;
use argo_results_client::proto::{NodeResult, ResultList};
use clap::Args;

use super::connect::{Api, Connection, NamespaceArg};
use super::failure::Failure;
use super::output::{self, Cell, Format, Headers, ListFormat};

/// Show a workflow's results node by node, or one node's result.
///
/// PHASE is the result's state as Argo names a node's phase: expected is Pending,
/// reporting Running, abandoned Error, and completed the phase its final report gave, else
/// its exit code (0 Succeeded, any other Failed), else Error. STATE is the API's own.
/// A workflow with no results in the namespace exits 3, as a node that does not exist.
/// -o name prints result/NODE for each node.
///
/// Examples:
///   argo-results get etl-x7k2p -n argo
///   argo-results get etl-x7k2p -n argo -o wide --no-headers
///   argo-results get etl-x7k2p -n argo -o name
///   argo-results get etl-x7k2p etl-x7k2p-1529417052 -n argo -o yaml
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct GetArgs {
    /// The workflow's name (the old form NAMESPACE/WORKFLOW is still taken).
    workflow: Option<String>,

    /// One node's result instead of the table.
    node_id: Option<String>,

    /// The workflow incarnation [default: the newest of that name].
    #[arg(long)]
    workflow_uid: Option<String>,

    #[command(flatten)]
    namespace: NamespaceArg,

    #[arg(short, long, value_enum, default_value = "table")]
    output: ListFormat,

    #[command(flatten)]
    headers: Headers,

    #[command(flatten)]
    connection: Connection,
}

/// The kind `-o name` gives a node's result, and `watch -o name` a change's.
pub const RESULT: &str = "result";

/// Every page of the workflow, with the first page's summary and revision.
pub async fn all_pages(
    api: &Api,
    namespace: &str,
    workflow: &str,
    uid: Option<String>,
) -> Result<ResultList, Failure> {
    let mut options = ListOptions {
        workflow_uid: uid,
        ..Default::default()
    };
    let list_page = |options: &ListOptions| {
        let options = options.clone();
        api.call(move |client| {
            let options = options.clone();
            async move { client.list_results(namespace, workflow, &options).await }
        })
    };
    let mut list = list_page(&options).await?;
    while let Some(token) = list.continue_token.take() {
        options.continue_token = Some(token);
        let mut page = list_page(&options).await?;
        list.items.append(&mut page.items);
        list.continue_token = page.continue_token;
    }
    Ok(list)
}

fn or_dash(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| "-".into())
}

/// One result as FIELD/VALUE rows; wide adds every other field.
fn result_rows(result: &NodeResult, wide: bool, headers: Headers) -> String {
    let mut rows = vec![
        vec![Cell::from("node"), Cell::from(result.node_id.clone())],
        vec![
            Cell::from("workflow"),
            Cell::from(format!(
                "{}/{} ({})",
                result.namespace, result.workflow, result.workflow_uid
            )),
        ],
        vec![
            Cell::from("phase"),
            output::phase_cell(output::phase(result)),
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
            Cell::from("message"),
            Cell::from(or_dash(
                &result.message.clone().or(result.abandon_reason.clone()),
            )),
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
    if wide {
        rows.extend([
            vec![
                Cell::from("sequence"),
                Cell::from(result.sequence.map_or("-".into(), |s| s.to_string())),
            ],
            vec![
                Cell::from("instanceId"),
                Cell::from(or_dash(&result.instance_id)),
            ],
            vec![
                Cell::from("createdAt"),
                Cell::from(result.created_at.clone()),
            ],
            vec![
                Cell::from("updatedAt"),
                Cell::from(result.updated_at.clone()),
            ],
            vec![
                Cell::from("completedAt"),
                Cell::from(or_dash(&result.completed_at)),
            ],
        ]);
    }
    output::table(&["FIELD", "VALUE"], rows, headers)
}

/// The nodes' table; wide adds the pod's UID, the revision and the message.
fn nodes_table(items: &[NodeResult], wide: bool, headers: Headers) -> String {
    let mut header = vec![
        "NODE", "PHASE", "STATE", "PROGRESS", "OUTPUTS", "POD", "AGE",
    ];
    if wide {
        header.extend(["POD UID", "REVISION", "MESSAGE"]);
    }
    let rows = items
        .iter()
        .map(|r| {
            let mut row = vec![
                Cell::from(r.node_id.clone()),
                output::phase_cell(output::phase(r)),
                output::state_cell(r.state),
                Cell::from(or_dash(&r.progress)),
                Cell::from(output::outputs_summary(r)),
                Cell::from(or_dash(&r.pod_name)),
                Cell::from(output::age(&r.updated_at)),
            ];
            if wide {
                row.extend([
                    Cell::from(or_dash(&r.pod_uid)),
                    Cell::from(r.revision.to_string()),
                    Cell::from(or_dash(&r.message.clone().or(r.abandon_reason.clone()))),
                ]);
            }
            row
        })
        .collect();
    output::table(&header, rows, headers)
}

pub async fn run(args: &GetArgs) -> Result<(), Failure> {
    let Some(workflow) = &args.workflow else {
        return Err(Failure::Usage(
            "give a workflow's name: argo-results get WORKFLOW [-n NAMESPACE]; \
             argo-results list shows the workflows that have results"
                .into(),
        ));
    };
    let rest = args
        .node_id
        .as_ref()
        .map_or(String::new(), |node| format!(" {node}"));
    let (namespace, workflow) = args.namespace.locate(workflow, "get", &rest)?;
    let api = args.connection.api()?;
    let text = if let Some(node_id) = &args.node_id {
        let (ns, wf, uid) = (&namespace, &workflow, args.workflow_uid.as_deref());
        let result = api
            .call(|client| async move { client.get_result(ns, wf, node_id, uid).await })
            .await?;
        match args.output {
            ListFormat::Table => result_rows(&result, false, args.headers),
            ListFormat::Wide => result_rows(&result, true, args.headers),
            ListFormat::Name => output::names(RESULT, [result.node_id.as_str()]),
            ListFormat::Json => output::document(&result, Format::Json)?,
            ListFormat::Yaml => output::document(&result, Format::Yaml)?,
        }
    } else {
        let list = all_pages(&api, &namespace, &workflow, args.workflow_uid.clone()).await?;
        if list.items.is_empty() {
            return Err(Failure::NotFound(format!(
                "no results found for workflow {workflow} in namespace {namespace} \
                 (argo-results list -n {namespace} shows the workflows that have results)."
            )));
        }
        match args.output {
            ListFormat::Table => nodes_table(&list.items, false, args.headers),
            ListFormat::Wide => nodes_table(&list.items, true, args.headers),
            ListFormat::Name => {
                output::names(RESULT, list.items.iter().map(|r| r.node_id.as_str()))
            }
            ListFormat::Json => output::document(&list, Format::Json)?,
            ListFormat::Yaml => output::document(&list, Format::Yaml)?,
        }
    };
    output::emit(&text)
}
