//! The store's flags: which database, how long to wait for it, its pool and group commit.

use std::path::Path;
use std::time::Duration;

use clap::Args;

use super::values::{HOUR, SECOND, ZERO, duration_between};
use crate::store::{Batching, Opening, ReportPolicy};

#[derive(Debug, Clone, Args)]
pub struct StoreFlags {
    /// `postgres://...` or `sqlite://PATH` [default: sqlite://<data-dir>/argo-results.db]
    #[arg(long, env = "DATABASE_URL", display_order = 10)]
    pub database_url: Option<String>,

    /// How long to wait at start for a Postgres database that does not take connections
    /// yet (down, starting, not yet in DNS); each attempt is logged. Probes answer
    /// meanwhile, /readyz 503.
    #[arg(long, env = "ARGO_RESULTS_DATABASE_WAIT", default_value = "5m", display_order = 20,
          value_parser = duration_between(ZERO, 24 * HOUR))]
    pub database_wait: Duration,

    /// Give the store a new epoch at start, so that every feed reader lists again instead
    /// of reading on (`410 gone`): start once with it after restoring the database from a
    /// backup. On Postgres a restore into another cluster, onto another timeline or by
    /// pg_restore is noticed without it.
    #[arg(long, env = "ARGO_RESULTS_NEW_EPOCH", display_order = 300)]
    pub new_epoch: bool,

    /// Database connections in the pool.
    #[arg(long, env = "ARGO_RESULTS_MAX_CONNECTIONS", default_value_t = 10, display_order = 390,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_connections: u32,

    /// Writes committed together in one transaction at most (group commit); 1 commits
    /// each write alone.
    #[arg(long, env = "ARGO_RESULTS_BATCH_MAX", default_value_t = 128, display_order = 400,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub batch_max: u16,

    /// How long a write that finds the writer idle waits for others to join its
    /// transaction (at most 1s), only when the write before it came less than that long
    /// before it (a lone write goes at once); writes queued behind a transaction go at
    /// once.
    #[arg(long, env = "ARGO_RESULTS_BATCH_WAIT", default_value = "2ms", display_order = 410,
          value_parser = duration_between(ZERO, SECOND))]
    pub batch_wait: Duration,
}

impl StoreFlags {
    /// The database's URL: the one given, else the embedded default's SQLite file in
    /// `data_dir`.
    pub fn url(&self, data_dir: &Path) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("argo-results.db").display()))
    }

    pub fn opening(&self, policy: ReportPolicy) -> Opening {
        Opening {
            max_connections: self.max_connections,
            wait: self.database_wait,
            batching: Batching {
                max: usize::from(self.batch_max),
                wait: self.batch_wait,
            },
            policy,
            new_epoch: self.new_epoch,
        }
    }
}
