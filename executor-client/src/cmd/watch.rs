//! `argo-results watch`: follows the change feed, resuming after restarts of the server.

use std::pin::pin;

use argo_results_client::proto::FeedItem;
use argo_results_client::{FeedOptions, WatchEvent};
use clap::{Args, ValueEnum};
use futures_util::StreamExt;

use super::connect::Connection;
use super::failure::Failure;
use super::output::{self, Cell};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WatchFormat {
    Table,
    /// One change per line.
    Json,
}

/// Follow every change from a revision on, in commit order, until interrupted.
///
/// Examples:
///   argo-results watch
///   argo-results watch --namespace argo --since 1042 -o json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct WatchArgs {
    /// Start after this revision [default: 0, the oldest change kept].
    #[arg(long, default_value_t = 0)]
    since: i64,

    /// Only this namespace's changes.
    #[arg(long)]
    namespace: Option<String>,

    #[arg(short, long, value_enum, default_value = "table")]
    output: WatchFormat,

    #[command(flatten)]
    connection: Connection,
}

/// A streamed table cannot measure its columns first; these widths fit typical names.
const WIDTHS: [usize; 5] = [10, 9, 40, 36, 10];

fn row(cells: Vec<Cell>) -> String {
    output::stream_row(cells, &WIDTHS)
}

fn change_row(item: &FeedItem) -> String {
    match item {
        FeedItem::Upserted { revision, result } => row(vec![
            Cell::from(revision.to_string()),
            Cell::from("upserted"),
            Cell::from(format!("{}/{}", result.namespace, result.workflow)),
            Cell::from(result.node_id.clone()),
            output::state_cell(result.state),
        ]),
        FeedItem::Deleted {
            revision,
            namespace,
            workflow,
            node_id,
            ..
        } => row(vec![
            Cell::from(revision.to_string()),
            Cell::from("deleted"),
            Cell::from(format!("{namespace}/{workflow}")),
            Cell::from(node_id.clone()),
            Cell::from("-"),
        ]),
    }
}

pub async fn run(args: &WatchArgs) -> Result<(), Failure> {
    // Without a deadline: a watch outlives restarts of the server.
    let client = args.connection.client_until(None)?;
    let options = FeedOptions {
        since: args.since,
        namespace: args.namespace.clone(),
        ..Default::default()
    };
    if args.output == WatchFormat::Table {
        print!(
            "{}",
            row(["REVISION", "TYPE", "WORKFLOW", "NODE", "STATE"]
                .map(Cell::from)
                .to_vec())
        );
    }
    let mut events = pin!(client.watch(options));
    while let Some(event) = events.next().await {
        match event? {
            WatchEvent::Change(item) => match args.output {
                WatchFormat::Json => println!(
                    "{}",
                    serde_json::to_string(&item).map_err(|e| Failure::Other(e.to_string()))?
                ),
                WatchFormat::Table => print!("{}", change_row(&item)),
            },
            WatchEvent::Reset { revision } => eprintln!(
                "argo-results: the server no longer keeps the history before revision {revision}; \
                 changes before it were missed, watching on from there"
            ),
        }
    }
    Ok(())
}
