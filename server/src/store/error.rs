//! Why a store operation did not do what was asked: a refusal (the rules said no) or a
//! failure of the store itself, typed by [`FailureKind`].

use argo_results_proto::{Claim, ClaimState, NodeResult};

pub type StoreResult<T> = Result<T, StoreError>;

/// Why the store refused a request. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("no result for node {node_id}")]
    NotFound { node_id: String },
    #[error("node {node_id} is {state}; its result is frozen", state = current.state.as_str(), node_id = current.node_id)]
    Frozen { current: Box<NodeResult> },
    #[error("sequence {given} is lower than the stored sequence {stored}")]
    StaleSequence { given: i64, stored: i64 },
    #[error("sequence {given} was already stored with different content")]
    SequenceReused { given: i64 },
    #[error("node {node_id} is bound to pod {bound}; pod UID {given} may not write it")]
    PodMismatch {
        node_id: String,
        bound: String,
        given: String,
    },
    #[error(
        "node {node_id} expects no report from pod {pod}{expected}: pods may report only the \
         nodes the controller registered for them (--require-expectation)",
        expected = match expected { Some(name) => format!(" (it expects pod {name})"), None => String::new() }
    )]
    NotExpected {
        node_id: String,
        pod: String,
        expected: Option<String>,
    },
    #[error(
        "outputs merged with the stored ones would be {size} bytes; the limit is {limit} (--max-body-bytes)"
    )]
    OutputsTooLarge { size: usize, limit: usize },
    #[error("the result belongs to controller instance {stored:?}, not {given:?}")]
    InstanceMismatch { stored: String, given: String },
    #[error("workflow UID {workflow_uid} belongs to workflow {stored:?}, not {given:?}")]
    WorkflowMismatch {
        workflow_uid: String,
        stored: String,
        given: String,
    },
    #[error(
        "tick {} of cron workflow {} is {}{}", current.scheduled_time, current.cron_workflow,
        current.state.as_str(),
        match current.state {
            ClaimState::Claimed => format!(" for workflow {} until {}", current.workflow_name, current.lease_expires_at),
            _ => format!(" (workflow {})", current.workflow_name),
        }
    )]
    AlreadyClaimed { current: Box<Claim> },
    #[error(
        "tick {} of cron workflow {} was taken over after this claim's lease expired; its \
         holder now creates workflow {}: stop", current.scheduled_time, current.cron_workflow,
        current.workflow_name
    )]
    LeaseLost { current: Box<Claim> },
    #[error(
        "tick {} of cron workflow {} is already settled as {}; its outcome is final",
        current.scheduled_time, current.cron_workflow, current.state.as_str()
    )]
    AlreadySettled { current: Box<Claim> },
    #[error("tick {scheduled_time} of cron workflow {cron_workflow} was never claimed")]
    NotClaimed {
        cron_workflow: String,
        scheduled_time: String,
    },
    #[error("cron workflow UID {cron_workflow_uid} belongs to another cron workflow")]
    OtherCronWorkflow { cron_workflow_uid: String },
    #[error(
        "revision {since} is older than the retained history (pruned through {pruned}): \
         re-list what you keep and resume from revision {revision}"
    )]
    Gone {
        since: i64,
        pruned: i64,
        revision: i64,
    },
}

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
            StoreError::Stopped | StoreError::TimedOut => Some(FailureKind::Unavailable),
            StoreError::Random => Some(FailureKind::Random),
        }
    }
}
