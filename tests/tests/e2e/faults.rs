//! Faults under load, on the real binary: the server killed with SIGKILL, its Postgres
//! stopped and started again, its SQLite disk full. Each test prints how many reports were
//! acknowledged and how many are stored, and fails if an acknowledged report is missing or
//! changed, or if a report refused during the fault cannot be stored once it is over.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use argo_results_client::proto::{NodeResult, ProblemCode, ResultState};
use argo_results_client::{Answer, Client, ClientError, ListOptions, RetryPolicy, TokenSource};
use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::private_postgres::PrivatePostgres;
use argo_results_tests::tokens::pod_token;
use argo_results_tests::{Backend, TestServer, eventually};
use futures_util::TryStreamExt;
use tempfile::TempDir;
use tokio::task::JoinHandle;
use tokio::time::Instant;

on_both_backends!(kill_9_under_load_loses_no_acknowledged_report);

const WRITERS: u32 = 16;
/// Writer `w` completes steps `w * STEPS_PER_WRITER`, `w * STEPS_PER_WRITER + 1`, ...
const STEPS_PER_WRITER: u32 = 100_000;
/// A step of no writer, for the test's own reports.
const PROBE: u32 = WRITERS * STEPS_PER_WRITER;
/// Reports acknowledged before the fault strikes: 20 per writer on average.
const BEFORE_FAULT: usize = 320;
/// How long any condition of these tests may take to come true before the test fails.
const BOUND: Duration = Duration::from_secs(120);

/// Step `i`'s pod completes its node with [`outputs`]`(i)`; without `retry`, once.
async fn complete(
    url: &str,
    i: u32,
    retry: Option<RetryPolicy>,
) -> Result<Answer<NodeResult>, ClientError> {
    let s = step(i);
    let token = pod_token(NS, &s.pod_name, &s.pod_uid);
    let mut client = Client::builder(url).token(TokenSource::Value(token));
    if let Some(policy) = retry {
        client = client.retry(policy);
    }
    let report = s.report(Some(1), true, Some(&outputs(i)));
    let client = client.build().expect("client");
    client.report(NS, WF, &s.node_id, &report).await
}

/// The wait container's retries (`Retry-After`, else 1 s doubling to 30 s, 20 % jitter)
/// with a deadline 10 s from now: no attempt starts after it, and the last one is given
/// what is left of it, or a second at least.
fn retries_for_10s() -> Option<RetryPolicy> {
    Some(RetryPolicy {
        deadline: Some(Instant::now() + Duration::from_secs(10)),
        ..RetryPolicy::default()
    })
}

fn is_unavailable(error: &ClientError) -> bool {
    error
        .problem()
        .is_some_and(|p| p.status == 503 && p.code == ProblemCode::Unavailable)
}

/// How the writers' reports were answered.
#[derive(Debug, Default)]
struct Tally {
    /// Steps whose final report was acknowledged (2xx).
    acknowledged: Vec<u32>,
    /// Steps whose final report was not, with what it got instead.
    refused: Vec<(u32, ClientError)>,
}

impl Tally {
    /// Every step a writer sent, acknowledged or not.
    fn sent(&self) -> Vec<u32> {
        let refused = self.refused.iter().map(|(i, _)| *i);
        self.acknowledged.iter().copied().chain(refused).collect()
    }
}

/// [`WRITERS`] wait containers, each completing one step after another until stopped. A
/// failed report is not retried: the test decides what becomes of it.
struct Writers {
    stop: Arc<AtomicBool>,
    acknowledged: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    tasks: Vec<JoinHandle<Tally>>,
}

impl Writers {
    fn start(url: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let tasks = (0..WRITERS)
            .map(|w| {
                let url = url.to_owned();
                let stop = Arc::clone(&stop);
                let acknowledged = Arc::clone(&acknowledged);
                let refused = Arc::clone(&refused);
                tokio::spawn(async move {
                    let mut tally = Tally::default();
                    for i in w * STEPS_PER_WRITER.. {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        match complete(&url, i, None).await {
                            Ok(_) => {
                                tally.acknowledged.push(i);
                                acknowledged.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(error) => {
                                tally.refused.push((i, error));
                                refused.fetch_add(1, Ordering::SeqCst);
                                // Not a busy loop while the fault lasts.
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                        }
                    }
                    tally
                })
            })
            .collect();
        Writers {
            stop,
            acknowledged,
            refused,
            tasks,
        }
    }

    fn acknowledged(&self) -> usize {
        self.acknowledged.load(Ordering::SeqCst)
    }

    fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }

    /// Waits until `condition(acknowledged, refused)` holds; fails the test after [`BOUND`].
    async fn wait_until(&self, what: &str, condition: impl Fn(usize, usize) -> bool) {
        let counted = Counted(what, self);
        eventually(counted, BOUND, async || {
            condition(self.acknowledged(), self.refused()).then_some(())
        })
        .await;
    }

    /// Waits until [`BEFORE_FAULT`] more reports than now are acknowledged.
    async fn acknowledge_more(&self, what: &str) {
        let before = self.acknowledged();
        let more = |acknowledged, _| acknowledged >= before + BEFORE_FAULT;
        self.wait_until(what, more).await;
    }

    /// Waits until the writers have met the fault: as many refusals as writers.
    async fn meet(&self, fault: &str) {
        let met = |_, refused| refused >= WRITERS as usize;
        self.wait_until(&format!("the writers meet {fault}"), met)
            .await;
    }

    /// Once `fault` is over: a report succeeds within 10 s (the test's own, with the wait
    /// container's retries and a 10 s deadline), and the writers' are acknowledged again.
    async fn recover(&self, url: &str, fault: &str) {
        let first = complete(url, PROBE, retries_for_10s()).await;
        assert!(
            first.is_ok(),
            "no report succeeded within 10 s of the end of {fault}: {first:?}"
        );
        let again = format!("the writers' reports acknowledged after {fault}");
        self.acknowledge_more(&again).await;
    }

    /// Stops the writers after the report each has in flight.
    async fn stop(self) -> Tally {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = Tally::default();
        for task in self.tasks {
            let tally = task.await.expect("writer");
            all.acknowledged.extend(tally.acknowledged);
            all.refused.extend(tally.refused);
        }
        all
    }
}

/// What the writers were waited for, and their counts when it did not happen.
struct Counted<'a>(&'a str, &'a Writers);

impl std::fmt::Display for Counted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, writers) = (self.0, self.1);
        let (acknowledged, refused) = (writers.acknowledged(), writers.refused());
        write!(f, "{what} (acknowledged {acknowledged}, refused {refused})")
    }
}

/// Every result of [`WF`], by node ID, as the API reads it.
async fn stored(server: &TestServer) -> HashMap<String, NodeResult> {
    let options = ListOptions {
        limit: Some(1000),
        ..Default::default()
    };
    server
        .reader()
        .list_all(NS, WF, options)
        .map_ok(|result| (result.node_id.clone(), result))
        .try_collect()
        .await
        .expect("list the stored results")
}

/// The steps among `steps` that are not stored completed with their own outputs.
fn missing(stored: &HashMap<String, NodeResult>, steps: &[u32]) -> Vec<u32> {
    let complete = |i: u32| {
        stored.get(&step(i).node_id).is_some_and(|result| {
            result.state == ResultState::Completed
                && result.outputs.as_ref().map(|o| o.get()) == Some(outputs(i).as_str())
        })
    };
    steps.iter().copied().filter(|&i| !complete(i)).collect()
}

/// Stored rows other than `sent` steps completed with their own outputs: a report stored in
/// part, or a row that nobody sent.
fn stray(stored: &HashMap<String, NodeResult>, sent: &[u32]) -> usize {
    stored.len() - (sent.len() - missing(stored, sent).len())
}

/// What the writers' reports came to, read once the fault is over.
struct Aftermath {
    tally: Tally,
    /// Every step sent: the writers' and the test's own.
    sent: Vec<u32>,
    /// Rows stored before the refused reports were sent again.
    stored: usize,
    /// Acknowledged steps not stored completed with their outputs.
    lost: Vec<u32>,
    /// Rows that are not a sent step completed with its outputs.
    stray: usize,
    /// Refused reports that had committed all the same: sent again, they replay (200).
    committed_anyway: usize,
}

impl Aftermath {
    /// Reads what `server` stored of `tally` (and of `own`, the test's own steps), then
    /// sends every refused report again, as the wait container's retry does: each must be
    /// stored now.
    async fn read(server: &TestServer, tally: Tally, own: &[u32]) -> Self {
        let sent: Vec<u32> = tally
            .sent()
            .into_iter()
            .chain(own.iter().copied())
            .collect();
        let stored = stored(server).await;
        let lost = missing(&stored, &tally.acknowledged);
        let stray = stray(&stored, &sent);
        let mut committed_anyway = 0;
        for (i, _) in &tally.refused {
            let answer = complete(server.url(), *i, retries_for_10s()).await;
            match answer.map(|a| a.status) {
                Ok(200) => committed_anyway += 1,
                Ok(201) => {}
                other => panic!("step {i}'s report, sent again after the fault: {other:?}"),
            }
        }
        Aftermath {
            tally,
            sent,
            stored: stored.len(),
            lost,
            stray,
            committed_anyway,
        }
    }

    /// Prints the counts of `fault`, then fails unless nothing acknowledged was lost,
    /// nothing was stored in part, every refusal was `expected`, and `settled` (what is
    /// stored in the end) holds every step sent.
    fn check(
        &self,
        fault: &str,
        settled: &HashMap<String, NodeResult>,
        expected: impl Fn(&ClientError) -> bool,
    ) {
        println!(
            "{fault}: acknowledged={} refused={} (committed anyway: {}) stored={} lost={} \
             stored after sending the refused again={}",
            self.tally.acknowledged.len(),
            self.tally.refused.len(),
            self.committed_anyway,
            self.stored,
            self.lost.len(),
            settled.len(),
        );
        assert!(
            self.lost.is_empty(),
            "acknowledged reports lost: {:?}",
            self.lost
        );
        assert_eq!(self.stray, 0, "rows stored that nobody sent whole");
        let unexpected = self.tally.refused.iter().filter(|(_, e)| !expected(e));
        let unexpected: Vec<_> = unexpected.map(|(i, e)| format!("step {i}: {e}")).collect();
        assert!(unexpected.is_empty(), "unexpected refusals: {unexpected:?}");
        assert_eq!(settled.len(), self.sent.len());
        assert_eq!(missing(settled, &self.sent), Vec::<u32>::new());
    }
}

/// Guarantee 4 under load: 16 writers, SIGKILL, restart. Every acknowledged report is
/// stored, nothing is stored half, and the reports cut off by the kill are stored once the
/// executor's retry sends them again.
async fn kill_9_under_load_loses_no_acknowledged_report(backend: Backend) {
    let mut server = TestServer::builder(backend).start().await;
    let writers = Writers::start(server.url());
    writers
        .acknowledge_more("reports acknowledged before the kill")
        .await;
    server.kill().await;
    let tally = writers.stop().await;
    let server = server.crash_and_restart().await;
    let aftermath = Aftermath::read(&server, tally, &[]).await;
    let settled = stored(&server).await;
    // Refused only by the kill: the connection broke or was refused.
    let killed = |e: &ClientError| matches!(e, ClientError::Transport(_));
    aftermath.check(
        &format!("kill -9 under load ({backend:?})"),
        &settled,
        killed,
    );
}

/// Postgres stopped at once under 16 writers, then started again: reports are refused with
/// `503 unavailable` while it is down, a report succeeds within 10 s of its return (the
/// wait container's retries, bounded by a 10 s deadline), the writers go on, and nothing
/// acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_loses_nothing_and_serves_within_10s() {
    let postgres = PrivatePostgres::start();
    let server = TestServer::builder(Backend::Postgres)
        .database_url(&postgres.url())
        .start()
        .await;
    let writers = Writers::start(server.url());
    writers
        .acknowledge_more("reports acknowledged before the outage")
        .await;
    postgres.stop();
    writers.meet("the outage").await;
    postgres.resume();
    writers.recover(server.url(), "the outage").await;
    let tally = writers.stop().await;
    let aftermath = Aftermath::read(&server, tally, &[PROBE]).await;
    let settled = stored(&server).await;
    aftermath.check("Postgres restarted under load", &settled, is_unavailable);
}

/// A tmpfs of a test's own (mounting needs root, as in CI), unmounted when dropped.
#[derive(Debug)]
struct SmallDisk(TempDir);

impl SmallDisk {
    /// `None` when this machine cannot mount one, said on stdout and stderr; with `CI` set
    /// the test fails instead, so that CI never passes without filling a disk.
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().expect("scratch directory");
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        let why = match mounted {
            Ok(out) if out.status.success() => return Some(SmallDisk(dir)),
            Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            Err(error) => error.to_string(),
        };
        let message = format!(
            "cannot mount a tmpfs to fill ({why}); this test needs root (or CAP_SYS_ADMIN)"
        );
        assert!(
            std::env::var_os("CI").is_none(),
            "{message}; CI is set, where it must run"
        );
        println!("SKIPPED: {message}");
        eprintln!("SKIPPED: {message}");
        None
    }

    /// Fills the disk to its last byte with a file, and returns the file.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.0.path().join("filler");
        let mut file = std::fs::File::create(&path).expect("create the filler");
        for chunk in [vec![0u8; 64 * 1024], vec![0u8; 1]] {
            loop {
                match file.write_all(&chunk) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                    Err(e) => panic!("fill the disk: {e}"),
                }
            }
        }
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a server killed on drop may still hold its files for a moment.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0.path())
            .status();
    }
}

/// SQLite on a disk that fills up under 16 writers: reports are refused with `503
/// unavailable` (reads still answer), succeed within 10 s of space coming back, the
/// database passes `PRAGMA integrity_check` after a crash and a restart, and nothing
/// acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_on_a_full_disk_answers_503_and_recovers() {
    let Some(disk) = SmallDisk::mount("16m") else {
        return;
    };
    let database = format!("sqlite://{}", disk.0.path().join("results.db").display());
    let server = TestServer::builder(Backend::Sqlite)
        .database_url(&database)
        .start()
        .await;
    let writers = Writers::start(server.url());
    writers
        .acknowledge_more("reports acknowledged before the disk fills")
        .await;
    let filler = disk.fill();
    writers.meet("the full disk").await;
    let read = server
        .reader()
        .list_results(NS, WF, &ListOptions::default())
        .await;
    assert!(read.is_ok(), "reads fail on a full disk: {read:?}");
    std::fs::remove_file(filler).expect("remove the filler");
    writers.recover(server.url(), "the full disk").await;
    let tally = writers.stop().await;
    let aftermath = Aftermath::read(&server, tally, &[PROBE]).await;
    let server = server.crash_and_restart().await;
    let db = server.db().await;
    let integrity: String =
        argo_results_tests::on_db!(&db, |pool| sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(pool)
            .await)
        .expect("integrity check");
    db.close().await;
    let settled = stored(&server).await;
    println!(
        "SQLite on a full disk: PRAGMA integrity_check after a kill and a restart: {integrity}"
    );
    aftermath.check("SQLite on a full disk", &settled, is_unavailable);
    assert_eq!(integrity, "ok");
}
