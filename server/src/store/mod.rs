//! The result store: the one place that decides what a write does.
//!
//! Handlers validate and authorize; the store decides create / replay / stale / frozen / pod
//! mismatch / expectation reset / abandon / delete / claim / settle, each in one transaction. The
//! decisions are pure functions ([`rules`]) over the stored row, and one SQL implementation
//! ([`sql`]) runs them on Postgres and SQLite alike, so both backends behave identically.
//! Writes of many requests share a transaction ([`group_commit`]) without changing what
//! any of them decides.

mod bulk;
mod claim;
mod group_commit;
mod merge;
mod postgres;
mod row;
mod rules;
mod sql;
mod sqlite;

use std::future::Future;
use std::pin::Pin;

use argo_results_proto::{Claim, ClaimState, NodeResult, ResultState, Summary};
use tokio::sync::watch;

pub use group_commit::Batching;
pub use rules::ReportPolicy;
pub use sql::SqlStore;

/// How long a request may wait for a database connection before it is answered
/// `503 unavailable`: an outage or an exhausted pool is reported within 5 s, never queued.
const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
pub type StoreResult<T> = Result<T, StoreError>;

/// Identifies a result: one node of one incarnation of a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultKey {
    pub namespace: String,
    /// The workflow's name, as in the URL; stored beside the UID.
    pub workflow: String,
    pub workflow_uid: String,
    pub node_id: String,
}

/// A validated report from a wait container. `None` fields keep the stored value.
#[derive(Debug, Clone)]
pub struct Report {
    pub pod_name: String,
    pub pod_uid: String,
    pub instance_id: Option<String>,
    pub sequence: Option<i64>,
    pub is_final: bool,
    /// The exact JSON text of `outputs`.
    pub outputs: Option<String>,
    pub progress: Option<String>,
    pub phase: Option<String>,
    pub message: Option<String>,
}

/// A controller's registration of a pod whose result it awaits.
#[derive(Debug, Clone)]
pub struct Expectation {
    pub pod_name: String,
    pub pod_uid: Option<String>,
}

/// A validated cron run claim.
#[derive(Debug, Clone)]
pub struct NewClaim {
    pub namespace: String,
    pub cron_workflow: String,
    pub cron_workflow_uid: String,
    pub scheduled_millis: i64,
    pub workflow_name: String,
    pub lease_millis: i64,
}

/// How the holder settles a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    Submitted { workflow_uid: String },
    Skipped { reason: String },
}

/// A validated settle of a claimed tick by the holder of `claim_id`.
#[derive(Debug, Clone)]
pub struct Settlement {
    pub namespace: String,
    pub cron_workflow: String,
    pub cron_workflow_uid: String,
    pub scheduled_millis: i64,
    pub claim_id: String,
    pub outcome: Settled,
}

/// One page of a cron workflow's claims, newest scheduled time first.
#[derive(Debug, Clone)]
pub struct ClaimQuery {
    pub namespace: String,
    pub cron_workflow: String,
    /// `None`: every incarnation of the name.
    pub cron_workflow_uid: Option<String>,
    /// Start after this claim (scheduled time, cron workflow UID).
    pub after: Option<(i64, String)>,
    pub limit: u32,
}

#[derive(Debug)]
pub struct ClaimPage {
    pub items: Vec<Claim>,
    /// The newest settled tick of the query, in Unix milliseconds.
    pub last_scheduled: Option<i64>,
    /// Where the next page starts, when more items follow.
    pub next: Option<(i64, String)>,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The row did not exist before.
    Created,
    /// The row changed under a new revision.
    Updated,
    /// Nothing changed: an idempotent replay.
    Unchanged,
}

/// The stored result after a write, and what the write did.
#[derive(Debug)]
pub struct Written {
    pub result: NodeResult,
    pub outcome: Outcome,
}

/// One page of a workflow's results.
#[derive(Debug, Clone)]
pub struct ListQuery {
    pub namespace: String,
    pub workflow: String,
    /// `None`: the newest incarnation of the workflow name.
    pub workflow_uid: Option<String>,
    pub state: Option<ResultState>,
    /// Start after this node ID.
    pub after: Option<String>,
    pub limit: u32,
}

#[derive(Debug)]
pub struct ResultPage {
    pub items: Vec<NodeResult>,
    pub revision: i64,
    pub summary: Summary,
    /// The incarnation listed, when the workflow has results.
    pub workflow_uid: Option<String>,
    /// More items follow the last one.
    pub more: bool,
}

/// Changes after a revision, each already serialized as the feed serves it.
#[derive(Debug)]
pub struct FeedChunk {
    pub items: Vec<String>,
    pub revision: i64,
}

/// The times before which retention removes each kind of row (Unix milliseconds).
#[derive(Debug, Clone, Copy)]
pub struct PruneBefore {
    pub changes: i64,
    pub results: i64,
    pub claims: i64,
}

/// What one retention pass removed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pruned {
    pub results: u64,
    pub changes: u64,
    pub claims: u64,
}

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
    Database(#[from] sqlx::Error),
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

impl StoreError {
    /// The kind of a failure of the store itself, for `argo_results_store_errors_total`;
    /// `None` for a refusal, which is the store doing its job.
    pub fn kind(&self) -> Option<&'static str> {
        match self {
            StoreError::Refused(_) => None,
            StoreError::Database(
                sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_),
            ) => Some("unavailable"),
            // Postgres shutting down or restarting (57P0x), or a broken connection (08).
            StoreError::Database(sqlx::Error::Database(error))
                if error
                    .code()
                    .is_some_and(|code| code.starts_with("57P0") || code.starts_with("08")) =>
            {
                Some("unavailable")
            }
            // A full disk (SQLITE_FULL, Postgres' disk_full) refuses every write until space
            // is freed, as an outage does: 503, which clients retry, not 500, which they don't.
            StoreError::Database(sqlx::Error::Database(error))
                if matches!(error.code().as_deref(), Some("13" | "53100")) =>
            {
                Some("unavailable")
            }
            StoreError::Database(_) => Some("database"),
            StoreError::Migrate(_) => Some("migrate"),
            StoreError::Corrupt(_) => Some("corrupt"),
            StoreError::UnsupportedUrl(_) => Some("config"),
            StoreError::Shared(error) => error.kind(),
            StoreError::Stopped | StoreError::TimedOut => Some("unavailable"),
            StoreError::Runtime(_) => Some("config"),
            StoreError::Random => Some("random"),
        }
    }
}

/// Committed state of results and cron claims.
pub trait Store: std::fmt::Debug + Send + Sync + 'static {
    /// Applies a wait container's report (API section 2).
    fn report(&self, key: ResultKey, report: Report) -> BoxFuture<'_, StoreResult<Written>>;
    /// Registers or resets an expected result (API section 3).
    fn expect(
        &self,
        key: ResultKey,
        expectation: Expectation,
    ) -> BoxFuture<'_, StoreResult<Written>>;
    /// Marks a result that will never complete as abandoned.
    fn abandon(&self, key: ResultKey, reason: String) -> BoxFuture<'_, StoreResult<Written>>;
    /// Deletes every result of one workflow incarnation, leaving tombstones in the feed.
    fn delete_workflow(
        &self,
        namespace: String,
        workflow: String,
        workflow_uid: String,
    ) -> BoxFuture<'_, StoreResult<u64>>;
    /// One result; the newest incarnation of the workflow name when `workflow_uid` is `None`.
    fn get(
        &self,
        namespace: String,
        workflow: String,
        node_id: String,
        workflow_uid: Option<String>,
    ) -> BoxFuture<'_, StoreResult<Option<NodeResult>>>;
    fn list(&self, query: ListQuery) -> BoxFuture<'_, StoreResult<ResultPage>>;
    /// Changes with a revision above `since`, oldest first.
    fn feed(
        &self,
        since: i64,
        namespace: Option<String>,
        limit: u32,
    ) -> BoxFuture<'_, StoreResult<FeedChunk>>;
    /// Claims one tick of a cron workflow for a new holder, or takes it over from one whose
    /// lease expired unsettled; one holder at a time, on any replica.
    fn claim(&self, claim: NewClaim) -> BoxFuture<'_, StoreResult<Claim>>;
    /// Records what the holder of a claim did with its tick.
    fn settle(&self, settlement: Settlement) -> BoxFuture<'_, StoreResult<Claim>>;
    fn claims(&self, query: ClaimQuery) -> BoxFuture<'_, StoreResult<ClaimPage>>;
    /// Removes, in batches, feed history recorded before `before.changes`, results
    /// unchanged since `before.results`, and claims taken before `before.claims` that are
    /// settled and not their cron workflow's newest settled one, or whose lease expired
    /// unsettled before it (Unix milliseconds).
    fn prune(&self, before: PruneBefore) -> BoxFuture<'_, StoreResult<Pruned>>;
    /// How many results are `expected` and `reporting` (not finished) across the store.
    fn pending(&self) -> BoxFuture<'_, StoreResult<(u64, u64)>>;
    /// The newest committed revision, updated after every commit of any replica.
    fn revisions(&self) -> watch::Receiver<i64>;
    /// Checks that the database answers.
    fn ping(&self) -> BoxFuture<'_, StoreResult<()>>;
}
