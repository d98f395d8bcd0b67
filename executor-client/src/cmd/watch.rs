//! `argo-results watch`: follows the change feed, resuming after restarts of the server.

use std::pin::pin;

use argo_results_client::proto::{FeedItem, ProblemCode};
use argo_results_client::{FeedOptions, WatchEvent};
use clap::{Args, ValueEnum};
use futures_util::StreamExt;

use super::connect::{Connection, NamespacesArg};
use super::failure::Failure;
use super::output::{self, Cell};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WatchFormat {
    Table,
    /// One change per line.
    Json,
    /// One YAML document per change, `---` between them, as kubectl's watch.
    Yaml,
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
    connection: Connection,
}

/// A streamed table cannot measure its columns first; these widths fit typical names
/// (NAMESPACE only with -A).
const WIDTHS: [usize; 7] = [16, 10, 9, 30, 36, 9, 10];

/// A row of the streamed table, its NAMESPACE cell dropped unless every namespace shows.
fn row(mut cells: Vec<Cell>, all_namespaces: bool) -> String {
    if all_namespaces {
        output::stream_row(cells, &WIDTHS)
    } else {
        cells.remove(0);
        output::stream_row(cells, &WIDTHS[1..])
    }
}

fn change_row(item: &FeedItem, all_namespaces: bool) -> String {
    let cells = match item {
        FeedItem::Upserted { revision, result } => vec![
            Cell::from(result.namespace.clone()),
            Cell::from(revision.to_string()),
            Cell::from("upserted"),
            Cell::from(result.workflow.clone()),
            Cell::from(result.node_id.clone()),
            output::phase_cell(output::phase(result)),
            output::state_cell(result.state),
        ],
        FeedItem::Deleted {
            revision,
            namespace,
            workflow,
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
        ],
    };
    row(cells, all_namespaces)
}

/// One change as the output format prints it.
fn change(
    item: &FeedItem,
    format: WatchFormat,
    all_namespaces: bool,
    first: bool,
) -> Result<String, Failure> {
    Ok(match format {
        WatchFormat::Table => change_row(item, all_namespaces),
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
    if args.output == WatchFormat::Table {
        let header = [
            "NAMESPACE",
            "REVISION",
            "TYPE",
            "WORKFLOW",
            "NODE",
            "PHASE",
            "STATE",
        ];
        output::emit(&row(header.map(Cell::from).to_vec(), all_namespaces))?;
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
