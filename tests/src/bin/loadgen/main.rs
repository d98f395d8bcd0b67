//! loadgen: wait containers at scale. Each simulated pod gets its own projected-style token
//! (RS256 with a 2048-bit key, as Kubernetes signs service-account tokens by default; the
//! server trusts the key through `--jwks-file`) and sends its node's
//! reports, the last one final with about 1 KB of Argo-shaped outputs. A closed loop keeps
//! `--concurrency` requests in flight for `--duration`; `--rate` sends on a fixed schedule
//! instead and measures each request from the time it was due (no coordinated omission).
//! Latencies go to an HDR histogram; the summary is one JSON object on stdout. `get` loads
//! one GET path (`/healthz`, a list) the same way. With `--server-pid`, both also read the
//! server's CPU time at the start and the end of the measured seconds. Both keep one
//! connection per request in flight, or with `--fresh` open one per pod (`run`) or per
//! request (`get`), over TLS to an `https://` URL, as each wait container opens its own.
//! `run --visible-via` also measures how soon a controller following another replica's
//! change feed holds each result (visible.rs).

mod visible;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use argo_results_client::controller::WorkflowRef;
use argo_results_proto::token::{PodIdentity, TokenClaims, pem_encode};
use argo_results_proto::{PROTOCOL_VERSION, ReportRequest};
use argo_results_tests::server::cpu_ticks;
use argo_results_tests::tls::TestCa;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::RSA_PKCS1_SHA256;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::value::RawValue;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use visible::{Follow, Following, Visibility, VisibleArgs, VisibleSummary};

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
    /// Writes a private CA (DIR/ca.pem, for --ca) and two server certificates it issued
    /// for 127.0.0.1 and localhost: DIR/ecdsa.{crt,key} (P-256) and DIR/rsa.{crt,key}
    /// (RSA-2048, cert-manager's default).
    Certs { dir: PathBuf },
    /// Prints the outputs each final report carries (for baselines with the same payload).
    Outputs,
    /// Sends reports and prints a JSON summary.
    Run(Run),
    /// Sends GET requests for one path in a closed loop, as `run` sends reports (one
    /// keep-alive connection per request in flight); prints the same summary.
    Get(Get),
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
    /// The RSA key written by `keygen`.
    #[arg(long)]
    key: PathBuf,
    /// Who the reader's token names (the server must grant it --reader).
    #[arg(long, default_value = "system:serviceaccount:argo:argo-server")]
    subject: String,
    #[arg(long, default_value = "argo")]
    namespace: String,
}

impl Reader {
    fn client(&self) -> Result<(reqwest::Client, String), Error> {
        let claims = TokenClaims::user(ISSUER, AUDIENCE, &self.subject, Duration::from_secs(600));
        let token = Signer::read(&self.key)?.sign(&claims)?;
        Ok((reqwest::Client::builder().http1_only().build()?, token))
    }

    /// The whole body of an answer.
    async fn get(
        &self,
        (client, token): &(reqwest::Client, String),
        path_and_query: &str,
    ) -> Result<impl AsRef<[u8]> + use<>, Error> {
        let response = client
            .get(format!("{}{path_and_query}", self.url))
            .bearer_auth(token)
            .send()
            .await?
            .error_for_status()?;
        Ok(response.bytes().await?)
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Signs RS256 tokens with a key parsed once. (jsonwebtoken parses and checks the private
/// key again for every signature, which costs more than the signature itself.)
struct Signer {
    key: KeyPair,
    /// The encoded JWT header, the same for every token.
    header: String,
}

impl Signer {
    /// The PKCS#8 PEM key `keygen` wrote.
    fn read(path: &std::path::Path) -> Result<Signer, Error> {
        let pem = std::fs::read_to_string(path)?;
        let base64: String = pem
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        let key = KeyPair::from_pkcs8(&STANDARD.decode(base64)?).map_err(|e| e.to_string())?;
        let header = serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": KID});
        Ok(Signer {
            key,
            header: URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header)?),
        })
    }

    fn sign(&self, claims: &impl serde::Serialize) -> Result<String, Error> {
        let signed = format!(
            "{}.{}",
            self.header,
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims)?)
        );
        let mut signature = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                signed.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "cannot sign")?;
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

#[derive(Debug, Clone, clap::Args)]
struct Run {
    #[command(flatten)]
    target: TargetArgs,
    /// The RSA key written by `keygen`.
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
    /// Each pod on a fresh connection of its own, closed after its reports, as a wait
    /// container opens one: over TLS, a handshake per pod.
    #[arg(long)]
    fresh: bool,
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
    /// with the server for CPU) [default: enough for 12,000 requests per second of warmup
    /// and duration].
    #[arg(long)]
    premint: Option<u64>,
    /// Prefix of workflow names; distinct runs must use distinct ones [default: from the
    /// clock].
    #[arg(long)]
    run_id: Option<String>,
    /// Read this process's CPU time (utime + stime, /proc/PID/stat) when the measured
    /// seconds start and when they end; the summary's `server_cpu_ticks` is the difference,
    /// in clock ticks (`getconf CLK_TCK`).
    #[arg(long)]
    server_pid: Option<u32>,
    #[command(flatten)]
    visible: VisibleArgs,
}

#[derive(Debug, Clone, clap::Args)]
struct Get {
    #[command(flatten)]
    target: TargetArgs,
    /// Path and query, e.g. /healthz or
    /// /api/v1/namespaces/argo/workflows/W/results?limit=1000.
    #[arg(long)]
    path: String,
    /// Sign one reader token with this RSA key (written by `keygen`) and send it with
    /// every request; without it, no token.
    #[arg(long)]
    key: Option<PathBuf>,
    /// Who the reader's token names (the server must grant it --reader).
    #[arg(long, default_value = "system:serviceaccount:argo:argo-server")]
    subject: String,
    /// Requests in flight at once (closed loop).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Each request on a fresh connection of its own, closed after its answer.
    #[arg(long)]
    fresh: bool,
    /// Measured time, in seconds.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Unmeasured time first, in seconds: connections open, caches fill.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// As for `run`: the server's CPU time over the measured seconds.
    #[arg(long)]
    server_pid: Option<u32>,
}

/// Where requests go.
#[derive(Debug, Clone, clap::Args)]
struct TargetArgs {
    /// The server, http://host:port or https://host:port.
    #[arg(long)]
    url: String,
    /// PEM certificates to trust for an https:// URL (the server's CA, as `certs` writes
    /// it).
    #[arg(long)]
    ca: Option<PathBuf>,
}

/// A server to connect to, over TLS or not.
#[derive(Clone)]
struct Target {
    /// host:port, for the Host header and to connect to.
    authority: HeaderValue,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

impl Target {
    fn new(args: &TargetArgs) -> Result<Target, Error> {
        let wrong = || format!("--url {} is not http(s)://host:port", args.url);
        let parsed: Uri = args.url.parse()?;
        let (Some(scheme), Some(authority), "/") =
            (parsed.scheme_str(), parsed.authority(), parsed.path())
        else {
            return Err(wrong().into());
        };
        if authority.port_u16().is_none() || authority.as_str().contains('@') {
            return Err(wrong().into());
        }
        let tls = match (scheme, &args.ca) {
            ("http", _) => None,
            ("https", Some(ca)) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(ca)? {
                    roots.add(cert?)?;
                }
                // Argo's wait container speaks Go's crypto/tls, which prefers
                // TLS_AES_128_GCM_SHA256 on hardware with AES (defaults.go,
                // defaultCipherSuitesTLS13); rustls prefers AES-256 with SHA-384, whose
                // key schedule costs both ends more. The server takes the client's order.
                let mut provider = rustls::crypto::aws_lc_rs::default_provider();
                provider.cipher_suites.sort_by_key(|suite| {
                    suite.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
                });
                let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
                    .with_safe_default_protocol_versions()?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                // Every wait container is a new process with no session to resume: each
                // connection pays the whole handshake, the certificate's signature too.
                config.resumption = rustls::client::Resumption::disabled();
                let name = ServerName::try_from(authority.host().to_owned())?;
                Some((TlsConnector::from(Arc::new(config)), name))
            }
            ("https", None) => return Err("an https:// --url needs --ca".into()),
            _ => return Err(wrong().into()),
        };
        Ok(Target {
            authority: HeaderValue::from_str(authority.as_str())?,
            tls,
        })
    }

    /// A new HTTP/1.1 connection, like a pod's own client: a lean client, so that the
    /// load generator leaves the cores to the server it measures. It ends with an error,
    /// with the server, or when its sender is dropped.
    async fn connect(&self) -> Result<Connection, Error> {
        let stream = tokio::net::TcpStream::connect(self.authority.to_str()?).await?;
        stream.set_nodelay(true)?;
        let Some((connector, name)) = &self.tls else {
            let (sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(connection);
            return Ok(sender);
        };
        let stream = connector.connect(name.clone(), stream).await?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(sender)
    }
}

fn main() -> Result<(), Error> {
    match Cli::parse().command {
        Command::Keygen { dir } => keygen(&dir),
        Command::Certs { dir } => certs(&dir),
        Command::Outputs => {
            println!("{}", argo_outputs());
            Ok(())
        }
        Command::Run(run) => print(load(run)),
        Command::Get(get) => print(load_get(get)),
        Command::List {
            reader,
            workflow,
            requests,
        } => print(list(reader, workflow, requests)),
        Command::CatchUp { reader, since } => print(catch_up(reader, since)),
    }
}

fn print<T: serde::Serialize>(
    work: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let summary = runtime.block_on(work)?;
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}

async fn list(reader: Reader, workflow: String, requests: u32) -> Result<serde_json::Value, Error> {
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

async fn catch_up(reader: Reader, since: i64) -> Result<serde_json::Value, Error> {
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

fn certs(dir: &std::path::Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir)?;
    let ca = TestCa::new("loadgen CA");
    std::fs::write(dir.join("ca.pem"), ca.pem())?;
    for (name, cert) in [("ecdsa", ca.server_cert()), ("rsa", ca.server_cert_rsa())] {
        std::fs::write(dir.join(format!("{name}.crt")), cert.cert_pem)?;
        std::fs::write(dir.join(format!("{name}.key")), cert.key_pem)?;
    }
    Ok(())
}

fn keygen(dir: &std::path::Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir)?;
    let pair = KeyPair::generate(KeySize::Rsa2048).map_err(|_| "cannot generate a key")?;
    let der = pair.as_der().map_err(|_| "cannot encode the key")?;
    let pem = pem_encode("PRIVATE KEY", der.as_ref());
    let mut jwk = Jwk::from_encoding_key(
        &EncodingKey::from_rsa_pem(pem.as_bytes())?,
        Algorithm::RS256,
    )?;
    jwk.common.key_id = Some(KID.to_owned());
    std::fs::write(dir.join("signing-key.pem"), &pem)?;
    std::fs::write(
        dir.join("jwks.json"),
        serde_json::to_string(&JwkSet { keys: vec![jwk] })?,
    )?;
    Ok(())
}

/// What one simulated pod needs: its node, its identity and its token.
struct Pod {
    path: String,
    workflow_uid: String,
    node_id: String,
    pod_name: String,
    pod_uid: String,
    authorization: HeaderValue,
}

/// One HTTP/1.1 connection of a worker ([`Target::connect`]).
type Connection = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

struct Generator {
    /// Pods 0, 1, ... with their tokens minted before the run.
    minted: Vec<Pod>,
    run: Run,
    run_id: String,
    signer: Signer,
    target: Target,
    outputs: String,
}

impl Generator {
    /// Workflow `k`: pods 0 to `nodes_per_workflow` - 1 are in workflow 0, and so on.
    fn workflow(&self, k: u64) -> WorkflowRef {
        let name = format!("{}-{k:05}", self.run_id);
        WorkflowRef {
            namespace: self.run.namespace.clone(),
            uid: format!("{name}-uid"),
            name,
        }
    }

    fn pod(&self, index: u64) -> Result<Pod, Error> {
        let WorkflowRef {
            name: workflow,
            uid: workflow_uid,
            ..
        } = self.workflow(index / self.run.nodes_per_workflow);
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
        let token = self.signer.sign(&claims)?;
        let authorization = HeaderValue::try_from(format!("Bearer {token}"))?;
        let node_id = format!("{workflow}-{hash}");
        Ok(Pod {
            path: format!(
                "/api/v1/namespaces/{}/workflows/{workflow}/nodes/{node_id}/result",
                self.run.namespace
            ),
            workflow_uid,
            node_id,
            pod_name,
            pod_uid,
            authorization,
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

    /// Sends report `n` of `pod` on `connection`; the status, as [`exchange`] gives it.
    async fn send(&self, connection: &mut Option<Connection>, pod: &Pod, n: u64) -> u16 {
        let request = self.report(pod, n).map_err(Error::from).and_then(|body| {
            Ok(Request::put(&pod.path)
                .header(HOST, &self.target.authority)
                .header(AUTHORIZATION, &pod.authorization)
                .header(CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body)))?)
        });
        exchange(connection, &self.target, request).await.0
    }
}

/// Sends one request on `connection` (opened or reopened as needed) and reads the whole
/// answer: its status and its body's length, or status 0 when none came: the request
/// could not be built or sent, or no answer within 30 s.
async fn exchange(
    connection: &mut Option<Connection>,
    target: &Target,
    request: Result<Request<Full<Bytes>>, Error>,
) -> (u16, u64) {
    let exchange = async {
        let request = request?;
        // A kept connection the server has closed fails `ready` before anything is sent:
        // the request goes on a new one.
        let mut kept = connection.take();
        if let Some(sender) = &mut kept
            && sender.ready().await.is_err()
        {
            kept = None;
        }
        let sender = match kept {
            Some(sender) => connection.insert(sender),
            None => {
                let mut fresh = target.connect().await?;
                fresh.ready().await?;
                connection.insert(fresh)
            }
        };
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        // Read the whole body, so that the connection can carry the next request; count
        // it without gathering it in one buffer.
        let mut body = response.into_body();
        let mut length = 0;
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                length += data.len() as u64;
            }
        }
        Ok::<_, Error>((status, length))
    };
    match tokio::time::timeout(Duration::from_secs(30), exchange).await {
        Ok(Ok(answer)) => answer,
        _ => {
            *connection = None;
            (0, 0)
        }
    }
}

/// The CPU time process `pid` spends from `from` to `to`, in clock ticks: a task that reads
/// it at both ends (nothing without a pid).
fn cpu_window(
    pid: Option<u32>,
    from: Instant,
    to: Instant,
) -> tokio::task::JoinHandle<Result<Option<u64>, Error>> {
    tokio::spawn(async move {
        let Some(pid) = pid else { return Ok(None) };
        tokio::time::sleep_until(from).await;
        let start = cpu_ticks(pid)?;
        tokio::time::sleep_until(to).await;
        Ok(Some(cpu_ticks(pid)?.saturating_sub(start)))
    })
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
    #[serde(skip_serializing_if = "Option::is_none")]
    reports_per_node: Option<u64>,
    duration_s: f64,
    requests: u64,
    errors: u64,
    rps: f64,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    outputs_bytes: Option<usize>,
    /// The mean length of the answers' bodies (`get`).
    #[serde(skip_serializing_if = "Option::is_none")]
    body_bytes: Option<u64>,
    statuses: BTreeMap<u16, u64>,
    /// The server's CPU time over the measured seconds, in clock ticks (`--server-pid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    server_cpu_ticks: Option<u64>,
    /// How soon a controller on another replica held each result (`--visible-via`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    visible: Option<VisibleSummary>,
}

impl Summary {
    /// The figures common to `run` and `get`: the workers' tallies put together.
    async fn gather(
        mode: &'static str,
        concurrency: usize,
        duration: u64,
        workers: Vec<tokio::task::JoinHandle<Tally>>,
    ) -> Result<Summary, Error> {
        let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
        let mut statuses = BTreeMap::new();
        let mut bytes = 0;
        for worker in workers {
            let tally = worker.await?;
            if let Some(histogram) = tally.latencies {
                latencies.add(histogram)?;
            }
            for (status, count) in tally.statuses {
                *statuses.entry(status).or_default() += count;
            }
            bytes += tally.bytes;
        }
        let requests: u64 = statuses.values().sum();
        let errors: u64 = statuses
            .iter()
            .filter(|(status, _)| !(200..300).contains(*status))
            .map(|(_, count)| count)
            .sum();
        let ms = |quantile: f64| latencies.value_at_quantile(quantile) as f64 / 1000.0;
        Ok(Summary {
            mode,
            concurrency,
            rate: None,
            reports_per_node: None,
            duration_s: duration as f64,
            requests,
            errors,
            rps: requests as f64 / duration as f64,
            p50_ms: ms(0.5),
            p90_ms: ms(0.9),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: latencies.max() as f64 / 1000.0,
            outputs_bytes: None,
            body_bytes: bytes.checked_div(requests),
            statuses,
            server_cpu_ticks: None,
            visible: None,
        })
    }
}

/// What one worker measured.
struct Tally {
    latencies: Option<Histogram<u64>>,
    statuses: BTreeMap<u16, u64>,
    /// Bytes of the answers' bodies.
    bytes: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            latencies: Histogram::new_with_bounds(1, 60_000_000, 3).ok(),
            statuses: BTreeMap::new(),
            bytes: 0,
        }
    }

    /// A request due at `due` answered `status`.
    fn record(&mut self, due: Instant, status: u16) {
        let micros = due.elapsed().as_micros();
        if let Some(histogram) = &mut self.latencies {
            histogram.saturating_record(u64::try_from(micros).unwrap_or(u64::MAX));
        }
        *self.statuses.entry(status).or_default() += 1;
    }
}

/// Mints the tokens of the first pods on every core, before the clock starts.
fn premint(generator: &Generator) -> Result<Vec<Pod>, Error> {
    let run = &generator.run;
    let count = run
        .premint
        .unwrap_or((run.warmup + run.duration) * 12_000 / run.reports_per_node);
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

async fn load(run: Run) -> Result<Summary, Error> {
    let signer = Signer::read(&run.key)?;
    let run_id = run.run_id.clone().unwrap_or_else(|| {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        format!("bench-{millis}")
    });
    let target = Target::new(&run.target)?;
    let mut generator = Generator {
        minted: Vec::new(),
        outputs: argo_outputs(),
        run: run.clone(),
        run_id,
        signer,
        target,
    };
    generator.minted = premint(&generator)?;
    let generator = Arc::new(generator);
    let next = Arc::new(AtomicU64::new(0));
    let visibility = Arc::new(Visibility::new()?);
    let following = match &run.visible.visible_via {
        Some(url) => {
            let claims = TokenClaims::user(
                ISSUER,
                AUDIENCE,
                &run.visible.follower_subject,
                Duration::from_secs(3600),
            );
            let (generator, next) = (Arc::clone(&generator), Arc::clone(&next));
            let follow = Follow {
                args: run.visible.clone(),
                url: url.clone(),
                ca: run.target.ca.clone(),
                token: generator.signer.sign(&claims)?,
                workflows: Box::new(move || {
                    let ahead = next.load(Ordering::Relaxed) + generator.run.concurrency as u64;
                    let count = ahead / generator.run.nodes_per_workflow + 1;
                    (0..count).map(|k| generator.workflow(k)).collect()
                }),
            };
            Some(Following::start(follow, Arc::clone(&visibility)).await?)
        }
        None => None,
    };
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(run.warmup);
    let end = measure_from + Duration::from_secs(run.duration);
    let cpu = cpu_window(run.server_pid, measure_from, end);
    // One schedule slot per request: a pod's reports are consecutive slots.
    let interval = run
        .rate
        .map(|rate| Duration::from_secs_f64(1.0 / rate.max(1) as f64));

    let workers: Vec<_> = (0..run.concurrency)
        .map(|_| {
            let (generator, next) = (Arc::clone(&generator), Arc::clone(&next));
            let visibility = following.as_ref().map(|_| Arc::clone(&visibility));
            tokio::spawn(async move {
                let mut tally = Tally::new();
                let per_pod = generator.run.reports_per_node;
                let mut connection = None;
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
                        let node = (pod.workflow_uid.clone(), pod.node_id.clone());
                        let watched = visibility.as_ref().filter(|_| n == per_pod);
                        if let Some(visibility) = watched {
                            visibility.sending(node.clone());
                        }
                        let status = generator.send(&mut connection, pod, n).await;
                        if let Some(visibility) = watched {
                            visibility.answered(&node, status, due >= measure_from);
                        }
                        if due >= measure_from {
                            tally.record(due, status);
                        }
                    }
                    if generator.run.fresh {
                        connection = None;
                    }
                }
            })
        })
        .collect();

    let mode = if run.rate.is_some() {
        "fixed_rate"
    } else {
        "closed_loop"
    };
    let summary = Summary::gather(mode, run.concurrency, run.duration, workers).await?;
    let visible = match following {
        Some(following) => Some(following.finish(&visibility).await?),
        None => None,
    };
    Ok(Summary {
        visible,
        rate: run.rate,
        reports_per_node: Some(run.reports_per_node),
        outputs_bytes: Some(generator.outputs.len()),
        // The stored results the server answers with: not what is measured.
        body_bytes: None,
        server_cpu_ticks: cpu.await??,
        ..summary
    })
}

/// `get`: `--concurrency` workers, each on its own keep-alive connection (or a fresh one
/// per request), send GET `--path` one after the other until the time is up.
async fn load_get(get: Get) -> Result<Summary, Error> {
    let target = Target::new(&get.target)?;
    let authorization = match &get.key {
        Some(key) => {
            let claims =
                TokenClaims::user(ISSUER, AUDIENCE, &get.subject, Duration::from_secs(600));
            let token = Signer::read(key)?.sign(&claims)?;
            Some(HeaderValue::try_from(format!("Bearer {token}"))?)
        }
        None => None,
    };
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(get.warmup);
    let end = measure_from + Duration::from_secs(get.duration);
    let cpu = cpu_window(get.server_pid, measure_from, end);
    let workers: Vec<_> = (0..get.concurrency)
        .map(|_| {
            let (path, target, authorization, fresh) = (
                get.path.clone(),
                target.clone(),
                authorization.clone(),
                get.fresh,
            );
            tokio::spawn(async move {
                let mut tally = Tally::new();
                let mut connection = None;
                loop {
                    let due = Instant::now();
                    if due >= end {
                        return tally;
                    }
                    let mut request = Request::get(path.as_str()).header(HOST, &target.authority);
                    if let Some(authorization) = &authorization {
                        request = request.header(AUTHORIZATION, authorization);
                    }
                    let request = request.body(Full::default()).map_err(Error::from);
                    let (status, bytes) = exchange(&mut connection, &target, request).await;
                    if due >= measure_from {
                        tally.record(due, status);
                        tally.bytes += bytes;
                    }
                    if fresh {
                        connection = None;
                    }
                }
            })
        })
        .collect();
    let summary = Summary::gather("get", get.concurrency, get.duration, workers).await?;
    Ok(Summary {
        server_cpu_ticks: cpu.await??,
        ..summary
    })
}
