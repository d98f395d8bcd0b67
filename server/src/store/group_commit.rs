//! Group commit: writes that arrive together share one transaction.
//!
//! Every write takes the revision counter's lock, so writes are serialized anyway; what a
//! transaction costs is mostly its commit (an fsync) and its round trips. One writer thread
//! commits together the writes queued while the previous transaction ran, up to
//! `--batch-max` of them, at once: they have waited a transaction already. A write that
//! finds the writer idle waits up to `--batch-wait` for others to join it. Each caller is
//! answered only after the commit, with the outcome its write alone would have had in
//! that order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::row::Row;
use super::rules::Decision;
use super::sql::{Db, WriterConnection};
use super::{ResultKey, StoreError, StoreResult, Written};

/// How writes are gathered (`--batch-max`, `--batch-wait`).
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Writes per transaction at most; 1 commits each write alone.
    pub max: usize,
    /// How long a write that finds the writer idle waits for others.
    pub wait: Duration,
}

/// What a write does to its row, decided inside the transaction.
pub(super) type Decide = Box<dyn Fn(Option<&Row>, i64) -> Decision + Send + Sync>;

/// One write waiting for its transaction.
pub(super) struct Write {
    pub key: ResultKey,
    pub decide: Decide,
    pub arrived: Instant,
}

struct Pending {
    write: Write,
    answer: oneshot::Sender<StoreResult<Written>>,
}

/// The writer's inbox.
#[derive(Debug)]
pub(super) struct Queue {
    sender: mpsc::Sender<Pending>,
}

impl Queue {
    /// Starts the writer on a thread and a runtime of its own, with a connection of its
    /// own: every write waits for it, so it must not wait in line behind request handlers
    /// for a turn on the server's threads. It runs until the queue is dropped.
    pub(super) async fn start(db: Db, url: String, batching: Batching) -> StoreResult<Queue> {
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
                    match db.with_own_connection(&url).await {
                        Ok(db) => {
                            let _ = opened.send(Ok(()));
                            writer(db, receiver, batching).await;
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
    pub(super) async fn submit(&self, key: ResultKey, decide: Decide) -> StoreResult<Written> {
        let (answer, answered) = oneshot::channel();
        let write = Write {
            key,
            decide,
            arrived: Instant::now(),
        };
        self.sender
            .send(Pending { write, answer })
            .await
            .map_err(|_| StoreError::Stopped)?;
        answered.await.map_err(|_| StoreError::Stopped)?
    }
}

async fn writer(db: Db, mut queue: mpsc::Receiver<Pending>, batching: Batching) {
    let mut connection = WriterConnection::default();
    loop {
        let batch = match queue.try_recv() {
            Ok(first) => drain(first, &mut queue, batching.max),
            Err(mpsc::error::TryRecvError::Empty) => match queue.recv().await {
                Some(first) => gather(first, &mut queue, batching).await,
                None => break,
            },
            Err(mpsc::error::TryRecvError::Disconnected) => break,
        };
        let writes: Vec<&Write> = batch.iter().map(|p| &p.write).collect();
        match db.write_batch(&mut connection, &writes).await {
            Ok(outcomes) => {
                for (pending, outcome) in batch.into_iter().zip(outcomes) {
                    let _ = pending.answer.send(outcome);
                }
            }
            // One write that breaks the transaction must not fail the others: each is
            // retried alone and gets its own answer. An outage fails them all at once.
            Err(error) if batch.len() > 1 && error.kind() != Some("unavailable") => {
                tracing::warn!(%error, writes = batch.len(), "batch failed; writing each alone");
                for pending in batch {
                    let alone = db.write_batch(&mut connection, &[&pending.write]).await;
                    let outcome = alone.and_then(|outcomes| {
                        outcomes
                            .into_iter()
                            .next()
                            .unwrap_or(Err(StoreError::Corrupt(
                                "a batch of one answered nothing".into(),
                            )))
                    });
                    let _ = pending.answer.send(outcome);
                }
            }
            Err(error) => {
                let error = Arc::new(error);
                for pending in batch {
                    let _ = pending
                        .answer
                        .send(Err(StoreError::Shared(Arc::clone(&error))));
                }
            }
        }
    }
}

/// The first write and those queued behind it, up to `max`.
fn drain(first: Pending, queue: &mut mpsc::Receiver<Pending>, max: usize) -> Vec<Pending> {
    let mut batch = vec![first];
    while batch.len() < max
        && let Ok(pending) = queue.try_recv()
    {
        batch.push(pending);
    }
    batch
}

/// The first write and those that arrive within `batching.wait`, up to `batching.max`.
async fn gather(
    first: Pending,
    queue: &mut mpsc::Receiver<Pending>,
    batching: Batching,
) -> Vec<Pending> {
    let deadline = tokio::time::Instant::now() + batching.wait;
    let mut batch = vec![first];
    while batch.len() < batching.max {
        // Takes what is already queued even once the deadline has passed.
        match tokio::time::timeout_at(deadline, queue.recv()).await {
            Ok(Some(pending)) => batch.push(pending),
            Ok(None) | Err(_) => break,
        }
    }
    batch
}
