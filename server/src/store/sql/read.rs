//! Reads: a page and its summary share one snapshot (`BEGIN_READ`).
//!
//! Compiled once per backend (see `sql/` in the store's module doc): `super` is
//! `postgres` or `sqlite`, which name the pool, connection and statements used here.

use futures_util::TryStreamExt;

use argo_results_rules::Row;
use argo_results_rules::feed::FeedBounds;

use super::super::backend::FeedRead;
use super::super::columns;
use super::super::error::{StoreError, StoreResult};
use super::super::model::{ListQuery, ResultPage};
use super::super::page::{Filling, summarize};
use super::super::statements::{
    NEWEST_UID, PENDING, READ_HEAD_EPOCH, READ_PRUNED, SELECT_BY_KEY, SELECT_CHANGES, SELECT_PAGE,
    SUMMARY,
};
use super::{BEGIN_READ, Connection, Pool};
use argo_results_proto::{ResultState, Summary};

async fn newest_uid(
    connection: &mut Connection,
    namespace: &str,
    workflow: &str,
) -> StoreResult<Option<String>> {
    Ok(sqlx::query_scalar(NEWEST_UID)
        .bind(namespace)
        .bind(workflow)
        .fetch_optional(connection)
        .await?)
}

pub(super) async fn get(
    pool: &Pool,
    namespace: &str,
    workflow: &str,
    node_id: &str,
    workflow_uid: Option<&str>,
) -> StoreResult<Option<Row>> {
    let mut connection = pool.acquire().await?;
    let uid = match workflow_uid {
        Some(uid) => uid.to_owned(),
        None => match newest_uid(&mut connection, namespace, workflow).await? {
            Some(uid) => uid,
            None => return Ok(None),
        },
    };
    Ok(sqlx::query(SELECT_BY_KEY)
        .bind(namespace)
        .bind(uid)
        .bind(node_id)
        .try_map(|row| columns::result(&row))
        .fetch_optional(&mut *connection)
        .await?)
}

pub(super) async fn list(pool: &Pool, query: ListQuery) -> StoreResult<ResultPage> {
    let mut tx = pool.begin_with(BEGIN_READ).await?;
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
    let mut filling = Filling::new(query.limit);
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
            if !filling.offer(text, size) {
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

pub(super) async fn feed(
    pool: &Pool,
    since: i64,
    namespace: &str,
    limit: u32,
) -> StoreResult<FeedRead> {
    // The head is read first: every revision up to it has committed, so the changes
    // read next hold all of them, and the head is a safe place to resume from.
    let (head, epoch): (i64, String) = sqlx::query_as(READ_HEAD_EPOCH).fetch_one(pool).await?;
    let mut filling = Filling::new(limit);
    let mut last = since;
    while let Some(rows) = filling.next_round() {
        let mut rows = sqlx::query_as::<_, (i64, String)>(SELECT_CHANGES)
            .bind(last)
            .bind(head)
            .bind(namespace)
            .bind(rows as i64)
            .fetch(pool);
        while let Some((revision, item)) = rows.try_next().await? {
            let size = item.len();
            if !filling.offer(item, size) {
                break;
            }
            last = revision;
        }
    }
    // Read after the changes: history pruned before that read, or during it, shows here.
    let pruned: i64 = sqlx::query_scalar(READ_PRUNED).fetch_one(pool).await?;
    Ok(FeedRead {
        items: filling.items,
        bounds: FeedBounds {
            head,
            epoch,
            last,
            more: filling.more,
            pruned,
        },
    })
}

pub(super) async fn pending(pool: &Pool) -> StoreResult<Vec<(String, i64)>> {
    Ok(sqlx::query_as(PENDING).fetch_all(pool).await?)
}
