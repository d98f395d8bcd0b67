//! loadgen: wait containers at scale. Each simulated pod gets its own projected-style token
//! (ES256, signed with a key the server trusts through `--jwks-file`) and sends its node's
//! reports, the last one final with about 1 KB of Argo-shaped outputs. A closed loop keeps
//! `--concurrency` requests in flight for `--duration`; `--rate` sends on a fixed schedule
//! instead and measures each request from the time it was due (no coordinated omission).
//! Latencies go to an HDR histogram; the summary is one JSON object on stdout.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use argo_results_proto::token::{PodIdentity, TokenClaims, es256_public_jwk, generate_es256_key};
use argo_results_proto::{PROTOCOL_VERSION, ReportRequest};
use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::value::RawValue;
use tokio::time::Instant;

const KID: &str = "loadgen";
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const AUDIENCE: &str = "argo-results";

#[derive(Debug, Parser)]
#[command(name = "loadgen", about = "Load generator for argo-results-server")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Writes DIR/signing-key.pem and DIR/jwks.json (give the latter to --jwks-file).
    Keygen { dir: PathBuf },
    /// Prints the outputs each final report carries (for baselines with the same payload).
    Outputs,
    /// Sends reports and prints a JSON summary.
    Run(Run),
    /// Lists one workflow's results (one page of up to 1,000) again and again, as a
    /// reader; prints the latency summary.
    List {
        #[command(flatten)]
        reader: Reader,
        #[arg(long)]
        workflow: String,
        #[arg(long, default_value_t = 200)]
        requests: u32,
    },
    /// Reads the change feed from `--since` to its head in pages of 1,000, as the
    /// controller catches up after a restart; prints changes per second.
    CatchUp {
        #[command(flatten)]
        reader: Reader,
        #[arg(long, default_value_t = 0)]
        since: i64,
    },
}

#[derive(Debug, Clone, clap::Args)]
struct Reader {
    #[arg(long)]
    url: String,
    /// The ES256 key written by `keygen`.
    #[arg(long)]
    key: PathBuf,
    /// Who the reader's token names (the server must grant it --reader).
    #[arg(long, default_value = "system:serviceaccount:argo:argo-server")]
    subject: String,
    #[arg(long, default_value = "argo")]
    namespace: String,
}

impl Reader {
    fn client(&self) -> Result<(reqwest::Client, String), Box<dyn std::error::Error>> {
        let key = EncodingKey::from_ec_pem(&std::fs::read(&self.key)?)?;
        let claims = TokenClaims::user(ISSUER, AUDIENCE, &self.subject, Duration::from_secs(600));
        let token = jsonwebtoken::encode(&header(), &claims, &key)?;
        Ok((reqwest::Client::builder().http1_only().build()?, token))
    }

    /// The whole body of an answer.
    async fn get(
        &self,
        (client, token): &(reqwest::Client, String),
        path_and_query: &str,
    ) -> Result<impl AsRef<[u8]> + use<>, Box<dyn std::error::Error>> {
        let response = client
            .get(format!("{}{path_and_query}", self.url))
            .bearer_auth(token)
            .send()
            .await?
            .error_for_status()?;
        Ok(response.bytes().await?)
    }
}

fn header() -> Header {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(KID.to_owned());
    header
}

#[derive(Debug, Clone, clap::Args)]
struct Run {
    /// The server, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    url: String,
    /// The ES256 key written by `keygen`.
    #[arg(long)]
    key: PathBuf,
    /// Requests in flight at once (closed loop), or at most (fixed rate).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Measured time, in seconds.
    #[arg(long, default_value_t = 20)]
    duration: u64,
    /// Unmeasured time first, in seconds: connections open, caches fill.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Requests per second on a fixed schedule instead of a closed loop.
    #[arg(long)]
    rate: Option<u64>,
    /// Reports per node with one token: 1 sends the final report only; 3 sends started,
    /// progress and final, as Argo's wait container does.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10))]
    reports_per_node: u64,
    /// Nodes per workflow.
    #[arg(long, default_value_t = 1000)]
    nodes_per_workflow: u64,
    #[arg(long, default_value = "argo")]
    namespace: String,
    /// Pods whose tokens are minted before the clock starts, as the kubelet mints them
    /// before the wait container runs; past them, loadgen mints as it goes (and competes
    /// with the server for CPU) [default: 12,000 per second of warmup and duration].
    #[arg(long)]
    premint: Option<u64>,
    /// Prefix of workflow names; distinct runs must use distinct ones [default: from the
    /// clock].
    #[arg(long)]
    run_id: Option<String>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match Cli::parse().command {
        Command::Keygen { dir } => keygen(&dir),
        Command::Outputs => {
            println!("{}", argo_outputs());
            Ok(())
        }
        Command::Run(run) => print(load(run)),
        Command::List {
            reader,
            workflow,
            requests,
        } => print(list(reader, workflow, requests)),
        Command::CatchUp { reader, since } => print(catch_up(reader, since)),
    }
}

fn print<T: serde::Serialize>(
    work: impl std::future::Future<Output = Result<T, Box<dyn std::error::Error>>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let summary = runtime.block_on(work)?;
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}

async fn list(
    reader: Reader,
    workflow: String,
    requests: u32,
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let client = reader.client()?;
    let path = format!(
        "/api/v1/namespaces/{}/workflows/{workflow}/results?limit=1000",
        reader.namespace
    );
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut items = 0;
    for _ in 0..requests {
        // Until the last byte arrived: how long a reader waits, not how long it parses.
        let started = Instant::now();
        let body = reader.get(&client, &path).await?;
        latencies.saturating_record(u64::try_from(started.elapsed().as_micros())?);
        let page: argo_results_proto::ResultList = serde_json::from_slice(body.as_ref())?;
        items = page.items.len();
    }
    let ms = |quantile: f64| latencies.value_at_quantile(quantile) as f64 / 1000.0;
    Ok(serde_json::json!({
        "requests": requests,
        "items": items,
        "p50_ms": ms(0.5),
        "p99_ms": ms(0.99),
        "max_ms": latencies.max() as f64 / 1000.0,
    }))
}

async fn catch_up(
    reader: Reader,
    since: i64,
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let client = reader.client()?;
    let started = Instant::now();
    let (mut since, mut changes) = (since, 0usize);
    loop {
        let body = reader
            .get(
                &client,
                &format!("/api/v1/results?since={since}&limit=1000"),
            )
            .await?;
        let page: argo_results_proto::FeedPage = serde_json::from_slice(body.as_ref())?;
        if page.items.is_empty() {
            break;
        }
        changes += page.items.len();
        since = page.revision;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(serde_json::json!({
        "changes": changes,
        "seconds": seconds,
        "changes_per_s": changes as f64 / seconds,
    }))
}

fn keygen(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let key = generate_es256_key().map_err(|_| "cannot generate a key")?;
    let jwk = es256_public_jwk(key.as_bytes(), KID)?;
    std::fs::write(dir.join("signing-key.pem"), &key)?;
    std::fs::write(
        dir.join("jwks.json"),
        serde_json::to_string(&JwkSet { keys: vec![jwk] })?,
    )?;
    Ok(())
}

/// What one simulated pod needs: its node, its identity and its token.
struct Pod {
    url: String,
    workflow_uid: String,
    pod_name: String,
    pod_uid: String,
    token: String,
}

struct Generator {
    /// Pods 0, 1, ... with their tokens minted before the run.
    minted: Vec<Pod>,
    run: Run,
    run_id: String,
    key: EncodingKey,
    header: Header,
    client: reqwest::Client,
    outputs: String,
}

impl Generator {
    fn pod(&self, index: u64) -> Result<Pod, jsonwebtoken::errors::Error> {
        let workflow = format!("{}-{:05}", self.run_id, index / self.run.nodes_per_workflow);
        let hash = 1_000_000_000 + index;
        let pod_name = format!("{workflow}-main-{hash}");
        let pod_uid = format!("{}-{index:012}", self.run_id);
        let identity = PodIdentity {
            namespace: &self.run.namespace,
            service_account: "default",
            pod_name: &pod_name,
            pod_uid: &pod_uid,
        };
        let claims = TokenClaims::pod(ISSUER, AUDIENCE, &identity, Duration::from_secs(600));
        let token = jsonwebtoken::encode(&self.header, &claims, &self.key)?;
        Ok(Pod {
            url: format!(
                "{}/api/v1/namespaces/{}/workflows/{workflow}/nodes/{workflow}-{hash}/result",
                self.run.url, self.run.namespace
            ),
            workflow_uid: format!("{workflow}-uid"),
            pod_name,
            pod_uid,
            token,
        })
    }

    /// Report `n` (1-based) of `pod`; the last is final and carries the outputs.
    fn report(&self, pod: &Pod, n: u64) -> Result<Vec<u8>, serde_json::Error> {
        let last = n == self.run.reports_per_node;
        let outputs = if last {
            Some(RawValue::from_string(self.outputs.clone())?)
        } else {
            None
        };
        serde_json::to_vec(&ReportRequest {
            protocol_version: PROTOCOL_VERSION,
            workflow_uid: pod.workflow_uid.clone(),
            pod_name: pod.pod_name.clone(),
            pod_uid: pod.pod_uid.clone(),
            instance_id: None,
            sequence: i64::try_from(n).ok(),
            is_final: last,
            outputs,
            progress: (!last && n > 1).then(|| format!("{n}/{}", self.run.reports_per_node)),
            phase: None,
            message: None,
        })
    }

    /// Sends one request; the status, or 0 when no answer came.
    async fn send(&self, pod: &Pod, n: u64) -> u16 {
        let Ok(body) = self.report(pod, n) else {
            return 0;
        };
        let sent = self
            .client
            .put(&pod.url)
            .bearer_auth(&pod.token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                // Read the body so that the connection is reused.
                let _ = response.bytes().await;
                status
            }
            Err(_) => 0,
        }
    }
}

/// Outputs as argoexec sends them: parameters, artifacts, an exit code; about 1 KB.
fn argo_outputs() -> String {
    let parameters: Vec<String> = (0..6)
        .map(|i| {
            format!(
                r#"{{"name":"param-{i}","value":"value-{i}-{}","valueFrom":{{"path":"/tmp/outputs/param-{i}"}}}}"#,
                "x".repeat(24)
            )
        })
        .collect();
    let artifacts: Vec<String> = (0..3)
        .map(|i| {
            format!(
                r#"{{"name":"artifact-{i}","path":"/tmp/outputs/artifact-{i}.tgz","s3":{{"key":"bench/main/artifact-{i}.tgz"}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"parameters":[{}],"artifacts":[{}],"exitCode":"0","result":"done"}}"#,
        parameters.join(","),
        artifacts.join(",")
    )
}

#[derive(Debug, serde::Serialize)]
struct Summary {
    mode: &'static str,
    concurrency: usize,
    rate: Option<u64>,
    reports_per_node: u64,
    duration_s: f64,
    requests: u64,
    errors: u64,
    rps: f64,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
    outputs_bytes: usize,
    statuses: BTreeMap<u16, u64>,
}

#[derive(Default)]
struct Tally {
    latencies: Option<Histogram<u64>>,
    statuses: BTreeMap<u16, u64>,
}

/// Mints the tokens of the first pods on every core, before the clock starts.
fn premint(generator: &Generator) -> Result<Vec<Pod>, jsonwebtoken::errors::Error> {
    let run = &generator.run;
    let count = run.premint.unwrap_or((run.warmup + run.duration) * 12_000);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let started = std::time::Instant::now();
    let chunks = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let range = (count * t / threads)..(count * (t + 1) / threads);
                scope.spawn(move || {
                    range
                        .map(|i| generator.pod(i))
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    eprintln!(
        "loadgen: minted {count} pod tokens in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(chunks.into_iter().flatten().collect())
}

async fn load(run: Run) -> Result<Summary, Box<dyn std::error::Error>> {
    let key = EncodingKey::from_ec_pem(&std::fs::read(&run.key)?)?;
    let run_id = run.run_id.clone().unwrap_or_else(|| {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        format!("bench-{millis}")
    });
    let client = reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(run.concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let mut generator = Generator {
        minted: Vec::new(),
        outputs: argo_outputs(),
        run: run.clone(),
        run_id,
        key,
        header: header(),
        client,
    };
    generator.minted = premint(&generator)?;
    let generator = Arc::new(generator);
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(run.warmup);
    let end = measure_from + Duration::from_secs(run.duration);
    // One schedule slot per request: a pod's reports are consecutive slots.
    let interval = run
        .rate
        .map(|rate| Duration::from_secs_f64(1.0 / rate.max(1) as f64));

    let workers: Vec<_> = (0..run.concurrency)
        .map(|_| {
            let (generator, next) = (Arc::clone(&generator), Arc::clone(&next));
            tokio::spawn(async move {
                let mut tally = Tally {
                    latencies: Histogram::new_with_bounds(1, 60_000_000, 3).ok(),
                    ..Tally::default()
                };
                let per_pod = generator.run.reports_per_node;
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let first_slot = index * per_pod;
                    let minted_now;
                    let pod = match usize::try_from(index)
                        .ok()
                        .and_then(|i| generator.minted.get(i))
                    {
                        Some(pod) => pod,
                        None => match generator.pod(index) {
                            Ok(pod) => {
                                minted_now = pod;
                                &minted_now
                            }
                            Err(_) => {
                                *tally.statuses.entry(0).or_default() += 1;
                                continue;
                            }
                        },
                    };
                    for n in 1..=per_pod {
                        let due = match interval {
                            Some(interval) => {
                                let slot = u32::try_from(first_slot + n - 1).unwrap_or(u32::MAX);
                                let due = start + interval * slot;
                                tokio::time::sleep_until(due).await;
                                due
                            }
                            None => Instant::now(),
                        };
                        if due >= end {
                            return tally;
                        }
                        let status = generator.send(pod, n).await;
                        if due >= measure_from {
                            let micros = due.elapsed().as_micros();
                            if let Some(histogram) = &mut tally.latencies {
                                histogram
                                    .saturating_record(u64::try_from(micros).unwrap_or(u64::MAX));
                            }
                            *tally.statuses.entry(status).or_default() += 1;
                        }
                    }
                }
            })
        })
        .collect();

    let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut statuses = BTreeMap::new();
    for worker in workers {
        let tally = worker.await?;
        if let Some(histogram) = tally.latencies {
            latencies.add(histogram)?;
        }
        for (status, count) in tally.statuses {
            *statuses.entry(status).or_default() += count;
        }
    }
    let requests: u64 = statuses.values().sum();
    let errors: u64 = statuses
        .iter()
        .filter(|(status, _)| !(200..300).contains(*status))
        .map(|(_, count)| count)
        .sum();
    let ms = |quantile: f64| latencies.value_at_quantile(quantile) as f64 / 1000.0;
    Ok(Summary {
        mode: if run.rate.is_some() {
            "fixed_rate"
        } else {
            "closed_loop"
        },
        concurrency: run.concurrency,
        rate: run.rate,
        reports_per_node: run.reports_per_node,
        duration_s: run.duration as f64,
        requests,
        errors,
        rps: requests as f64 / run.duration as f64,
        p50_ms: ms(0.5),
        p90_ms: ms(0.9),
        p99_ms: ms(0.99),
        p999_ms: ms(0.999),
        max_ms: latencies.max() as f64 / 1000.0,
        outputs_bytes: generator.outputs.len(),
        statuses,
    })
}
