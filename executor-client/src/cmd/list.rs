//! `argo-results list`: the workflows that have results in a namespace (or in every one),
//! each with its phase and a summary of its results.

use std::collections::{BTreeMap, BTreeSet};

use argo_results_client::FeedOptions;
use argo_results_client::proto::{FeedItem, FeedPage, NodeResult, ProblemCode, Summary};
use clap::Args;
use futures_util::{StreamExt, TryStreamExt, stream};
use serde::Serialize;

use super::connect::{Api, Connection, NamespacesArg};
use super::failure::Failure;
use super::get::all_pages;
use super::output::{self, Cell, Format, Headers, ListFormat};

/// List the workflows that have results, each with its PHASE and a summary.
///
/// The API lists results workflow by workflow; list finds the workflows in the change
/// feed, which the server keeps for its --feed-retention (24h by default): a workflow
/// whose results last changed before that is not listed (get WORKFLOW still shows it).
/// Argo's controller deletes a workflow's results once the workflow is done, so list
/// shows mostly the workflows in flight.
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

/// One incarnation of a workflow, as the feed names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct WorkflowKey {
    namespace: String,
    workflow: String,
    uid: String,
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

/// Feed pages are read this many changes at a time (the API's largest page).
const PAGE: u32 = 1000;
/// Workflows whose results are read at once.
const CONCURRENT: usize = 8;

/// Whether a failure is the feed's `410 gone`, and the head revision it gives.
fn gone(failure: &Failure) -> Option<i64> {
    match failure {
        Failure::Refused(error) if error.code() == Some(ProblemCode::Gone) => {
            Some(error.problem().and_then(|p| p.revision).unwrap_or(0))
        }
        _ => None,
    }
}

async fn feed_page(api: &Api, options: &FeedOptions) -> Result<FeedPage, Failure> {
    api.call(|client| async move { client.feed(options).await })
        .await
}

/// The oldest `since` the server still answers when history before it was pruned
/// (`since` 0 answered `410 gone`): `since` at the head is always answered, so a search
/// between 0 and the head finds it in a few requests of one change each.
async fn oldest_since(api: &Api, options: &FeedOptions, head: i64) -> Result<i64, Failure> {
    let (mut refused, mut answered) = (0, head);
    while answered - refused > 1 {
        let middle = refused + (answered - refused) / 2;
        let probe = FeedOptions {
            since: middle,
            limit: Some(1),
            ..options.clone()
        };
        match feed_page(api, &probe).await {
            Ok(_) => answered = middle,
            Err(failure) if gone(&failure).is_some() => refused = middle,
            Err(failure) => return Err(failure),
        }
    }
    Ok(answered)
}

/// The workflows with a result that the retained feed shows alive (not deleted since),
/// or `None` when the history moved under the reader (pruned past it, or restored).
async fn read_feed(
    api: &Api,
    namespace: Option<&str>,
) -> Result<Option<BTreeSet<WorkflowKey>>, Failure> {
    let mut options = FeedOptions {
        since: 0,
        namespace: namespace.map(str::to_owned),
        limit: Some(PAGE),
        ..Default::default()
    };
    let mut alive: BTreeMap<WorkflowKey, BTreeSet<String>> = BTreeMap::new();
    let mut started = false;
    loop {
        let page = match feed_page(api, &options).await {
            Ok(page) => page,
            Err(failure) => match gone(&failure) {
                Some(head) if !started => {
                    options.since = oldest_since(api, &options, head).await?;
                    started = true;
                    continue;
                }
                Some(_) => return Ok(None),
                None => return Err(failure),
            },
        };
        started = true;
        if page.items.is_empty() {
            break;
        }
        for item in page.items {
            match item {
                FeedItem::Upserted { result, .. } => {
                    let key = WorkflowKey {
                        namespace: result.namespace,
                        workflow: result.workflow,
                        uid: result.workflow_uid,
                    };
                    alive.entry(key).or_default().insert(result.node_id);
                }
                FeedItem::Deleted {
                    namespace,
                    workflow,
                    workflow_uid,
                    node_id,
                    ..
                } => {
                    let key = WorkflowKey {
                        namespace,
                        workflow,
                        uid: workflow_uid,
                    };
                    if let Some(nodes) = alive.get_mut(&key) {
                        nodes.remove(&node_id);
                    }
                }
            }
        }
        options.since = page.revision;
        options.epoch = page.epoch;
    }
    Ok(Some(
        alive
            .into_iter()
            .filter(|(_, nodes)| !nodes.is_empty())
            .map(|(key, _)| key)
            .collect(),
    ))
}

/// A workflow's phase from its nodes' ([`output::phase`]).
fn workflow_phase(items: &[NodeResult]) -> &'static str {
    let phases: Vec<&str> = items.iter().map(output::phase).collect();
    let any = |phase: &str| phases.contains(&phase);
    if phases.iter().all(|p| *p == "Pending") {
        "Pending"
    } else if any("Pending") || any("Running") {
        "Running"
    } else if any("Failed") {
        "Failed"
    } else if any("Error") {
        "Error"
    } else {
        "Succeeded"
    }
}

/// A workflow's row from all its results, `None` when it has none left.
async fn row(api: &Api, key: WorkflowKey) -> Result<Option<WorkflowRow>, Failure> {
    let list = all_pages(api, &key.namespace, &key.workflow, Some(key.uid.clone())).await?;
    let items = &list.items;
    let (Some(created_at), Some(updated_at)) = (
        items.iter().map(|r| &r.created_at).min(),
        items.iter().map(|r| &r.updated_at).max(),
    ) else {
        return Ok(None);
    };
    let summary = list.summary;
    Ok(Some(WorkflowRow {
        phase: workflow_phase(items),
        results: items.len(),
        ended: (summary.completed + summary.abandoned) as usize,
        summary,
        created_at: created_at.clone(),
        updated_at: updated_at.clone(),
        revision: items.iter().map(|r| r.revision).max().unwrap_or_default(),
        namespace: key.namespace,
        workflow: key.workflow,
        workflow_uid: key.uid,
    }))
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
    // History pruned or the database restored while it was read: read it again.
    let mut workflows = None;
    for _ in 0..3 {
        workflows = read_feed(&api, namespace.as_deref()).await?;
        if workflows.is_some() {
            break;
        }
    }
    let Some(workflows) = workflows else {
        return Err(Failure::Other(
            "the server's change history moved while it was read (pruned, or the database \
             restored); try again"
                .into(),
        ));
    };
    let rows: Vec<Option<WorkflowRow>> = stream::iter(workflows)
        .map(|key| row(&api, key))
        .buffered(CONCURRENT)
        .try_collect()
        .await?;
    let rows: Vec<WorkflowRow> = rows.into_iter().flatten().collect();
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
    use argo_results_client::proto::ResultState;

    fn result(state: ResultState, phase: Option<&str>) -> NodeResult {
        let mut value = serde_json::json!({
            "namespace": "argo", "workflow": "wf", "workflowUid": "u", "nodeId": "wf-1",
            "podName": null, "podUid": null, "instanceId": null, "state": state.as_str(),
            "phase": phase, "message": null, "progress": null, "outputs": null,
            "sequence": null, "revision": 1, "createdAt": "2026-01-01T00:00:00Z",
            "updatedAt": "2026-01-01T00:00:00Z", "completedAt": null, "abandonReason": null
        });
        if state == ResultState::Completed && phase.is_none() {
            value["outputs"] = serde_json::json!({"exitCode": "0"});
        }
        serde_json::from_value(value).expect("a result")
    }

    #[test]
    fn a_workflows_phase_runs_until_every_result_ended_then_takes_the_worst() {
        use ResultState::*;
        let phase = |results: &[(ResultState, Option<&str>)]| {
            let items: Vec<NodeResult> = results.iter().map(|(s, p)| result(*s, *p)).collect();
            workflow_phase(&items)
        };
        assert_eq!(phase(&[(Expected, None), (Expected, None)]), "Pending");
        assert_eq!(phase(&[(Expected, None), (Completed, None)]), "Running");
        assert_eq!(phase(&[(Reporting, None), (Abandoned, None)]), "Running");
        assert_eq!(
            phase(&[(Completed, Some("Succeeded")), (Completed, None)]),
            "Succeeded"
        );
        assert_eq!(
            phase(&[(Completed, Some("Error")), (Completed, Some("Failed"))]),
            "Failed"
        );
        assert_eq!(
            phase(&[(Completed, Some("Succeeded")), (Abandoned, None)]),
            "Error"
        );
    }
}
