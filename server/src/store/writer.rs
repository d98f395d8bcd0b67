//! The writer: reports, expectations and abandons that arrive together share one
//! transaction (group commit), on a thread and a connection of its own.
//!
//! What a transaction costs is mostly its commit (an fsync) and its round trips, and
//! writes are serialized by the revision counter anyway. So the writer commits together
//! the writes queued while the previous transaction ran, up to `--batch-max` of them, at
//! once: they have waited a transaction already. A write that finds the writer idle waits
//! up to `--batch-wait` for others to join it, but only while writes come that often: one
//! that arrives more than `--batch-wait` after the write before it is most likely alone
//! (a lone pod), and waiting would only add to its latency. Each write is decided by the
//! rules, in order, on the row as the writes before it left it, and each caller is
//! answered only after the commit, with the outcome its write alone would have had in that
//! order.
//!
//! A write's path: the handler calls [`Queue::submit`]; [`Writer::run`] gathers a batch;
//! `write_batch` bounds it in time; `transaction`, top to bottom, begins a transaction on
//! the writer's connection with the head locked, loads the rows and the head, lets the rules
//! (`argo_results_rules::batch::plan`) decide each write and assign revisions, stores the
//! batch and commits; `run` answers each caller.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use argo_results_rules::batch::{self, RowKey};
use argo_results_rules::clock::now_millis;
use argo_results_rules::{ReportPolicy, ResultKey, Write, Written};
use tokio::sync::{mpsc, oneshot};

use super::db::{Db, on_db};
use super::error::{FailureKind, StoreError, StoreResult};
use super::notify::{Changed, Notifier};
use crate::metrics::Metrics;

/// How writes are gathered (`--batch-max`, `--batch-wait`).
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Writes per transaction at most; 1 commits each write alone.
    pub max: usize,
    /// How long a write that finds the writer idle waits for others, when the write
    /// before it arrived less than this long before it.
    pub wait: Duration,
}

impl Batching {
    /// Whether a write that finds the writer idle, arriving at `arrived`, waits for others:
    /// only when the write before it (at `previous`) came less than `wait` earlier.
    fn gathers(&self, previous: Option<Instant>, arrived: Instant) -> bool {
        previous.is_some_and(|previous| arrived.saturating_duration_since(previous) < self.wait)
    }
}

/// How long after its oldest write arrived a batch ends, connecting included, so that a
/// database that hangs instead of refusing is answered `503` within 5 s (as a request
/// waiting for a connection is, `dialect::ACQUIRE_TIMEOUT`).
const BATCH_DEADLINE: Duration = Duration::from_secs(3);

/// The least time a batch is given, however long its writes waited for the one before.
const MIN_BATCH_TIME: Duration = Duration::from_secs(1);

/// One write waiting for its transaction.
struct Queued {
    key: ResultKey,
    write: Write,
    arrived: Instant,
    answer: oneshot::Sender<StoreResult<Written>>,
}

/// The writer's inbox.
#[derive(Debug)]
pub(super) struct Queue {
    sender: mpsc::Sender<Queued>,
}

/// The writer, on its thread.
struct Writer {
    /// Its own database: a pool of one connection, kept between batches so that a batch
    /// does not wait for the pool.
    db: Db,
    /// How reports are judged.
    policy: ReportPolicy,
    notifier: Arc<Notifier>,
    metrics: Arc<Metrics>,
}

impl Queue {
    /// Starts the writer on a thread and a runtime of its own, with a database of its own
    /// that `own` opens there: every write waits for the writer, so it must not wait in
    /// line behind request handlers for a turn on the server's threads. It runs until the
    /// queue is dropped, and judges reports by `policy`.
    pub(super) async fn start<D: Into<Db>>(
        own: impl Future<Output = StoreResult<D>> + Send + 'static,
        batching: Batching,
        policy: ReportPolicy,
        notifier: Arc<Notifier>,
        metrics: Arc<Metrics>,
    ) -> StoreResult<Queue> {
        // Requests in flight are bounded by --max-in-flight, so this rarely fills.
        let (sender, receiver) = mpsc::channel(batching.max.max(1) * 4);
        let (opened, open) = oneshot::channel();
        std::thread::Builder::new()
            .name("group-commit".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = opened.send(Err(StoreError::Runtime(error)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match own.await {
                        Ok(db) => {
                            let _ = opened.send(Ok(()));
                            let writer = Writer {
                                db: db.into(),
                                policy,
                                notifier,
                                metrics,
                            };
                            writer.run(receiver, batching).await;
                        }
                        Err(error) => {
                            let _ = opened.send(Err(error));
                        }
                    }
                });
            })
            .map_err(StoreError::Runtime)?;
        open.await.map_err(|_| StoreError::Stopped)??;
        Ok(Queue { sender })
    }

    /// Whether the writer has stopped (it never should): the server is not ready then.
    pub(super) fn stopped(&self) -> bool {
        self.sender.is_closed()
    }

    /// Queues a write and waits for its committed outcome.
    pub(super) async fn submit(&self, key: ResultKey, write: Write) -> StoreResult<Written> {
        let (answer, answered) = oneshot::channel();
        let queued = Queued {
            key,
            write,
            arrived: Instant::now(),
            answer,
        };
        self.sender
            .send(queued)
            .await
            .map_err(|_| StoreError::Stopped)?;
        answered.await.map_err(|_| StoreError::Stopped)?
    }
}

impl Writer {
    async fn run(mut self, mut queue: mpsc::Receiver<Queued>, batching: Batching) {
        let mut previous = None;
        loop {
            let batch = match queue.try_recv() {
                Ok(first) => drain(first, &mut queue, batching.max),
                Err(mpsc::error::TryRecvError::Empty) => match queue.recv().await {
                    Some(first) if batching.gathers(previous, first.arrived) => {
                        gather(first, &mut queue, batching).await
                    }
                    Some(first) => drain(first, &mut queue, batching.max),
                    None => break,
                },
                Err(mpsc::error::TryRecvError::Disconnected) => break,
            };
            previous = batch.iter().map(|write| write.arrived).max();
            match self.write_batch(&batch).await {
                Ok(outcomes) => {
                    for (write, outcome) in batch.into_iter().zip(outcomes) {
                        let _ = write.answer.send(outcome);
                    }
                }
                // One write that breaks the transaction must not fail the others: each is
                // retried alone and gets its own answer. An outage fails them all at once.
                Err(error)
                    if batch.len() > 1 && error.failure() != Some(FailureKind::Unavailable) =>
                {
                    tracing::warn!(%error, writes = batch.len(), "batch failed; writing each alone");
                    for write in batch {
                        let alone = self.write_batch(std::slice::from_ref(&write)).await;
                        let outcome = alone.and_then(|outcomes| {
                            outcomes
                                .into_iter()
                                .next()
                                .unwrap_or(Err(StoreError::Corrupt(
                                    "a batch of one answered nothing".into(),
                                )))
                        });
                        let _ = write.answer.send(outcome);
                    }
                }
                Err(error) => {
                    let error = Arc::new(error);
                    for write in batch {
                        let _ = write
                            .answer
                            .send(Err(StoreError::Shared(Arc::clone(&error))));
                    }
                }
            }
        }
    }

    /// Runs a batch of writes in one transaction and commits what they wrote. Answers
    /// each write's outcome, or fails the whole batch when the transaction fails.
    async fn write_batch(&mut self, writes: &[Queued]) -> StoreResult<Vec<StoreResult<Written>>> {
        // A database that hangs instead of refusing must still be answered with 503
        // within 5 s: the whole batch, connecting included, ends 3 s after its oldest
        // write arrived (and has at least a second). A batch cut off at its commit may
        // have committed; its writers hear 503, and their retries replay.
        let arrived = writes.iter().map(|w| w.arrived).min();
        let deadline = (arrived.unwrap_or_else(Instant::now) + BATCH_DEADLINE)
            .max(Instant::now() + MIN_BATCH_TIME);
        let idle = on_db!(&self.db, |db| db.kept_idle());
        let mut outcomes = self.attempt(writes, deadline).await;
        // A connection that sat idle may have been closed under it (the database
        // restarted): the batch is tried once more on a new one, as its writers' retries
        // would be, where a ping before every write after a pause cost a round trip.
        if idle
            && let Err(error) = &outcomes
            && error.failure() == Some(FailureKind::Unavailable)
        {
            tracing::info!(%error, "the writer's idle connection is replaced");
            outcomes = self.attempt(writes, deadline).await;
        }
        // The connection is gone by now (`attempt`), so the epoch has one to settle on.
        if let Err(StoreError::RolledBack { head, seen }) = outcomes {
            // Revisions after `head` will be numbered again: a follower holding one of the
            // old ones must list again, not read on as if nothing happened.
            tracing::warn!(
                head,
                seen,
                "the database's head went back: it was restored or replaced under the server"
            );
            let reason = "the database's head went back under the server";
            outcomes = match on_db!(&self.db, |db| db.settle_epoch(Some(reason)).await) {
                Ok(_) => {
                    self.notifier.rewind(head);
                    self.attempt(writes, deadline).await
                }
                Err(error) => Err(error),
            };
        }
        outcomes
    }

    /// One try of `transaction` until `deadline`; the writer's connection is dropped when
    /// it fails, since it may be broken, mid-statement or in a failed transaction.
    async fn attempt(
        &mut self,
        writes: &[Queued],
        deadline: Instant,
    ) -> StoreResult<Vec<StoreResult<Written>>> {
        let outcomes = tokio::time::timeout_at(deadline.into(), self.transaction(writes))
            .await
            .unwrap_or(Err(StoreError::TimedOut));
        if let Err(error) = &outcomes
            && on_db!(&mut self.db, |db| db.drop_kept())
        {
            tracing::debug!(%error, "the writer's connection is replaced");
        }
        outcomes
    }

    /// Decides a batch of writes and commits what they wrote, in one transaction.
    async fn transaction(&mut self, queued: &[Queued]) -> StoreResult<Vec<StoreResult<Written>>> {
        let writes: Vec<(&ResultKey, &Write)> = queued.iter().map(|q| (&q.key, &q.write)).collect();
        // Each key once, in the order of its first write.
        let mut seen = HashSet::with_capacity(writes.len());
        let keys: Vec<RowKey<'_>> = writes
            .iter()
            .map(|(key, _)| key.row_key())
            .filter(|id| seen.insert(*id))
            .collect();
        let seen = self.notifier.latest();
        let planned = on_db!(&mut self.db, |db| {
            let mut tx = db.begin_kept().await?;
            let (head, stored) = tx.load(&keys).await?;
            if head < seen {
                return Err(StoreError::RolledBack { head, seen });
            }
            let planned = batch::plan(&writes, head, stored, &self.policy, now_millis())?;
            self.metrics.batch_decided(writes.len());
            match &planned.batch {
                Some(batch) => {
                    tx.store(batch).await?;
                    tx.commit().await?;
                }
                None => tx.rollback().await?,
            }
            planned
        });
        if let Some(batch) = &planned.batch {
            let mut namespaces: Vec<&str> = writes
                .iter()
                .map(|(key, _)| key.namespace.as_str())
                .collect();
            namespaces.sort_unstable();
            namespaces.dedup();
            self.notifier.publish(batch.head, Changed::In(&namespaces));
        }
        Ok(planned
            .outcomes
            .into_iter()
            .map(|outcome| outcome.map_err(StoreError::from))
            .collect())
    }
}

/// The first write and those queued behind it, up to `max`.
fn drain(first: Queued, queue: &mut mpsc::Receiver<Queued>, max: usize) -> Vec<Queued> {
    let mut batch = vec![first];
    while batch.len() < max
        && let Ok(write) = queue.try_recv()
    {
        batch.push(write);
    }
    batch
}

/// The first write and those that arrive within `batching.wait`, up to `batching.max`.
async fn gather(
    first: Queued,
    queue: &mut mpsc::Receiver<Queued>,
    batching: Batching,
) -> Vec<Queued> {
    let deadline = tokio::time::Instant::now() + batching.wait;
    let mut batch = vec![first];
    while batch.len() < batching.max {
        // Takes what is already queued even once the deadline has passed.
        match tokio::time::timeout_at(deadline, queue.recv()).await {
            Ok(Some(write)) => batch.push(write),
            Ok(None) | Err(_) => break,
        }
    }
    batch
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::Batching;

    #[test]
    fn an_idle_writer_waits_only_while_writes_come_within_the_batch_wait() {
        let batching = Batching {
            max: 128,
            wait: Duration::from_millis(2),
        };
        let now = Instant::now();
        let before = |micros| now.checked_sub(Duration::from_micros(micros));
        // The first write of all, and one long after the last: alone, at once.
        assert!(!batching.gathers(None, now));
        assert!(!batching.gathers(before(50_000), now));
        assert!(!batching.gathers(before(2_000), now));
        // Writes 1.9 ms apart: the next is likely within the wait.
        assert!(batching.gathers(before(1_900), now));
        assert!(batching.gathers(Some(now), now));
        // A zero wait never gathers.
        let never = Batching {
            max: 128,
            wait: Duration::ZERO,
        };
        assert!(!never.gathers(Some(now), now));
    }
}
