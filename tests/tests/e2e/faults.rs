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
use argo_results_tests::server::ScratchDir;
use argo_results_tests::tokens::pod_token;
use argo_results_tests::{Backend, TestServer};
use futures_util::TryStreamExt;
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
/// until 10 s from now: a report that succeeds with it succeeded within 10 s.
fn retries_for_10s() -> Option<RetryPolicy> {
    Some(RetryPolicy {
        deadline: Some(Instant::now() + Duration::from_secs(10)),
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

    /// Waits until `condition(acknowledged, refused)` holds; fails the test after [`BOUND`].
    async fn wait_until(&self, what: &str, condition: impl Fn(usize, usize) -> bool) {
        let deadline = Instant::now() + BOUND;
        loop {
            let (acknowledged, refused) =
                (self.acknowledged(), self.refused.load(Ordering::SeqCst));
            if condition(acknowledged, refused) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {BOUND:?} (acknowledged {acknowledged}, refused {refused})"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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

/// Sends every refused report again, as the wait container's retry does; each must be
/// stored now. Returns how many had committed although their writer never heard so (a
/// replay answers `200` where a first write answers `201`).
async fn retry_refused(url: &str, tally: &Tally) -> usize {
    let mut committed = 0;
    for (i, _) in &tally.refused {
        let answer = complete(url, *i, retries_for_10s()).await;
        match answer.map(|a| a.status) {
            Ok(200) => committed += 1,
            Ok(201) => {}
            other => panic!("step {i}'s report, sent again after the fault: {other:?}"),
        }
    }
    committed
}

/// The refusals that are not `503 unavailable`, as text.
fn not_unavailable(tally: &Tally) -> Vec<String> {
    let odd = tally.refused.iter().filter(|(_, e)| !is_unavailable(e));
    odd.map(|(i, e)| format!("step {i}: {e}")).collect()
}

/// Guarantee 4 under load: 16 writers, SIGKILL, restart. Every acknowledged report is
/// stored, nothing is stored half, and the reports cut off by the kill are stored once the
/// executor's retry sends them again.
async fn kill_9_under_load_loses_no_acknowledged_report(backend: Backend) {
    let mut server = TestServer::start(backend).await;
    let writers = Writers::start(server.url());
    writers
        .wait_until("reports acknowledged before the kill", |acknowledged, _| {
            acknowledged >= BEFORE_FAULT
        })
        .await;
    server.kill().await;
    let tally = writers.stop().await;
    let server = server.crash_and_restart().await;
    let sent = tally.sent();
    let after_restart = stored(&server).await;
    let lost = missing(&after_restart, &tally.acknowledged);
    let stray = stray(&after_restart, &sent);
    let committed_unacknowledged = retry_refused(server.url(), &tally).await;
    let settled = stored(&server).await;
    println!(
        "kill -9 under load ({backend:?}): acknowledged={} stored after restart={} lost={} \
         unacknowledged={} (committed before the kill: {committed_unacknowledged}) \
         stored after sending those again={}",
        tally.acknowledged.len(),
        after_restart.len(),
        lost.len(),
        tally.refused.len(),
        settled.len(),
    );
    assert!(lost.is_empty(), "acknowledged reports lost: {lost:?}");
    assert_eq!(stray, 0, "rows stored that no writer sent whole");
    let answered: Vec<_> = tally
        .refused
        .iter()
        .filter(|(_, e)| !matches!(e, ClientError::Transport(_)))
        .map(|(i, e)| format!("step {i}: {e}"))
        .collect();
    assert!(
        answered.is_empty(),
        "refusals other than the kill's: {answered:?}"
    );
    assert_eq!(settled.len(), sent.len());
    assert_eq!(missing(&settled, &sent), Vec::<u32>::new());
}

/// Postgres stopped at once under 16 writers, then started again: reports are refused with
/// `503 unavailable` while it is down, a report succeeds within 10 s of its return (the
/// wait container's retries, bounded by a 10 s deadline), the writers go on, and nothing
/// acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_loses_nothing_and_serves_within_10s() {
    let postgres = PrivatePostgres::start();
    let server = TestServer::start_on(Backend::Postgres, &postgres.url(), &[]).await;
    let writers = Writers::start(server.url());
    writers
        .wait_until(
            "reports acknowledged before the outage",
            |acknowledged, _| acknowledged >= BEFORE_FAULT,
        )
        .await;
    postgres.stop();
    writers
        .wait_until("every writer meets the outage", |_, refused| {
            refused >= WRITERS as usize
        })
        .await;
    postgres.resume();
    let first = complete(server.url(), PROBE, retries_for_10s()).await;
    assert!(
        first.is_ok(),
        "no report succeeded within 10 s of Postgres coming back: {first:?}"
    );
    let before = writers.acknowledged();
    writers
        .wait_until(
            "the writers' reports acknowledged again",
            |acknowledged, _| acknowledged >= before + BEFORE_FAULT,
        )
        .await;
    let tally = writers.stop().await;
    // The writers' steps and the first report after the outage.
    let mut sent = tally.sent();
    sent.push(PROBE);
    let after_outage = stored(&server).await;
    let lost = missing(&after_outage, &tally.acknowledged);
    let stray = stray(&after_outage, &sent);
    let committed_unacknowledged = retry_refused(server.url(), &tally).await;
    let settled = stored(&server).await;
    println!(
        "Postgres restarted under load: acknowledged={} refused={} (committed as Postgres \
         stopped: {committed_unacknowledged}) stored={} lost={} stored after sending the \
         refused again={}",
        tally.acknowledged.len(),
        tally.refused.len(),
        after_outage.len(),
        lost.len(),
        settled.len(),
    );
    assert!(lost.is_empty(), "acknowledged reports lost: {lost:?}");
    assert_eq!(stray, 0, "rows stored that no writer sent whole");
    let odd = not_unavailable(&tally);
    assert!(
        odd.is_empty(),
        "refusals other than 503 unavailable: {odd:?}"
    );
    assert_eq!(settled.len(), sent.len());
    assert_eq!(missing(&settled, &sent), Vec::<u32>::new());
}

/// A tmpfs of a test's own (mounting needs root, as in CI), unmounted when dropped.
#[derive(Debug)]
struct SmallDisk(ScratchDir);

impl SmallDisk {
    /// `None` when this machine cannot mount one, said on stdout and stderr; with `CI` set
    /// the test fails instead, so that CI never passes without filling a disk.
    fn mount(size: &str) -> Option<Self> {
        let dir = ScratchDir::new();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir.0)
            .output();
        let why = match mounted {
            Ok(out) if out.status.success() => return Some(SmallDisk(dir)),
            Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            Err(error) => error.to_string(),
        };
        let message = format!(
            "SKIPPED: cannot mount a tmpfs to fill ({why}); this test needs root (or \
             CAP_SYS_ADMIN), as CI has"
        );
        assert!(std::env::var_os("CI").is_none(), "{message}");
        println!("{message}");
        eprintln!("{message}");
        None
    }

    /// Fills the disk to its last byte with a file, and returns the file.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.0.0.join("filler");
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
            .arg(&self.0.0)
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
    let database = format!("sqlite://{}", disk.0.0.join("results.db").display());
    let server = TestServer::start_on(Backend::Sqlite, &database, &[]).await;
    let writers = Writers::start(server.url());
    writers
        .wait_until(
            "reports acknowledged before the disk fills",
            |acknowledged, _| acknowledged >= BEFORE_FAULT,
        )
        .await;
    let filler = disk.fill();
    writers
        .wait_until("every writer meets the full disk", |_, refused| {
            refused >= WRITERS as usize
        })
        .await;
    let read = server
        .reader()
        .list_results(NS, WF, &ListOptions::default())
        .await;
    assert!(read.is_ok(), "reads fail on a full disk: {read:?}");
    std::fs::remove_file(filler).expect("remove the filler");
    let first = complete(server.url(), PROBE, retries_for_10s()).await;
    assert!(
        first.is_ok(),
        "no report succeeded within 10 s of space coming back: {first:?}"
    );
    let before = writers.acknowledged();
    writers
        .wait_until(
            "the writers' reports acknowledged again",
            |acknowledged, _| acknowledged >= before + BEFORE_FAULT,
        )
        .await;
    let tally = writers.stop().await;
    let mut sent = tally.sent();
    sent.push(PROBE);
    let after_full = stored(&server).await;
    let lost = missing(&after_full, &tally.acknowledged);
    let stray = stray(&after_full, &sent);
    let committed_unacknowledged = retry_refused(server.url(), &tally).await;
    let server = server.crash_and_restart().await;
    let db = server.db().await;
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&db)
        .await
        .expect("integrity check");
    db.close().await;
    let settled = stored(&server).await;
    println!(
        "SQLite on a full disk: acknowledged={} refused={} (committed anyway: \
         {committed_unacknowledged}) stored={} lost={} stored after sending the refused \
         again, a kill and a restart={} integrity_check={integrity}",
        tally.acknowledged.len(),
        tally.refused.len(),
        after_full.len(),
        lost.len(),
        settled.len(),
    );
    assert!(lost.is_empty(), "acknowledged reports lost: {lost:?}");
    assert_eq!(stray, 0, "rows stored that no writer sent whole");
    let odd = not_unavailable(&tally);
    assert!(
        odd.is_empty(),
        "refusals other than 503 unavailable: {odd:?}"
    );
    assert_eq!(integrity, "ok");
    assert_eq!(settled.len(), sent.len());
    assert_eq!(missing(&settled, &sent), Vec::<u32>::new());
}
