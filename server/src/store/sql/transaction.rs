//! Writing transactions. A write that moves the head (the writer's batches, a workflow's
//! deletion, retention's) locks the head first (`lock_head`), writes (the writer through
//! its database's own `load` and `store`, `write.rs`), and commits; the writer's own
//! (`begin_kept`) locks the head in the message that begins it, and its `load` reads the
//! head with the rows: one round trip less for every batch. A cron claim, its settle and
//! the epoch move no head: they take the transaction's connection (`tx`) and lock the one
//! row they change.
//!
//! # The door of every write
//!
//! Every write of the store begins here, in `begin_write` (deletions, retention, claims and
//! their settles, the epoch) or `begin_kept` (the writer's batches), and both first check
//! that the database is still the one the server opened ([`Dialect::in_place`]): SQLite
//! goes on writing to a file deleted or replaced under it, and what it acknowledged there is
//! gone at the next restart, so such a write is refused `503` instead. No other file begins
//! a writing transaction or writes outside one (the `layers` test keeps it so).
//!
//! Compiled once per database (see [`Dialect`]).
//!
//! # Revisions in commit order: the serial section
//!
//! Every transaction that records changes first locks the single `store_state` row
//! (`LOCK_HEAD`), assigns revisions after the head it read, sets the new head and
//! commits; the lock is released only when the commit is durable. Those transactions
//! therefore commit one at a time, in revision order, and that is what lets a feed
//! reader resume from revision R without ever missing a later commit numbered R or lower
//! (docs/api.md, "5. Guarantees"): the feed reads the head first, and every revision up
//! to it has committed.
//!
//! The lock stays. A write's answer carries its revision (docs/api.md, "2. Reporting a
//! result"), so revisions are fixed before the commit; two transactions in flight at once
//! could then commit in the opposite order of their revisions, and Postgres offers nothing
//! but a lock held to the end of a transaction to order commits. The known ways around it
//! change the contract: a sequence read back through a `pg_snapshot_xmin` horizon orders
//! the feed by transaction, not by the revision a writer was answered, and a list page
//! would no longer be a snapshot at its revision; numbering changes after they commit
//! costs every write a second transaction (and fsync) before its answer. Two batches in
//! flight would also have to lock the rows they share, since each decides on what the
//! other writes.
//!
//! What it costs is bounded: one replica has one writer, which commits one batch at a time
//! with or without the lock, and the writes that arrive during a commit's fsync form the
//! next batch. The measurements are in docs/performance.md, "Why writes commit one at a
//! time".

use std::time::{Duration, Instant};

use sqlx::{Connection as _, Transaction};

use super::super::dialect::Dialect;
use super::super::error::StoreResult;
use super::This;

/// The head, locked until the transaction ends: every writing transaction starts here.
const LOCK_HEAD: &str =
    "UPDATE store_state SET revision = revision WHERE id = 1 RETURNING revision";

/// The writer's connection, idle longer than this, may have been closed under it (the
/// database restarted): a batch that fails on it is tried once more on a new one.
const IDLE_BEFORE_RETRY: Duration = Duration::from_secs(1);

/// One writing transaction of this database.
pub(in crate::store) struct WriteTransaction<'c> {
    pub(super) tx: Transaction<'c, <This as Dialect>::Driver>,
}

impl This {
    /// A writing transaction on a connection of the pool, once the database is in place.
    pub(super) async fn begin_write(&self) -> StoreResult<WriteTransaction<'static>> {
        self.in_place()?;
        let tx = self.pool.begin_with(This::BEGIN_WRITE).await?;
        Ok(WriteTransaction { tx })
    }

    /// Whether the writer's kept connection sat idle long enough that a batch failing on it
    /// is tried again on a new one (`IDLE_BEFORE_RETRY`).
    pub(in crate::store) fn kept_idle(&self) -> bool {
        self.kept
            .as_ref()
            .is_some_and(|(_, used)| used.elapsed() > IDLE_BEFORE_RETRY)
    }

    /// A writing transaction on the writer's kept connection, or a new one, the head
    /// locked. A connection that sat idle is not checked first: a ping cost every write
    /// after a pause a round trip, where the writer tries a failed batch again instead.
    pub(in crate::store) async fn begin_kept(&mut self) -> StoreResult<WriteTransaction<'_>> {
        self.in_place()?;
        let kept = match self.kept.take() {
            Some(kept) => kept,
            None => (self.pool.acquire().await?, Instant::now()),
        };
        let (held, used) = self.kept.insert(kept);
        *used = Instant::now();
        let tx = held.begin_with(This::BEGIN_WRITER).await?;
        Ok(WriteTransaction { tx })
    }

    /// Closes the writer's connection, if it holds one, without a goodbye (which could
    /// hang too), never handing it back to the pool: after a failure it may be broken,
    /// mid-statement or in a failed transaction. Whether there was one.
    pub(in crate::store) fn drop_kept(&mut self) -> bool {
        let kept = self.kept.take();
        if let Some((held, _)) = kept {
            drop(held.detach());
            return true;
        }
        false
    }
}

impl WriteTransaction<'_> {
    /// The head, locked until the transaction ends.
    pub(in crate::store) async fn lock_head(&mut self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(LOCK_HEAD)
            .fetch_one(&mut *self.tx)
            .await?)
    }

    pub(in crate::store) async fn commit(self) -> StoreResult<()> {
        self.tx.commit().await?;
        Ok(())
    }

    pub(in crate::store) async fn rollback(self) -> StoreResult<()> {
        self.tx.rollback().await?;
        Ok(())
    }
}
