//! `run --visible-via`: the time from each final report's 2xx to the moment a controller
//! following the change feed of another replica holds the result completed, the lag that
//! Argo's task-result informer has and that this path must keep short. The change crosses
//! Postgres: the replica that stored it notifies, the other one answers its long poll.
//!
//! The controller is argo-results-client's `Reconciler` (`--follower rust`), or a program
//! speaking the follower line protocol (`tests/bench/follower`, Go's `Follower`): it reads
//! the URL, `--ca` and its token from the environment (`ARGO_RESULTS_URL`,
//! `ARGO_RESULTS_CA`, `ARGO_RESULTS_TOKEN`), lines `track NAMESPACE NAME UID` on its
//! stdin, and writes `ready` on its stdout once it follows from the feed's head, then
//! `completed WORKFLOW_UID NODE_ID UNIX_NANOS UPDATED_AT` the first time it holds a node
//! completed, with the wall-clock time it did and the result's `updatedAt`. It ends when
//! its stdin does. Either runs on a thread
//! of its own, as a controller is a process of its own: the pods' thread is busy with
//! handshakes, and a sighting timed there would wait for it. Times are the wall clock's,
//! which the follower process shares.
//!
//! The pods' thread reads a 2xx late when it is busy, which shortens the lag measured from
//! it (`visible_*`). The lag from the result's `updatedAt`, the writer's clock when it
//! decided the write, before the commit and so before any 2xx, is measured too
//! (`visible_since_write_*`): the lag a pod would see lies between the two.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argo_results_client::controller::{Reconciler, WorkflowRef};
use argo_results_client::proto::ResultState;
use argo_results_client::{Client, TokenSource};
use hdrhistogram::Histogram;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::time::Instant;

use crate::Error;

#[derive(Debug, Clone, clap::Args)]
pub struct VisibleArgs {
    /// Another replica of the server, on the same database: a controller follows its
    /// change feed, and the summary gives the time from each final report's 2xx to the
    /// controller holding the result completed (`visible_*`).
    #[arg(long)]
    pub visible_via: Option<String>,
    /// That controller: `rust` (argo-results-client's Reconciler, in this process) or the
    /// path of a program speaking the follower line protocol (tests/bench/follower, Go's
    /// Follower).
    #[arg(long, default_value = "rust")]
    pub follower: String,
    /// Who the controller's token names (the server must grant it --reader).
    #[arg(long, default_value = "system:serviceaccount:argo:argo-server")]
    pub follower_subject: String,
}

/// A node: its workflow's UID and its ID.
pub type NodeKey = (String, String);

/// The final reports sent whose result the controller has not both been acknowledged and
/// seen, and the latencies of those that were.
pub struct Visibility {
    open: Mutex<Open>,
}

struct Open {
    nodes: HashMap<NodeKey, Sighting>,
    /// From the 2xx, and from `updatedAt`, to the controller holding the result.
    latencies: Histogram<u64>,
    since_write: Histogram<u64>,
}

#[derive(Default)]
struct Sighting {
    /// When the 2xx came, and whether in the measured seconds.
    acked: Option<(SystemTime, bool)>,
    /// When the controller held it, and the result's `updatedAt` then.
    seen: Option<(SystemTime, SystemTime)>,
}

#[derive(Debug, serde::Serialize)]
pub struct VisibleSummary {
    pub follower: String,
    /// Final reports answered 2xx in the measured seconds.
    pub visible_count: u64,
    pub visible_p50_ms: f64,
    pub visible_p99_ms: f64,
    pub visible_max_ms: f64,
    pub visible_since_write_p50_ms: f64,
    pub visible_since_write_p99_ms: f64,
    pub visible_since_write_max_ms: f64,
    /// Of them, those the controller did not hold within 10 s of the load's end.
    pub visible_never_seen: u64,
}

impl Visibility {
    pub fn new() -> Result<Visibility, Error> {
        Ok(Visibility {
            open: Mutex::new(Open {
                nodes: HashMap::new(),
                latencies: Histogram::new_with_bounds(1, 600_000_000, 3)?,
                since_write: Histogram::new_with_bounds(1, 600_000_000, 3)?,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A final report for `node` is about to be sent.
    pub fn sending(&self, node: NodeKey) {
        self.lock().nodes.insert(node, Sighting::default());
    }

    /// Its answer came: `status`, inside the measured seconds or not.
    pub fn answered(&self, node: &NodeKey, status: u16, measured: bool) {
        let now = SystemTime::now();
        let mut open = self.lock();
        if !(200..300).contains(&status) {
            open.nodes.remove(node);
            return;
        }
        if let Some(sighting) = open.nodes.get_mut(node) {
            sighting.acked = Some((now, measured));
        }
        open.settle(node);
    }

    /// The controller held `node` completed from `at`, written at `updated_at`. A
    /// sighting may come before the 2xx: the commit wakes the other replica while this
    /// one still answers the pod.
    fn seen(&self, node: &NodeKey, at: SystemTime, updated_at: &str) -> Result<(), Error> {
        let millis = updated_at.parse::<jiff::Timestamp>()?.as_millisecond();
        let written = UNIX_EPOCH + Duration::from_millis(u64::try_from(millis)?);
        let mut open = self.lock();
        if let Some(sighting) = open.nodes.get_mut(node)
            && sighting.seen.is_none()
        {
            sighting.seen = Some((at, written));
        }
        open.settle(node);
        Ok(())
    }

    /// The nodes sent and not yet seen.
    fn unseen(&self) -> Vec<NodeKey> {
        let open = self.lock();
        let unseen = open.nodes.iter().filter(|(_, s)| s.seen.is_none());
        unseen.map(|(node, _)| node.clone()).collect()
    }

    /// Measured nodes acknowledged and not seen.
    fn waiting(&self) -> u64 {
        let open = self.lock();
        let waiting = open
            .nodes
            .values()
            .filter(|s| matches!(s.acked, Some((_, true))));
        waiting.count() as u64
    }

    fn summary(&self, follower: String) -> VisibleSummary {
        let never_seen = self.waiting();
        let open = self.lock();
        let ms = |micros: u64| micros as f64 / 1000.0;
        let (latencies, since_write) = (&open.latencies, &open.since_write);
        VisibleSummary {
            follower,
            visible_count: latencies.len() + never_seen,
            visible_p50_ms: ms(latencies.value_at_quantile(0.5)),
            visible_p99_ms: ms(latencies.value_at_quantile(0.99)),
            visible_max_ms: ms(latencies.max()),
            visible_since_write_p50_ms: ms(since_write.value_at_quantile(0.5)),
            visible_since_write_p99_ms: ms(since_write.value_at_quantile(0.99)),
            visible_since_write_max_ms: ms(since_write.max()),
            visible_never_seen: never_seen,
        }
    }
}

impl Open {
    /// Records and forgets `node` once it is both acknowledged and seen.
    fn settle(&mut self, node: &NodeKey) {
        let Some(Sighting {
            acked: Some((acked, measured)),
            seen: Some((seen, written)),
        }) = self.nodes.get(node)
        else {
            return;
        };
        if *measured {
            let micros = |from| {
                let lag = seen.duration_since(from).unwrap_or_default();
                u64::try_from(lag.as_micros()).unwrap_or(u64::MAX)
            };
            let (from_ack, from_write) = (micros(*acked), micros(*written));
            self.latencies.saturating_record(from_ack);
            self.since_write.saturating_record(from_write);
        }
        self.nodes.remove(node);
    }
}

/// What the controller needs to follow the workflows the pods report into.
pub struct Follow {
    pub args: VisibleArgs,
    pub url: String,
    pub ca: Option<PathBuf>,
    pub token: String,
    /// The workflows of the pods handed out so far, a few ahead: the controller follows a
    /// workflow before its pods run, as Argo's does.
    pub workflows: Box<dyn Fn() -> Vec<WorkflowRef> + Send + Sync>,
}

/// A controller following the feed until [`Following::finish`].
pub struct Following {
    follower: String,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<(), Error>>,
}

impl Following {
    /// Starts the controller on a thread of its own and returns once it follows from the
    /// feed's head.
    pub async fn start(follow: Follow, visibility: Arc<Visibility>) -> Result<Following, Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, is_ready) = tokio::sync::oneshot::channel();
        let follower = follow.args.follower.clone();
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            if follow.args.follower == "rust" {
                runtime.block_on(reconcile(follow, visibility, stopped, ready))
            } else {
                runtime.block_on(external(follow, visibility, stopped, ready))
            }
        });
        if is_ready.await.is_err() {
            joined(thread).await?;
            return Err("the follower ended before it was ready".into());
        }
        Ok(Following {
            follower,
            stop,
            thread,
        })
    }

    /// Waits up to 10 s for the controller to see every acknowledged report, stops it and
    /// sums up.
    pub async fn finish(self, visibility: &Visibility) -> Result<VisibleSummary, Error> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while visibility.waiting() > 0 && Instant::now() < deadline && !self.thread.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.stop.store(true, Ordering::Relaxed);
        joined(self.thread).await?;
        Ok(visibility.summary(self.follower))
    }
}

/// The follower's thread, once it ended: its error, if it failed.
async fn joined(thread: std::thread::JoinHandle<Result<(), Error>>) -> Result<(), Error> {
    let ended = tokio::task::spawn_blocking(move || thread.join()).await?;
    ended.map_err(|_| "the follower's thread panicked")?
}

/// The workflows not yet followed of those `follow.workflows` names; `tracked` counts
/// those followed.
fn untracked(follow: &Follow, tracked: &mut usize) -> Vec<WorkflowRef> {
    let workflows = (follow.workflows)();
    let from = std::mem::replace(tracked, workflows.len());
    workflows.into_iter().skip(from).collect()
}

/// The Rust controller: `Reconciler::follow` with 1 s long polls; after each, the nodes
/// sent and not seen are looked up in what it holds.
async fn reconcile(
    follow: Follow,
    visibility: Arc<Visibility>,
    stop: Arc<AtomicBool>,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Result<(), Error> {
    let client = Client::builder(&follow.url)
        .token(TokenSource::Value(follow.token.clone()))
        .ca_file(follow.ca.clone())
        .build()?;
    let mut reconciler = Reconciler::resume(client, []).await?;
    let mut tracked = 0;
    let _ = ready.send(());
    while !stop.load(Ordering::Relaxed) {
        for workflow in untracked(&follow, &mut tracked) {
            reconciler.track(workflow).await?;
        }
        reconciler.follow(1).await?;
        for node in visibility.unseen() {
            if let Some(result) = reconciler.result(&node.0, &node.1)
                && result.state == ResultState::Completed
            {
                visibility.seen(&node, SystemTime::now(), &result.updated_at)?;
            }
        }
    }
    Ok(())
}

/// Another controller, as a child process speaking the follower line protocol.
async fn external(
    follow: Follow,
    visibility: Arc<Visibility>,
    stop: Arc<AtomicBool>,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Result<(), Error> {
    let mut command = tokio::process::Command::new(&follow.args.follower);
    command
        .env("ARGO_RESULTS_URL", &follow.url)
        .env("ARGO_RESULTS_TOKEN", &follow.token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    if let Some(ca) = &follow.ca {
        command.env("ARGO_RESULTS_CA", ca);
    }
    let mut child = command.spawn()?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the follower's pipes".into());
    };
    let reading = tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        let mut ready = Some(ready);
        while let Some(line) = lines.next_line().await? {
            match line.split(' ').collect::<Vec<_>>()[..] {
                ["ready"] => {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                }
                ["completed", workflow_uid, node_id, nanos, updated_at] => {
                    let at = UNIX_EPOCH + Duration::from_nanos(nanos.parse()?);
                    let node = (workflow_uid.to_owned(), node_id.to_owned());
                    visibility.seen(&node, at, updated_at)?;
                }
                _ => return Err::<(), Error>(format!("the follower said {line:?}").into()),
            }
        }
        Ok(())
    });
    let mut tracked = 0;
    while !stop.load(Ordering::Relaxed) && !reading.is_finished() {
        for workflow in untracked(&follow, &mut tracked) {
            let line = format!(
                "track {} {} {}\n",
                workflow.namespace, workflow.name, workflow.uid
            );
            stdin.write_all(line.as_bytes()).await?;
        }
        stdin.flush().await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(stdin);
    let status = child.wait().await?;
    reading.await??;
    if !status.success() {
        return Err(format!("the follower ended: {status}").into());
    }
    Ok(())
}
