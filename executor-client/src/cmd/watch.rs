//! `argo-results watch`: follows the change feed, resuming after restarts of the server.

use std::pin::pin;

use argo_results_client::proto::{FeedItem, ProblemCode};
use argo_results_client::{FeedOptions, WatchEvent};
use clap::{Args, ValueEnum};
use futures_util::StreamExt;

use super::connect::{Connection, NamespacesArg};
use super::failure::Failure;
use super::get::RESULT;
use super::output::{self, Cell, Headers};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WatchFormat {
    /// A row per change.
    Table,
    /// The table with the workflow's UID and the pod.
    Wide,
    /// One change per line.
    Json,
    /// One YAML document per change, `---` between them, as kubectl's watch.
    Yaml,
    /// result/NODE of each change, one a line, as kubectl's watch -o name.
    Name,
}

/// Follow every change from a revision on, in commit order, until interrupted.
///
/// The first request fails at once when the server cannot be reached (as get does); once
/// connected, the watch waits out restarts of the server and resumes where it was.
///
/// Examples:
///   argo-results watch -n argo
///   argo-results watch -A --since 1042 -o json
///   argo-results watch -n argo -o yaml
///   argo-results watch -n argo -o name
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct WatchArgs {
    /// Start after this revision [default: 0, the oldest change kept].
    #[arg(long, default_value_t = 0)]
    since: i64,

    #[command(flatten)]
    namespaces: NamespacesArg,

    #[arg(short, long, value_enum, default_value = "table")]
    output: WatchFormat,

    #[command(flatten)]
    headers: Headers,

    #[command(flatten)]
    connection: Connection,
}

/// A streamed table cannot measure its columns first; these widths fit typical names
/// (NAMESPACE only with -A; the last two with -o wide).
const WIDTHS: [usize; 9] = [16, 10, 9, 30, 36, 9, 10, 36, 0];

/// The columns of the table without -o wide.
const COLUMNS: usize = 7;

/// A row of the streamed table, its NAMESPACE cell dropped unless every namespace shows
/// and its wide cells unless `wide`.
fn row(mut cells: Vec<Cell>, all_namespaces: bool, wide: bool) -> String {
    if !wide {
        cells.truncate(COLUMNS);
    }
    let widths = &WIDTHS[..cells.len()];
    if all_namespaces {
        output::stream_row(cells, widths)
    } else {
        cells.remove(0);
        output::stream_row(cells, &widths[1..])
    }
}

fn change_row(item: &FeedItem, all_namespaces: bool, wide: bool) -> String {
    let cells = match item {
        FeedItem::Upserted { revision, result } => vec![
            Cell::from(result.namespace.clone()),
            Cell::from(revision.to_string()),
            Cell::from("upserted"),
            Cell::from(result.workflow.clone()),
            Cell::from(result.node_id.clone()),
            output::phase_cell(output::phase(result)),
            output::state_cell(result.state),
            Cell::from(result.workflow_uid.clone()),
            Cell::from(result.pod_name.clone().unwrap_or_else(|| "-".into())),
        ],
        FeedItem::Deleted {
            revision,
            namespace,
            workflow,
            workflow_uid,
            node_id,
            ..
        } => vec![
            Cell::from(namespace.clone()),
            Cell::from(revision.to_string()),
            Cell::from("deleted"),
            Cell::from(workflow.clone()),
            Cell::from(node_id.clone()),
            Cell::from("-"),
            Cell::from("-"),
            Cell::from(workflow_uid.clone()),
            Cell::from("-"),
        ],
    };
    row(cells, all_namespaces, wide)
}

/// The node a change is of.
fn node_id(item: &FeedItem) -> &str {
    match item {
        FeedItem::Upserted { result, .. } => &result.node_id,
        FeedItem::Deleted { node_id, .. } => node_id,
    }
}

/// One change as the output format prints it.
fn change(
    item: &FeedItem,
    format: WatchFormat,
    all_namespaces: bool,
    first: bool,
) -> Result<String, Failure> {
    Ok(match format {
        WatchFormat::Table => change_row(item, all_namespaces, false),
        WatchFormat::Wide => change_row(item, all_namespaces, true),
        WatchFormat::Name => output::names(RESULT, [node_id(item)]),
        WatchFormat::Json => {
            serde_json::to_string(item).map_err(|e| Failure::Other(e.to_string()))? + "\n"
        }
        WatchFormat::Yaml => {
            let separator = if first { "" } else { "---\n" };
            separator.to_owned() + &output::document(item, output::Format::Yaml)?
        }
    })
}

pub async fn run(args: &WatchArgs) -> Result<(), Failure> {
    let namespace = args.namespaces.resolve()?;
    let all_namespaces = namespace.is_none();
    let options = FeedOptions {
        since: args.since,
        namespace,
        ..Default::default()
    };
    // One request first, as an interactive command makes it: a wrong URL, TLS mismatch,
    // token or namespace fails here at once. `410 gone` is the watch's to handle.
    let probe = FeedOptions {
        limit: Some(1),
        ..options.clone()
    };
    let probe = &probe;
    match args
        .connection
        .api()?
        .call(|client| async move { client.feed(probe).await })
        .await
    {
        Err(Failure::Refused(error)) if error.code() == Some(ProblemCode::Gone) => {}
        Err(failure) => return Err(failure),
        Ok(_) => {}
    }
    // Then without a deadline: a watch outlives restarts of the server.
    let client = args.connection.client_until(None)?;
    let wide = args.output == WatchFormat::Wide;
    if matches!(args.output, WatchFormat::Table | WatchFormat::Wide) && args.headers.shown() {
        let header = [
            "NAMESPACE",
            "REVISION",
            "TYPE",
            "WORKFLOW",
            "NODE",
            "PHASE",
            "STATE",
            "UID",
            "POD",
        ];
        output::emit(&row(header.map(Cell::from).to_vec(), all_namespaces, wide))?;
    }
    let mut first = true;
    let mut events = pin!(client.watch(options));
    while let Some(event) = events.next().await {
        match event? {
            WatchEvent::Change(item) => {
                output::emit(&change(&item, args.output, all_namespaces, first)?)?;
                first = false;
            }
            WatchEvent::Reset { revision } => eprintln!(
                "argo-results: the server no longer keeps the history before revision {revision}; \
                 changes before it were missed, watching on from there"
            ),
        }
    }
    Ok(())
}
