//! Retention: feed history older than `--feed-retention`, results unchanged for
//! `--result-retention` and cron claims older than `--claim-retention` are removed in the
//! background, a batch per transaction. Every replica runs it; the store makes concurrent
//! passes safe. Each pass also refreshes `argo_results_results_pending`.

use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;
use crate::store::{PruneBefore, Store};
use argo_results_rules::clock::now_millis;

#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub feed: Duration,
    pub results: Duration,
    pub claims: Duration,
    /// Time between passes.
    pub every: Duration,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

pub fn spawn(retention: Retention, store: Arc<Store>, metrics: Arc<Metrics>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(retention.every).await;
            let now = now_millis();
            let before = |kept: Duration| now.saturating_sub(millis(kept));
            let before = PruneBefore {
                changes: before(retention.feed),
                results: before(retention.results),
                claims: before(retention.claims),
            };
            match store.prune(before).await {
                Ok(pruned) => metrics.retained(pruned.results, pruned.changes, pruned.claims),
                Err(error) => tracing::warn!(%error, "retention pass failed; trying again later"),
            }
            // The same pass counts the results still awaited, for the pending gauge.
            match store.pending().await {
                Ok((expected, reporting)) => metrics.pending(expected, reporting),
                Err(error) => tracing::warn!(%error, "could not count pending results"),
            }
        }
    });
}
