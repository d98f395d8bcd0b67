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
    /// The URL, its password redacted.
    #[error("unsupported database URL {0:?}: use postgres://... or sqlite://PATH")]
    UnsupportedUrl(String),
    #[error(
        "the database at {target} did not take a connection within {}s (--database-wait): {last}",
        waited.as_secs()
    )]
    Unreachable {
        target: String,
        waited: std::time::Duration,
        last: String,
    },
    /// The SQLite file could not be created or opened.
    #[error("SQLite file {path}: {detail}")]
    File { path: String, detail: String },
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
    /// The SQLite file is not the one the server opened: deleted, moved or replaced.
    #[error("the SQLite file {0} was deleted or replaced under the server")]
    FileMoved(String),
    #[error("cannot start the store's writer: {0}")]
    Runtime(std::io::Error),
    #[error("the system's random source failed")]
    Random,
    /// A page's first item found no room in the memory of answers: the server is busy
    /// sending others, not failing.
    #[error("the answers being sent fill their memory")]
    NoMemory,
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
    /// Every kind, so that each is exported at zero from the start.
    pub const ALL: [FailureKind; 6] = [
        FailureKind::Unavailable,
        FailureKind::Database,
        FailureKind::Migrate,
        FailureKind::Corrupt,
        FailureKind::Config,
        FailureKind::Random,
    ];

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
            StoreError::Refused(_) | StoreError::NoMemory => None,
            StoreError::Database(
                sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_),
            ) => Some(FailureKind::Unavailable),
            StoreError::Database(sqlx::Error::Database(error)) if gone_for_now(&**error) => {
                Some(FailureKind::Unavailable)
            }
            StoreError::Database(_) => Some(FailureKind::Database),
            StoreError::Migrate(_) => Some(FailureKind::Migrate),
            StoreError::Corrupt(_) => Some(FailureKind::Corrupt),
            StoreError::UnsupportedUrl(_) | StoreError::Runtime(_) | StoreError::File { .. } => {
                Some(FailureKind::Config)
            }
            StoreError::Unreachable { .. } => Some(FailureKind::Unavailable),
            StoreError::Shared(error) => error.failure(),
            StoreError::Stopped
            | StoreError::TimedOut
            | StoreError::RolledBack { .. }
            | StoreError::FileMoved(_) => Some(FailureKind::Unavailable),
            StoreError::Random => Some(FailureKind::Random),
        }
    }
}

/// Whether the database said it cannot serve for now, as an outage does, so that callers
/// hear `503` and retry rather than `500`, which they don't: Postgres shutting down or
/// restarting (57P0x), a broken connection (08xxx), a full disk (53100), the database
/// dropped (3D000); SQLite's I/O error, full disk or file it cannot open (10, 13, 14 and
/// their extended codes), or a file deleted or moved under the server
/// (SQLITE_READONLY_DBMOVED, 1032).
fn gone_for_now(error: &dyn sqlx::error::DatabaseError) -> bool {
    let Some(code) = error.code() else {
        return false;
    };
    match code.parse::<i32>() {
        Ok(sqlite) => matches!(sqlite & 0xff, 10 | 13 | 14) || sqlite == 1032,
        Err(_) => {
            code.starts_with("57P0")
                || code.starts_with("08")
                || matches!(&*code, "53100" | "3D000")
        }
    }
}
