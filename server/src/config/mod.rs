//! Command-line flags; each also reads `ARGO_RESULTS_<FLAG>` (`DATABASE_URL` for the store).
//!
//! They are grouped by the part of the server they configure, one file each, and each
//! group turns into what its module takes. `--help` lists them by `display_order`, the
//! order they had before they were grouped: a new flag takes a free number where it
//! belongs (a test compares `--help` with `server/tests/help.txt`).

mod admission;
mod auth;
mod listen;
mod retention;
mod store;
mod values;

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

pub use admission::AdmissionFlags;
pub use auth::{AuthError, AuthFlags, AuthMode};
pub use listen::ListenFlags;
pub use retention::RetentionFlags;
pub use store::StoreFlags;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// What the process's exit status says, in `--help`.
const EXIT_CODES: &str = "\
Exit status:
  0  stopped by SIGTERM or SIGINT after finishing in-flight requests
  1  could not start: the message says why (flags, keys, TLS files, address in use, ...)
  2  the flags are wrong (usage)
  3  the database did not take a connection within --database-wait
  4  the database's migrations failed (the role may not create in the schema, a schema
     changed by hand, a recorded migration modified)";

/// Stores Argo Workflows' step results in Postgres or SQLite and serves them to the
/// controller, the wait containers and admins.
///
/// With no flags: SQLite `argo-results.db` in the data directory, 127.0.0.1:8080, dev auth.
///
/// Example (production):
///   argo-results-server --database-url postgres://argo-results@db/argo-results \
///     --listen 0.0.0.0:8080 --kube-jwks \
///     --controller system:serviceaccount:argo:argo \
///     --reader system:serviceaccount:argo:argo-results-admin
#[derive(Debug, Clone, Parser)]
#[command(name = "argo-results-server", version, verbatim_doc_comment, after_help = EXIT_CODES)]
pub struct Config {
    #[command(flatten)]
    pub store: StoreFlags,

    #[command(flatten)]
    pub listen: ListenFlags,

    /// Where the embedded default keeps its SQLite file and dev signing key.
    #[arg(
        long,
        env = "ARGO_RESULTS_DATA_DIR",
        default_value = ".",
        display_order = 50
    )]
    pub data_dir: PathBuf,

    #[command(flatten)]
    pub auth: AuthFlags,

    #[command(flatten)]
    pub retention: RetentionFlags,

    #[command(flatten)]
    pub admission: AdmissionFlags,

    /// Print the OpenAPI document of this server's API and exit.
    #[arg(long, display_order = 420)]
    pub openapi: bool,

    /// Print, as ClusterRoles, the RBAC that --rbac checks, and exit.
    #[arg(long, display_order = 430)]
    pub print_rbac_rules: bool,

    /// Log lines as text or as one JSON object per line (then the lines printed at start,
    /// on stdout, are JSON objects too).
    #[arg(
        long,
        env = "ARGO_RESULTS_LOG_FORMAT",
        value_enum,
        default_value = "text",
        display_order = 460
    )]
    pub log_format: LogFormat,
}

impl Config {
    pub fn database_url(&self) -> String {
        self.store.url(&self.data_dir)
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Config;

    /// Two flags with one place would be listed by name, not where they belong.
    #[test]
    fn every_flag_has_a_place_of_its_own_in_help() {
        let command = Config::command();
        let mut places: Vec<(usize, &str)> = command
            .get_arguments()
            .map(|arg| (arg.get_display_order(), arg.get_id().as_str()))
            .collect();
        places.sort_unstable();
        for pair in places.windows(2) {
            assert_ne!(
                pair[0].0, pair[1].0,
                "{} and {} share a place",
                pair[0].1, pair[1].1
            );
        }
        // Built in, after every flag.
        assert!(places.iter().all(|(place, _)| *place < 999), "{places:?}");
    }
}
