//! The [`Backend`] of one database: its writes in its own `write.rs`, the rest in the
//! transactions of `sql/` that both databases share.
//!
//! Compiled once per backend (see `sql/` in the store's module doc): `super` is
//! `postgres` or `sqlite`, and `ThisBackend` its backend.

use argo_results_rules::Row;
use argo_results_rules::batch::{Batch, RowKey};
use argo_results_rules::claim::{ClaimDecision, ClaimRow, SettleDecision};

use super::super::backend::{Backend, FeedRead};
use super::super::error::StoreResult;
use super::super::model::{ClaimQuery, ListQuery, ResultPage};
use super::super::statements::READ_HEAD;
use super::{
    Connection, Db, Pool, ThisBackend, claims, delete, epoch, in_place, pool, read, write,
};

impl Backend for ThisBackend {
    type Db = Db;

    fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn own_connection(&self) -> StoreResult<Self> {
        Ok(ThisBackend {
            pool: pool(&self.options, 1).await?,
            ..self.clone()
        })
    }

    async fn write_batch<'a, P>(
        &'a self,
        connection: &'a mut Connection,
        keys: &'a [RowKey<'a>],
        plan: P,
    ) -> StoreResult<Option<i64>>
    where
        P: FnOnce(i64, Vec<Row>) -> StoreResult<Option<Batch>> + Send + 'a,
    {
        in_place(self)?;
        write::batch(connection, keys, plan).await
    }

    async fn delete_workflow<'a>(
        &'a self,
        namespace: &'a str,
        workflow: &'a str,
        workflow_uid: &'a str,
    ) -> StoreResult<Option<(u64, i64)>> {
        delete::delete_workflow(&self.pool, namespace, workflow, workflow_uid).await
    }

    async fn expire_results(&self, before: i64) -> StoreResult<Option<(u64, i64)>> {
        delete::expire_results(&self.pool, before).await
    }

    async fn prune_changes(&self, before: i64) -> StoreResult<Option<u64>> {
        delete::prune_changes(&self.pool, before).await
    }

    async fn prune_claims(&self, before: i64) -> StoreResult<u64> {
        delete::prune_claims(&self.pool, before).await
    }

    async fn get<'a>(
        &'a self,
        namespace: &'a str,
        workflow: &'a str,
        node_id: &'a str,
        workflow_uid: Option<&'a str>,
    ) -> StoreResult<Option<Row>> {
        read::get(&self.pool, namespace, workflow, node_id, workflow_uid).await
    }

    async fn list(&self, query: ListQuery) -> StoreResult<ResultPage> {
        read::list(&self.pool, query).await
    }

    async fn feed<'a>(
        &'a self,
        since: i64,
        namespace: &'a str,
        limit: u32,
    ) -> StoreResult<FeedRead> {
        read::feed(&self.pool, since, namespace, limit).await
    }

    async fn claim<'a, D>(
        &'a self,
        cron_workflow_uid: &'a str,
        scheduled_millis: i64,
        decide: D,
    ) -> StoreResult<Option<ClaimRow>>
    where
        D: FnOnce(Option<&ClaimRow>, i64) -> ClaimDecision + Send + 'a,
    {
        claims::claim(&self.pool, cron_workflow_uid, scheduled_millis, decide).await
    }

    async fn settle<'a, D>(
        &'a self,
        cron_workflow_uid: &'a str,
        scheduled_millis: i64,
        decide: D,
    ) -> StoreResult<ClaimRow>
    where
        D: FnOnce(Option<ClaimRow>, i64) -> SettleDecision + Send + 'a,
    {
        claims::settle(&self.pool, cron_workflow_uid, scheduled_millis, decide).await
    }

    async fn claims(&self, query: ClaimQuery) -> StoreResult<(Vec<ClaimRow>, Option<i64>)> {
        claims::page(&self.pool, query).await
    }

    async fn pending(&self) -> StoreResult<Vec<(String, i64)>> {
        read::pending(&self.pool).await
    }

    async fn head(&self) -> StoreResult<i64> {
        in_place(self)?;
        Ok(sqlx::query_scalar(READ_HEAD).fetch_one(&self.pool).await?)
    }

    async fn settle_epoch<'a>(&'a self, renew: Option<&'a str>) -> StoreResult<String> {
        epoch::settle(&self.pool, renew).await
    }
}
