//! `argo-results list`: the workflows that have results in a namespace (or in every one),
//! each with its phase and a summary of its results.

use argo_results_client::WorkflowsOptions;
use argo_results_client::proto::{Summary, WorkflowSummary};
use clap::Args;
use serde::Serialize;

use super::connect::{Api, Connection, NamespacesArg};
use super::failure::Failure;
use super::output::{self, Cell, Format, Headers, ListFormat};

/// List the workflows that have results, each with its PHASE and a summary.
///
/// The server adds up each workflow's results (GET /api/v1/workflows), a page of up to
/// 1000 workflows per request. Argo's controller deletes a workflow's results once the
/// workflow is done, so list shows mostly the workflows in flight.
///
/// PHASE is what the results say, not the workflow's own status (Argo's retries and
/// continueOn are not known here): Pending while every result is expected, Running while
/// one is expected or reporting, else Failed if a node failed, else Error if one ended in
/// Error or was abandoned, else Succeeded (a node's phase: argo-results get --help).
/// RESULTS: the results that ended (completed or abandoned) of all.
///
/// -o name prints workflow/NAME for each workflow (without its namespace, as kubectl's).
/// A namespace with no results says "No results found in namespace NS." on stderr and
/// exits 0, as kubectl does (with -o json or yaml: an empty items list; -o name: nothing).
///
/// Examples:
///   argo-results list -n argo
///   argo-results list -A -o wide
///   argo-results list -n argo -o name
///   argo-results list -n argo --no-headers
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ListArgs {
    #[command(flatten)]
    namespaces: NamespacesArg,

    #[arg(short, long, value_enum, default_value = "table")]
    output: ListFormat,

    #[command(flatten)]
    headers: Headers,

    #[command(flatten)]
    connection: Connection,
}

/// A workflow's line of the list, and its object in `-o json` and `-o yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WorkflowRow {
    namespace: String,
    workflow: String,
    workflow_uid: String,
    phase: &'static str,
    /// Results in all, and those completed or abandoned.
    results: usize,
    ended: usize,
    summary: Summary,
    /// The oldest result's creation and the newest change.
    created_at: String,
    updated_at: String,
    revision: i64,
}

#[derive(Debug, Serialize)]
struct WorkflowList {
    items: Vec<WorkflowRow>,
}

/// Workflows read per request (the API's largest page).
const PAGE: u32 = 1000;

/// A workflow's phase from how many of its results are in each state and how the ended
/// ones ended: Pending while every result is expected, Running while one is expected or
/// reporting, else the worst ending.
fn workflow_phase(workflow: &WorkflowSummary) -> &'static str {
    let (summary, ended) = (&workflow.summary, &workflow.ended);
    let results = summary.expected + summary.reporting + summary.completed + summary.abandoned;
    if summary.expected == results {
        "Pending"
    } else if summary.expected + summary.reporting > 0 {
        "Running"
    } else if ended.failed > 0 {
        "Failed"
    } else if ended.error > 0 {
        "Error"
    } else {
        "Succeeded"
    }
}

fn row(workflow: WorkflowSummary) -> WorkflowRow {
    let s = workflow.summary;
    WorkflowRow {
        phase: workflow_phase(&workflow),
        results: (s.expected + s.reporting + s.completed + s.abandoned) as usize,
        ended: (s.completed + s.abandoned) as usize,
        summary: s,
        created_at: workflow.created_at,
        updated_at: workflow.updated_at,
        revision: workflow.revision,
        namespace: workflow.namespace,
        workflow: workflow.workflow,
        workflow_uid: workflow.workflow_uid,
    }
}

/// Every workflow of `namespace` (`None`: of all), page after page.
async fn all_workflows(api: &Api, namespace: Option<String>) -> Result<Vec<WorkflowRow>, Failure> {
    let mut options = WorkflowsOptions {
        namespace,
        limit: Some(PAGE),
        continue_token: None,
    };
    let mut rows = Vec::new();
    loop {
        let page = api
            .call(|client| {
                let options = &options;
                async move { client.workflows(options).await }
            })
            .await?;
        rows.extend(page.items.into_iter().map(row));
        match page.continue_token {
            Some(token) => options.continue_token = Some(token),
            None => break,
        }
    }
    // The server pages by incarnation; a person reads by name.
    rows.sort_by(|a, b| {
        (&a.namespace, &a.workflow, &a.created_at).cmp(&(&b.namespace, &b.workflow, &b.created_at))
    });
    Ok(rows)
}

fn table(rows: &[WorkflowRow], all_namespaces: bool, wide: bool, headers: Headers) -> String {
    let mut header = vec!["NAME", "PHASE", "RESULTS", "AGE"];
    if all_namespaces {
        header.insert(0, "NAMESPACE");
    }
    if wide {
        header.extend([
            "UID",
            "EXPECTED",
            "REPORTING",
            "COMPLETED",
            "ABANDONED",
            "UPDATED",
        ]);
    }
    let lines = rows
        .iter()
        .map(|row| {
            let mut cells = vec![
                Cell::from(row.workflow.clone()),
                output::phase_cell(row.phase),
                Cell::from(format!("{}/{}", row.ended, row.results)),
                Cell::from(output::age(&row.created_at)),
            ];
            if all_namespaces {
                cells.insert(0, Cell::from(row.namespace.clone()));
            }
            if wide {
                let s = &row.summary;
                cells.extend(
                    [
                        row.workflow_uid.clone(),
                        s.expected.to_string(),
                        s.reporting.to_string(),
                        s.completed.to_string(),
                        s.abandoned.to_string(),
                        output::age(&row.updated_at),
                    ]
                    .map(Cell::from),
                );
            }
            cells
        })
        .collect();
    output::table(&header, lines, headers)
}

pub async fn run(args: &ListArgs) -> Result<(), Failure> {
    let namespace = args.namespaces.resolve()?;
    let api = args.connection.api()?;
    let rows = all_workflows(&api, namespace.clone()).await?;
    let all_namespaces = namespace.is_none();
    if rows.is_empty() && matches!(args.output, ListFormat::Table | ListFormat::Wide) {
        match &namespace {
            Some(namespace) => eprintln!("No results found in namespace {namespace}."),
            None => eprintln!("No results found."),
        }
        return Ok(());
    }
    let text = match args.output {
        ListFormat::Table => table(&rows, all_namespaces, false, args.headers),
        ListFormat::Wide => table(&rows, all_namespaces, true, args.headers),
        ListFormat::Name => output::names("workflow", rows.iter().map(|r| r.workflow.as_str())),
        ListFormat::Json => output::document(&WorkflowList { items: rows }, Format::Json)?,
        ListFormat::Yaml => output::document(&WorkflowList { items: rows }, Format::Yaml)?,
    };
    output::emit(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use argo_results_client::proto::Ended;

    fn workflow(counts: [u64; 4], ended: [u64; 3]) -> WorkflowSummary {
        WorkflowSummary {
            namespace: "argo".into(),
            workflow: "wf".into(),
            workflow_uid: "u".into(),
            summary: Summary {
                expected: counts[0],
                reporting: counts[1],
                completed: counts[2],
                abandoned: counts[3],
            },
            ended: Ended {
                succeeded: ended[0],
                failed: ended[1],
                error: ended[2],
            },
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            revision: 1,
        }
    }

    #[test]
    fn a_workflows_phase_runs_until_every_result_ended_then_takes_the_worst() {
        let phase = |counts, ended| workflow_phase(&workflow(counts, ended));
        assert_eq!(phase([2, 0, 0, 0], [0, 0, 0]), "Pending");
        assert_eq!(phase([1, 0, 1, 0], [1, 0, 0]), "Running");
        assert_eq!(phase([0, 1, 0, 1], [0, 0, 1]), "Running");
        assert_eq!(phase([0, 0, 2, 0], [2, 0, 0]), "Succeeded");
        assert_eq!(phase([0, 0, 2, 0], [0, 1, 1]), "Failed");
        assert_eq!(phase([0, 0, 1, 1], [1, 0, 1]), "Error");
    }
}
