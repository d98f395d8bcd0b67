//! Why a store operation did not do what was asked: a refusal (the rules said no) or a
//! failure of the store itself, typed by [`FailureKind`].

pub use argo_results_rules::Refusal;
use argo_results_rules::{Corrupt, Rejected};

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("database: {0}")]
    Database(sqlx::Error),
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("unsupported database URL {0:?}: use postgres://... or sqlite://PATH")]
    UnsupportedUrl(String),
    /// The failure of a transaction that several writes shared.
    #[error(transparent)]
    Shared(std::sync::Arc<StoreError>),
    #[error("the store's writer has stopped")]
    Stopped,
    /// The head is behind a revision that had committed: the database was restored or
    /// replaced under the server.
    #[error("the database's head is revision {head}, behind revision {seen} that had committed")]
    RolledBack { head: i64, seen: i64 },
    #[error("the database did not answer in time")]
    TimedOut,
    #[error("cannot start the store's writer: {0}")]
    Runtime(std::io::Error),
    #[error("the system's random source failed")]
    Random,
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match error {
            // A stored value that does not decode (an unknown state) is bad data, not an
            // outage.
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
                StoreError::Corrupt(error.to_string())
            }
            error => StoreError::Database(error),
        }
    }
}

impl From<Corrupt> for StoreError {
    fn from(Corrupt(detail): Corrupt) -> Self {
        StoreError::Corrupt(detail)
    }
}

impl From<Rejected> for StoreError {
    fn from(rejected: Rejected) -> Self {
        match rejected {
            Rejected::Refused(refusal) => StoreError::Refused(refusal),
            Rejected::Corrupt(corrupt) => corrupt.into(),
        }
    }
}

/// What kind of failure of the store itself an error is: the label of
/// `argo_results_store_errors_total`, and what decides whether a caller may retry (503).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The database is down, restarting, unreachable, full or too slow: retry later.
    Unavailable,
    Database,
    Migrate,
    Corrupt,
    Config,
    Random,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Unavailable => "unavailable",
            FailureKind::Database => "database",
            FailureKind::Migrate => "migrate",
            FailureKind::Corrupt => "corrupt",
            FailureKind::Config => "config",
            FailureKind::Random => "random",
        }
    }
}

impl StoreError {
    /// The kind of a failure of the store itself; `None` for a refusal, which is the store
    /// doing its job.
    pub fn failure(&self) -> Option<FailureKind> {
        match self {
            StoreError::Refused(_) => None,
            StoreError::Database(
                sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_),
            ) => Some(FailureKind::Unavailable),
            // Postgres shutting down or restarting (57P0x), or a broken connection (08).
            StoreError::Database(sqlx::Error::Database(error))
                if error
                    .code()
                    .is_some_and(|code| code.starts_with("57P0") || code.starts_with("08")) =>
            {
                Some(FailureKind::Unavailable)
            }
            // A full disk (SQLITE_FULL, Postgres' disk_full) refuses every write until space
            // is freed, as an outage does: 503, which clients retry, not 500, which they don't.
            StoreError::Database(sqlx::Error::Database(error))
                if matches!(error.code().as_deref(), Some("13" | "53100")) =>
            {
                Some(FailureKind::Unavailable)
            }
            StoreError::Database(_) => Some(FailureKind::Database),
            StoreError::Migrate(_) => Some(FailureKind::Migrate),
            StoreError::Corrupt(_) => Some(FailureKind::Corrupt),
            StoreError::UnsupportedUrl(_) | StoreError::Runtime(_) => Some(FailureKind::Config),
            StoreError::Shared(error) => error.failure(),
            StoreError::Stopped | StoreError::TimedOut | StoreError::RolledBack { .. } => {
                Some(FailureKind::Unavailable)
            }
            StoreError::Random => Some(FailureKind::Random),
        }
    }
}
