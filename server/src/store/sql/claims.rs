//! Cron claims: a tick's fate is decided by the rules on the database's clock, so that
//! replicas agree whose lease has expired, while the tick's row is locked
//! (`SELECT_CLAIM_LOCKED`).
//!
//! Compiled once per database (see [`Dialect`]).

use argo_results_proto::Claim;
use argo_results_rules::claim::{self, ClaimDecision, ClaimRow, SettleDecision};
use argo_results_rules::{NewClaim, Settlement};

use super::super::columns::{self, claim_columns};
use super::super::dialect::{ConnectionOf, Dialect};
use super::super::error::{StoreError, StoreResult};
use super::super::model::{ClaimPage, ClaimQuery};
use super::super::random::uuid;
use super::This;

const INSERT_CLAIM: &str = concat!(
    "INSERT INTO cron_claims (",
    claim_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
     ON CONFLICT (cron_workflow_uid, scheduled_time) DO NOTHING"
);
/// Writes what a takeover or a settle changes.
const UPDATE_CLAIM: &str = "UPDATE cron_claims SET state = $3, claim_id = $4, \
     claimed_at = $5, lease_expires_at = $6, takeovers = $7, settled_at = $8, \
     workflow_uid = $9, reason = $10 WHERE cron_workflow_uid = $1 AND scheduled_time = $2";
/// A page of a cron workflow's claims, newest first, after ($4, $5).
const SELECT_CLAIMS: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM cron_claims WHERE namespace = $1 AND cron_workflow = $2 \
     AND ($3 = '' OR cron_workflow_uid = $3) AND (scheduled_time, cron_workflow_uid) < ($4, $5) \
     ORDER BY scheduled_time DESC, cron_workflow_uid DESC LIMIT $6"
);
const LAST_SETTLED: &str = "SELECT MAX(scheduled_time) FROM cron_claims \
     WHERE namespace = $1 AND cron_workflow = $2 AND ($3 = '' OR cron_workflow_uid = $3) \
     AND state <> 'claimed'";

type Query<'q> = sqlx::query::Query<
    'q,
    <This as Dialect>::Driver,
    <<This as Dialect>::Driver as sqlx::Database>::Arguments<'q>,
>;

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
    tx: &mut ConnectionOf<This>,
    cron_workflow_uid: &str,
    scheduled_millis: i64,
) -> StoreResult<(Option<ClaimRow>, i64)> {
    let row = sqlx::query(This::SELECT_CLAIM_LOCKED)
        .bind(cron_workflow_uid)
        .bind(scheduled_millis)
        .try_map(|row| columns::claim(&row))
        .fetch_optional(&mut *tx)
        .await?;
    let now = sqlx::query_scalar(This::NOW).fetch_one(&mut *tx).await?;
    Ok((row, now))
}

async fn update(tx: &mut ConnectionOf<This>, row: &ClaimRow) -> StoreResult<()> {
    let query = sqlx::query(UPDATE_CLAIM)
        .bind(&row.cron_workflow_uid)
        .bind(row.scheduled_time);
    bind_changes(query, row).execute(tx).await?;
    Ok(())
}

impl This {
    /// Claims one tick of a cron workflow for a new holder, or takes it over from one
    /// whose lease expired unsettled; one holder at a time, on any replica.
    pub(in crate::store) async fn claim(&self, claim: &NewClaim) -> StoreResult<Claim> {
        let claim_id = uuid()?;
        // On Postgres, a first claim racing this one can insert the row between the read
        // and the insert; the second pass then reads that row, locked, and decides on it.
        for _ in 0..2 {
            if let Some(row) = self.decide_claim(claim, &claim_id).await? {
                return Ok(row.for_holder());
            }
        }
        // Cannot happen: a row inserted by a racer holds a live lease, which retention
        // keeps.
        Err(StoreError::Corrupt(format!(
            "the claim of tick {} of {} vanished while it was decided",
            claim.scheduled_millis, claim.cron_workflow_uid
        )))
    }

    /// Decides a tick's claim on its locked row and stores the decision; `None` when a
    /// racing first claim inserted the row meanwhile.
    async fn decide_claim(
        &self,
        claim: &NewClaim,
        claim_id: &str,
    ) -> StoreResult<Option<ClaimRow>> {
        let mut tx = self.begin_write().await?.tx;
        let (current, now) =
            locked(&mut tx, &claim.cron_workflow_uid, claim.scheduled_millis).await?;
        let row = match claim::claim(current.as_ref(), claim, claim_id, now) {
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

    /// Records what the holder of a claim did with its tick.
    pub(in crate::store) async fn settle(&self, settlement: &Settlement) -> StoreResult<Claim> {
        let mut tx = self.begin_write().await?.tx;
        let (current, now) = locked(
            &mut tx,
            &settlement.cron_workflow_uid,
            settlement.scheduled_millis,
        )
        .await?;
        let row = match claim::settle(current, settlement, now) {
            SettleDecision::Update(row) => {
                update(&mut tx, &row).await?;
                tx.commit().await?;
                row
            }
            SettleDecision::Unchanged(row) => {
                tx.rollback().await?;
                row
            }
            SettleDecision::Refuse(refusal) => {
                tx.rollback().await?;
                return Err(refusal.into());
            }
        };
        Ok(row.for_holder())
    }

    /// A page of claims and the newest settled tick, in one snapshot.
    pub(in crate::store) async fn claims(&self, query: ClaimQuery) -> StoreResult<ClaimPage> {
        let uid = query.cron_workflow_uid.unwrap_or_default();
        let (after_time, after_uid) = query.after.unwrap_or((i64::MAX, String::new()));
        let limit = query.limit as usize;
        let mut tx = self.pool.begin_with(This::BEGIN_READ).await?;
        let mut rows = sqlx::query(SELECT_CLAIMS)
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
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last()
                .map(|row| (row.scheduled_time, row.cron_workflow_uid.clone()))
        } else {
            None
        };
        Ok(ClaimPage {
            items: rows.into_iter().map(ClaimRow::public).collect(),
            last_scheduled,
            next,
        })
    }
}
