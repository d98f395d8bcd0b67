//! Reads: a result, a page and its summary (in one snapshot, `BEGIN_READ`), a page of the
//! workflows with what their results add up to, the feed, the head and the count of
//! results not finished; and what the requests' pool holds.
//!
//! Compiled once per database (see [`Dialect`]).

use futures_util::TryStreamExt;

use argo_results_proto::{Ended, NodeResult, ResultState, Summary, WorkflowSummary};
use argo_results_rules::Row;
use argo_results_rules::clock::format_millis;
use argo_results_rules::feed::{self, FeedBounds};

use super::super::columns::{self, result_columns};
use super::super::dialect::{ConnectionOf, Dialect};
use super::super::error::{StoreError, StoreResult};
use super::super::model::{FeedChunk, ListQuery, ResultPage, WorkflowPage, WorkflowQuery};
use super::super::page::{Filling, PageMemory, summarize};
use super::This;

/// The head: the newest committed revision.
pub(super) const READ_HEAD: &str = "SELECT revision FROM store_state WHERE id = 1";
/// The head and the epoch its revisions belong to.
const READ_HEAD_EPOCH: &str = "SELECT revision, epoch FROM store_state WHERE id = 1";
const READ_PRUNED: &str = "SELECT pruned_revision FROM store_state WHERE id = 1";
pub(super) const SELECT_BY_KEY: &str = concat!(
    "SELECT ",
    result_columns!(),
    " FROM results WHERE namespace = $1 AND workflow_uid = $2 AND node_id = $3"
);
/// The newest incarnation of a workflow name: the UID whose first result is the newest.
const NEWEST_UID: &str = "SELECT workflow_uid FROM results WHERE namespace = $1 \
     AND workflow = $2 ORDER BY created_revision DESC LIMIT 1";
const SELECT_PAGE: &str = concat!(
    "SELECT ",
    result_columns!(),
    " FROM results WHERE namespace = $1 AND workflow_uid = $2 AND workflow = $3 \
     AND node_id > $4 AND ($5 = '' OR state = $5) ORDER BY node_id LIMIT $6"
);
const SUMMARY: &str = "SELECT state, COUNT(*) FROM results \
     WHERE namespace = $1 AND workflow_uid = $2 AND workflow = $3 GROUP BY state";
const SELECT_CHANGES: &str = "SELECT revision, item FROM changes \
     WHERE revision > $1 AND revision <= $2 AND ($3 = '' OR namespace = $3) \
     ORDER BY revision LIMIT $4";
const PENDING: &str = "SELECT state, COUNT(*) FROM results \
     WHERE state IN ('expected', 'reporting') GROUP BY state";

async fn newest_uid(
    connection: &mut ConnectionOf<This>,
    namespace: &str,
    workflow: &str,
) -> StoreResult<Option<String>> {
    Ok(sqlx::query_scalar(NEWEST_UID)
        .bind(namespace)
        .bind(workflow)
        .fetch_optional(connection)
        .await?)
}

impl This {
    /// The requests' pool: connections open, of those idle, and the most it may open.
    pub(in crate::store) fn pool_usage(&self) -> (u32, usize, u32) {
        let pool = &self.pool;
        (
            pool.size(),
            pool.num_idle(),
            pool.options().get_max_connections(),
        )
    }

    /// One result; of the newest incarnation of the workflow name when `workflow_uid` is
    /// `None`.
    pub(in crate::store) async fn get(
        &self,
        namespace: &str,
        workflow: &str,
        node_id: &str,
        workflow_uid: Option<&str>,
    ) -> StoreResult<Option<NodeResult>> {
        let mut connection = self.pool.acquire().await?;
        let uid = match workflow_uid {
            Some(uid) => uid.to_owned(),
            None => match newest_uid(&mut connection, namespace, workflow).await? {
                Some(uid) => uid,
                None => return Ok(None),
            },
        };
        let row = sqlx::query(SELECT_BY_KEY)
            .bind(namespace)
            .bind(uid)
            .bind(node_id)
            .try_map(|row| columns::result(&row))
            .fetch_optional(&mut *connection)
            .await?;
        // A UID names one incarnation of one workflow name.
        Ok(row
            .filter(|row| row.workflow == workflow)
            .map(Row::into_api)
            .transpose()?)
    }

    /// A page and its summary, in one snapshot.
    pub(in crate::store) async fn list(
        &self,
        query: ListQuery,
        memory: &dyn PageMemory,
    ) -> StoreResult<ResultPage> {
        let mut tx = self.pool.begin_with(This::BEGIN_READ).await?;
        let (revision, epoch): (i64, String) =
            sqlx::query_as(READ_HEAD_EPOCH).fetch_one(&mut *tx).await?;
        let uid = match query.workflow_uid {
            Some(uid) => Some(uid),
            None => newest_uid(&mut tx, &query.namespace, &query.workflow).await?,
        };
        let mut page = ResultPage {
            items: Vec::new(),
            last_node_id: None,
            revision,
            epoch,
            summary: Summary::default(),
            workflow_uid: uid.clone(),
            more: false,
        };
        let Some(uid) = uid else {
            tx.rollback().await?;
            return Ok(page);
        };
        let counts = sqlx::query_as(SUMMARY)
            .bind(&query.namespace)
            .bind(&uid)
            .bind(&query.workflow)
            .fetch_all(&mut *tx)
            .await?;
        page.summary = summarize(counts)?;
        let state = query.state.map(ResultState::as_str).unwrap_or_default();
        let mut filling = Filling::new(query.limit, memory);
        let mut after = query.after.unwrap_or_default();
        while let Some(rows) = filling.next_round() {
            let mut rows = sqlx::query(SELECT_PAGE)
                .bind(&query.namespace)
                .bind(&uid)
                .bind(&query.workflow)
                .bind(after.clone())
                .bind(state)
                .bind(rows as i64)
                .try_map(|row| columns::result(&row))
                .fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                let item = row.into_api()?;
                let text = serde_json::to_string(&item)
                    .map_err(|e| StoreError::Corrupt(format!("result {}: {e}", item.node_id)))?;
                let size = text.len();
                if !filling.offer(text, size)? {
                    break;
                }
                after = item.node_id;
            }
        }
        tx.rollback().await?;
        page.last_node_id = (!filling.items.is_empty()).then_some(after);
        page.more = filling.more;
        page.items = filling.items;
        Ok(page)
    }

    /// A page of the workflows that have results, in one snapshot.
    pub(in crate::store) async fn workflows(
        &self,
        query: WorkflowQuery,
    ) -> StoreResult<WorkflowPage> {
        let mut tx = self.pool.begin_with(This::BEGIN_READ).await?;
        let (revision, epoch): (i64, String) =
            sqlx::query_as(READ_HEAD_EPOCH).fetch_one(&mut *tx).await?;
        let (after_namespace, after_uid) = query.after.unwrap_or_default();
        let sql = workflows_sql(This::EXIT_CODE);
        let rows: Vec<WorkflowRow> = sqlx::query_as(&sql)
            .bind(query.namespace.unwrap_or_default())
            .bind(after_namespace)
            .bind(after_uid)
            // One more than asked: whether more follow.
            .bind(i64::from(query.limit) + 1)
            .fetch_all(&mut *tx)
            .await?;
        tx.rollback().await?;
        let more = rows.len() > query.limit as usize;
        let items: Vec<WorkflowSummary> = rows
            .into_iter()
            .take(query.limit as usize)
            .map(workflow_summary)
            .collect::<StoreResult<_>>()?;
        let next = more
            .then(|| items.last())
            .flatten()
            .map(|last| (last.namespace.clone(), last.workflow_uid.clone()));
        Ok(WorkflowPage {
            items,
            revision,
            epoch,
            next,
        })
    }

    /// Changes after `since` in revision order, up to the committed head; `410 gone`
    /// unless `since` is in the retained history of the store's epoch (`epoch`, when the
    /// reader says).
    pub(in crate::store) async fn feed(
        &self,
        since: i64,
        epoch: Option<&str>,
        namespace: &str,
        limit: u32,
        memory: &dyn PageMemory,
    ) -> StoreResult<FeedChunk> {
        // The head is read first: every revision up to it has committed, so the changes
        // read next hold all of them, and the head is a safe place to resume from.
        let (head, current): (i64, String) = sqlx::query_as(READ_HEAD_EPOCH)
            .fetch_one(&self.pool)
            .await?;
        let mut filling = Filling::new(limit, memory);
        let mut last = since;
        while let Some(rows) = filling.next_round() {
            let mut rows = sqlx::query_as::<_, (i64, String)>(SELECT_CHANGES)
                .bind(last)
                .bind(head)
                .bind(namespace)
                .bind(rows as i64)
                .fetch(&self.pool);
            while let Some((revision, item)) = rows.try_next().await? {
                let size = item.len();
                if !filling.offer(item, size)? {
                    break;
                }
                last = revision;
            }
        }
        // Read after the changes: history pruned before that read, or during it, shows.
        let pruned: i64 = sqlx::query_scalar(READ_PRUNED)
            .fetch_one(&self.pool)
            .await?;
        let bounds = FeedBounds {
            head,
            epoch: current,
            last,
            more: filling.more,
            pruned,
        };
        let revision = feed::next_since(since, epoch, &bounds)?;
        Ok(FeedChunk {
            items: filling.items,
            revision,
            epoch: bounds.epoch,
        })
    }

    /// How many results are `expected` and `reporting` (not finished).
    pub(in crate::store) async fn pending(&self) -> StoreResult<(u64, u64)> {
        let counts = sqlx::query_as(PENDING).fetch_all(&self.pool).await?;
        let summary = summarize(counts)?;
        Ok((summary.expected, summary.reporting))
    }

    /// The newest committed revision.
    pub(in crate::store) async fn head(&self) -> StoreResult<i64> {
        self.in_place()?;
        Ok(sqlx::query_scalar(READ_HEAD).fetch_one(&self.pool).await?)
    }
}

/// The workflows that have results, each incarnation's counts by state and by how its
/// ended results ended (as [`Ended`] says), after ($2, $3) by (namespace, workflow UID),
/// in namespace $1 ('' for all), $4 at most. `exit_code` is the dialect's `EXIT_CODE`;
/// `outputs` is read only for completed results without a phase.
fn workflows_sql(exit_code: &str) -> String {
    let ended = format!(
        "CASE WHEN state = 'abandoned' THEN 'Error' \
         WHEN state <> 'completed' THEN NULL \
         WHEN phase IN ('Succeeded', 'Failed', 'Error') THEN phase \
         WHEN {exit_code} = '0' THEN 'Succeeded' \
         WHEN {exit_code} IS NOT NULL THEN 'Failed' \
         ELSE 'Error' END"
    );
    let count = |column: &str, value: &str| {
        format!("SUM(CASE WHEN {column} = '{value}' THEN 1 ELSE 0 END)")
    };
    format!(
        "SELECT namespace, workflow_uid, MIN(workflow), {}, {}, {}, {}, {}, {}, {}, \
         MIN(created_at), MAX(updated_at), MAX(revision) \
         FROM (SELECT namespace, workflow_uid, workflow, state, created_at, updated_at, \
         revision, {ended} AS ended FROM results WHERE ($1 = '' OR namespace = $1) \
         AND (namespace > $2 OR (namespace = $2 AND workflow_uid > $3))) AS r \
         GROUP BY namespace, workflow_uid ORDER BY namespace, workflow_uid LIMIT $4",
        count("state", "expected"),
        count("state", "reporting"),
        count("state", "completed"),
        count("state", "abandoned"),
        count("ended", "Succeeded"),
        count("ended", "Failed"),
        count("ended", "Error"),
    )
}

/// A row of [`workflows_sql`].
type WorkflowRow = (
    String,
    String,
    String,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
);

fn workflow_summary(row: WorkflowRow) -> StoreResult<WorkflowSummary> {
    let (namespace, workflow_uid, workflow, expected, reporting, completed, abandoned) =
        (row.0, row.1, row.2, row.3, row.4, row.5, row.6);
    let count = |n: i64| {
        u64::try_from(n).map_err(|_| StoreError::Corrupt(format!("a count of {n} results")))
    };
    Ok(WorkflowSummary {
        summary: Summary {
            expected: count(expected)?,
            reporting: count(reporting)?,
            completed: count(completed)?,
            abandoned: count(abandoned)?,
        },
        ended: Ended {
            succeeded: count(row.7)?,
            failed: count(row.8)?,
            error: count(row.9)?,
        },
        created_at: format_millis(row.10),
        updated_at: format_millis(row.11),
        revision: row.12,
        namespace,
        workflow,
        workflow_uid,
    })
}
