//! Cron claims: a tick's fate is decided on the database's clock, so that replicas agree
//! whose lease has expired, while the tick's row is locked (`SELECT_CLAIM_LOCKED`).
//!
//! Compiled once per backend (see `sql/` in the store's module doc): `super` is
//! `postgres` or `sqlite`, which name the pool, connection and statements used here.

use argo_results_rules::claim::{ClaimDecision, ClaimRow, SettleDecision};

use super::super::columns;
use super::super::error::StoreResult;
use super::super::model::ClaimQuery;
use super::super::statements::{INSERT_CLAIM, LAST_SETTLED, SELECT_CLAIMS, UPDATE_CLAIM};
use super::{BEGIN_READ, BEGIN_WRITE, Connection, Db, NOW, Pool, SELECT_CLAIM_LOCKED};

type Query<'q> = sqlx::query::Query<'q, Db, <Db as sqlx::Database>::Arguments<'q>>;

/// Binds what a takeover or a settle can change (`state` to `reason`, in the order of
/// `claim_columns!`), after the key columns.
fn bind_changes<'q>(query: Query<'q>, row: &'q ClaimRow) -> Query<'q> {
    query
        .bind(row.state.as_str())
        .bind(&row.claim_id)
        .bind(row.claimed_at)
        .bind(row.lease_expires_at)
        .bind(row.takeovers)
        .bind(row.settled_at)
        .bind(&row.workflow_uid)
        .bind(&row.reason)
}

/// A tick's claim, locked until the transaction ends, and the database's time once it is.
async fn locked(
    tx: &mut Connection,
    cron_workflow_uid: &str,
    scheduled_millis: i64,
) -> StoreResult<(Option<ClaimRow>, i64)> {
    let row = sqlx::query(SELECT_CLAIM_LOCKED)
        .bind(cron_workflow_uid)
        .bind(scheduled_millis)
        .try_map(|row| columns::claim(&row))
        .fetch_optional(&mut *tx)
        .await?;
    let now = sqlx::query_scalar(NOW).fetch_one(&mut *tx).await?;
    Ok((row, now))
}

async fn update(tx: &mut Connection, row: &ClaimRow) -> StoreResult<()> {
    let query = sqlx::query(UPDATE_CLAIM)
        .bind(&row.cron_workflow_uid)
        .bind(row.scheduled_time);
    bind_changes(query, row).execute(tx).await?;
    Ok(())
}

pub(super) async fn claim<D>(
    pool: &Pool,
    cron_workflow_uid: &str,
    scheduled_millis: i64,
    decide: D,
) -> StoreResult<Option<ClaimRow>>
where
    D: FnOnce(Option<&ClaimRow>, i64) -> ClaimDecision,
{
    let mut tx = pool.begin_with(BEGIN_WRITE).await?;
    let (current, now) = locked(&mut tx, cron_workflow_uid, scheduled_millis).await?;
    let row = match decide(current.as_ref(), now) {
        ClaimDecision::Insert(row) => {
            let insert = sqlx::query(INSERT_CLAIM)
                .bind(&row.cron_workflow_uid)
                .bind(row.scheduled_time)
                .bind(&row.namespace)
                .bind(&row.cron_workflow)
                .bind(&row.workflow_name);
            let inserted = bind_changes(insert, &row)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if inserted == 0 {
                tx.rollback().await?;
                return Ok(None);
            }
            row
        }
        ClaimDecision::TakeOver(row) => {
            update(&mut tx, &row).await?;
            row
        }
        ClaimDecision::Refuse(refusal) => {
            tx.rollback().await?;
            return Err(refusal.into());
        }
    };
    tx.commit().await?;
    Ok(Some(row))
}

pub(super) async fn settle<D>(
    pool: &Pool,
    cron_workflow_uid: &str,
    scheduled_millis: i64,
    decide: D,
) -> StoreResult<ClaimRow>
where
    D: FnOnce(Option<ClaimRow>, i64) -> SettleDecision,
{
    let mut tx = pool.begin_with(BEGIN_WRITE).await?;
    let (current, now) = locked(&mut tx, cron_workflow_uid, scheduled_millis).await?;
    match decide(current, now) {
        SettleDecision::Update(row) => {
            update(&mut tx, &row).await?;
            tx.commit().await?;
            Ok(row)
        }
        SettleDecision::Unchanged(row) => {
            tx.rollback().await?;
            Ok(row)
        }
        SettleDecision::Refuse(refusal) => {
            tx.rollback().await?;
            Err(refusal.into())
        }
    }
}

pub(super) async fn page(
    pool: &Pool,
    query: ClaimQuery,
) -> StoreResult<(Vec<ClaimRow>, Option<i64>)> {
    let uid = query.cron_workflow_uid.unwrap_or_default();
    let (after_time, after_uid) = query.after.unwrap_or((i64::MAX, String::new()));
    let mut tx = pool.begin_with(BEGIN_READ).await?;
    let rows = sqlx::query(SELECT_CLAIMS)
        .bind(&query.namespace)
        .bind(&query.cron_workflow)
        .bind(&uid)
        .bind(after_time)
        .bind(after_uid)
        .bind(i64::from(query.limit) + 1)
        .try_map(|row| columns::claim(&row))
        .fetch_all(&mut *tx)
        .await?;
    let last_scheduled = sqlx::query_scalar(LAST_SETTLED)
        .bind(&query.namespace)
        .bind(&query.cron_workflow)
        .bind(&uid)
        .fetch_one(&mut *tx)
        .await?;
    tx.rollback().await?;
    Ok((rows, last_scheduled))
}
