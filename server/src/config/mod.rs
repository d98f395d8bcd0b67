//! Command-line flags; each also reads `ARGO_RESULTS_<FLAG>` (`DATABASE_URL` for the store).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::store::Batching;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthMode {
    /// Validate tokens: with --jwks-file when given, else (on loopback) with a dev key.
    Tokens,
    /// No authentication at all. Loopback only; for experiments.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// What the process's exit status says, in `--help`.
const EXIT_CODES: &str = "\
Exit status:
  0  stopped by SIGTERM or SIGINT after finishing in-flight requests
  1  could not start: the message says why (flags, keys, TLS files, address in use, ...)
  2  the flags are wrong (usage)
  3  the database did not take a connection within --database-wait
  4  the database's migrations failed (the role may not create in the schema, a schema
     changed by hand, a recorded migration modified)";

/// Stores Argo Workflows' step results in Postgres or SQLite and serves them to the
/// controller, the wait containers and admins.
///
/// With no flags: SQLite `argo-results.db` in the data directory, 127.0.0.1:8080, dev auth.
///
/// Example (production):
///   argo-results-server --database-url postgres://argo-results@db/argo-results \
///     --listen 0.0.0.0:8080 --kube-jwks \
///     --controller system:serviceaccount:argo:argo \
///     --reader system:serviceaccount:argo:argo-results-admin
#[derive(Debug, Clone, Parser)]
#[command(name = "argo-results-server", version, verbatim_doc_comment, after_help = EXIT_CODES)]
pub struct Config {
    /// `postgres://...` or `sqlite://PATH` [default: sqlite://<data-dir>/argo-results.db]
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,

    /// How long to wait at start for a Postgres database that does not take connections
    /// yet (down, starting, not yet in DNS); each attempt is logged. Probes answer
    /// meanwhile, /readyz 503.
    #[arg(long, env = "ARGO_RESULTS_DATABASE_WAIT", default_value = "5m",
          value_parser = duration_between(ZERO, 24 * HOUR))]
    pub database_wait: Duration,

    /// Address to listen on; port 0 picks a free port (printed at start).
    #[arg(long, env = "ARGO_RESULTS_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Also serve /metrics, /healthz and /readyz over plain HTTP on this address (for
    /// Prometheus and kubelet probes when the API listens with TLS).
    #[arg(long, env = "ARGO_RESULTS_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Where the embedded default keeps its SQLite file and dev signing key.
    #[arg(long, env = "ARGO_RESULTS_DATA_DIR", default_value = ".")]
    pub data_dir: PathBuf,

    /// Serve HTTPS with this PEM certificate chain (re-read when it changes).
    #[arg(long, env = "ARGO_RESULTS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, env = "ARGO_RESULTS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Time a client has to send a request's headers, from the connection's start (or the
    /// TLS handshake's) or from the previous answer: an idle HTTP/1.1 keep-alive
    /// connection is closed after this too.
    #[arg(long, env = "ARGO_RESULTS_HEADER_TIMEOUT", default_value = "10s",
          value_parser = duration_between(SECOND, 10 * MINUTE))]
    pub header_timeout: Duration,

    /// A connection with no request in flight for this long is closed (HTTP/2; over
    /// HTTP/1.1 --header-timeout comes first). An answer must be read within it.
    #[arg(long, env = "ARGO_RESULTS_IDLE_TIMEOUT", default_value = "60s",
          value_parser = duration_between(SECOND, 24 * HOUR))]
    pub idle_timeout: Duration,

    /// Connections open at once on the API address; more are closed as they arrive. The
    /// --metrics-listen address takes at most 64 of its own.
    #[arg(long, env = "ARGO_RESULTS_MAX_OPEN_CONNECTIONS", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_open_connections: u32,

    /// Connections open at once from one address [default: half of
    /// --max-open-connections]. Behind a proxy or a SNAT that gives every client one
    /// address, raise it to --max-open-connections.
    #[arg(long, env = "ARGO_RESULTS_MAX_CONNECTIONS_PER_PEER",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections_per_peer: Option<u32>,

    /// Trust the keys of this JWKS file (offline validation of service-account tokens).
    #[arg(long, env = "ARGO_RESULTS_JWKS_FILE")]
    pub jwks_file: Option<PathBuf>,

    /// Trust the cluster's service-account keys, fetched through the Kubernetes API
    /// (in-cluster config or KUBECONFIG) and refreshed as the cluster rotates them.
    #[arg(long, env = "ARGO_RESULTS_KUBE_JWKS", conflicts_with_all = ["jwks_file", "token_review"])]
    pub kube_jwks: bool,

    /// Validate tokens with the Kubernetes TokenReview API instead (answers cached).
    #[arg(long, env = "ARGO_RESULTS_TOKEN_REVIEW", conflicts_with = "jwks_file")]
    pub token_review: bool,

    /// Decide reader and controller rights with SubjectAccessReview on
    /// argoproj.io/workflowtaskresults instead of --reader / --controller.
    #[arg(long, env = "ARGO_RESULTS_RBAC", conflicts_with_all = ["readers", "controllers"])]
    pub rbac: bool,

    /// Accept writes with service-account tokens bound to no pod (Argo's
    /// executor.serviceAccountName) where RBAC allows create on workflowtaskresults.
    #[arg(long, env = "ARGO_RESULTS_ALLOW_UNBOUND_EXECUTOR_TOKENS")]
    pub allow_unbound_executor_tokens: bool,

    /// TokenReviews and SubjectAccessReviews sent per second at most, in bursts of twice
    /// as many and 16 at once; a request that would wait more than a second for its turn
    /// answers 503 with Retry-After.
    #[arg(long, env = "ARGO_RESULTS_KUBE_API_QPS", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub kube_api_qps: u32,

    /// Required `iss` of tokens. Required with --jwks-file unless --any-issuer is given;
    /// --kube-jwks learns it from the cluster's OIDC discovery when unset.
    #[arg(long, env = "ARGO_RESULTS_ISSUER")]
    pub issuer: Option<String>,

    /// Accept tokens of any issuer (`iss` must still be present): with --jwks-file, trust
    /// whoever the JWKS's keys sign for; with --kube-jwks, also the cluster's former
    /// issuers.
    #[arg(long, env = "ARGO_RESULTS_ANY_ISSUER", conflicts_with = "issuer")]
    pub any_issuer: bool,

    /// Required `aud` of tokens.
    #[arg(long, env = "ARGO_RESULTS_AUDIENCE", default_value = argo_results_proto::token::DEFAULT_AUDIENCE)]
    pub audience: String,

    /// Longest a token verified by its signature may live (`exp` - `iat`). The default
    /// admits every token Kubernetes issues, including projected tokens its API server
    /// extends to a year (--service-account-extend-token-expiration).
    #[arg(long, env = "ARGO_RESULTS_MAX_TOKEN_LIFETIME", default_value = "400d",
          value_parser = duration_between(MINUTE, 3650 * DAY))]
    pub max_token_lifetime: Duration,

    /// Clock skew tolerated on a token's `exp`, `nbf` and `iat`, at most 5m.
    #[arg(long, env = "ARGO_RESULTS_CLOCK_LEEWAY", default_value = "30s",
          value_parser = duration_between(ZERO, 5 * MINUTE))]
    pub clock_leeway: Duration,

    /// Subject allowed to read everything; repeatable (env: comma-separated).
    #[arg(long = "reader", env = "ARGO_RESULTS_READER", value_delimiter = ',')]
    pub readers: Vec<String>,

    /// Subject allowed to read and to perform controller operations; repeatable.
    #[arg(
        long = "controller",
        env = "ARGO_RESULTS_CONTROLLER",
        value_delimiter = ','
    )]
    pub controllers: Vec<String>,

    /// Pods may report only the nodes the controller registered for them (an expectation
    /// naming the pod), so no pod can win a race for another's node or invent a workflow
    /// incarnation [default: on with --jwks-file, --kube-jwks or --token-review; off with
    /// dev auth and --auth none, where the first pod to report binds the result].
    #[arg(
        long,
        env = "ARGO_RESULTS_REQUIRE_EXPECTATION",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub require_expectation: Option<bool>,

    /// `none` turns authentication off (refused unless listening on loopback).
    #[arg(long, env = "ARGO_RESULTS_AUTH", value_enum, default_value = "tokens")]
    pub auth: AuthMode,

    /// Keep the change feed's history this long (e.g. 24h); older `since` answer 410.
    #[arg(long, env = "ARGO_RESULTS_FEED_RETENTION", default_value = "24h",
          value_parser = duration_between(SECOND, 3650 * DAY))]
    pub feed_retention: Duration,

    /// Remove results unchanged for this long (e.g. 7d), deleted workflows or not.
    #[arg(long, env = "ARGO_RESULTS_RESULT_RETENTION", default_value = "7d",
          value_parser = duration_between(SECOND, 3650 * DAY))]
    pub result_retention: Duration,

    /// Remove settled cron claims taken this long ago (e.g. 30d), except each cron
    /// workflow's newest settled one, and claims whose lease expired unsettled this long ago.
    #[arg(long, env = "ARGO_RESULTS_CLAIM_RETENTION", default_value = "30d",
          value_parser = duration_between(SECOND, 3650 * DAY))]
    pub claim_retention: Duration,

    /// Give the store a new epoch at start, so that every feed reader lists again instead
    /// of reading on (`410 gone`): start once with it after restoring the database from a
    /// backup. On Postgres a restore into another cluster, onto another timeline or by
    /// pg_restore is noticed without it.
    #[arg(long, env = "ARGO_RESULTS_NEW_EPOCH")]
    pub new_epoch: bool,

    /// How often the retention pass runs.
    #[arg(long, env = "ARGO_RESULTS_RETENTION_EVERY", default_value = "1m",
          value_parser = duration_between(Duration::from_millis(100), 24 * HOUR))]
    pub retention_every: Duration,

    /// On SIGTERM or SIGINT, how long in-flight requests may take to finish before their
    /// connections are closed (an unfinished write is rolled back, never acknowledged).
    #[arg(long, env = "ARGO_RESULTS_SHUTDOWN_GRACE", default_value = "20s",
          value_parser = duration_between(ZERO, HOUR))]
    pub shutdown_grace: Duration,

    /// Largest request body accepted: 2 MiB by default, so that any outputs a
    /// WorkflowTaskResult holds today (etcd's 1.5 MiB object limit) fit.
    #[arg(long, env = "ARGO_RESULTS_MAX_BODY_BYTES", default_value_t = 2 << 20,
          value_parser = count_between(KIB, 256 * MIB))]
    pub max_body_bytes: usize,

    /// Time a client has to send a request's body once its headers arrived; past it the
    /// request is answered 408 request_timeout.
    #[arg(long, env = "ARGO_RESULTS_BODY_TIMEOUT", default_value = "10s",
          value_parser = duration_between(SECOND, 10 * MINUTE))]
    pub body_timeout: Duration,

    /// Bytes of request bodies held in memory at once, across requests; a body that would
    /// pass it is answered 429 overloaded.
    #[arg(long, env = "ARGO_RESULTS_MAX_BODY_MEMORY", default_value_t = 64 << 20,
          value_parser = count_between(KIB, TIB))]
    pub max_body_memory: usize,

    /// Bytes of answers being built or sent at once, across requests: each is held until
    /// its client has taken it, and a page reserves 16 MiB while it is built (so at least
    /// that); an answer that would pass it is answered 429 overloaded.
    #[arg(long, env = "ARGO_RESULTS_MAX_ANSWER_MEMORY", default_value_t = 64 << 20,
          value_parser = count_between(PAGE, TIB))]
    pub max_answer_memory: usize,

    /// Largest `outputs.result` accepted (Argo's executor keeps 256 KiB).
    #[arg(long, env = "ARGO_RESULTS_MAX_RESULT_BYTES", default_value_t = 256 << 10,
          value_parser = count_between(KIB, 256 * MIB))]
    pub max_result_bytes: usize,

    /// Bytes of results one pod may change per hour, each change counted at the stored
    /// result's size (the feed keeps a copy of each); past it the pod's reports answer 429
    /// until its budget refills [default: 8 x --max-body-bytes, 16 MiB].
    #[arg(long, env = "ARGO_RESULTS_POD_WRITE_BUDGET", value_parser = count_between(KIB, TIB))]
    pub pod_write_budget: Option<usize>,

    /// Database connections in the pool.
    #[arg(long, env = "ARGO_RESULTS_MAX_CONNECTIONS", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_connections: u32,

    /// Writes committed together in one transaction at most (group commit); 1 commits
    /// each write alone.
    #[arg(long, env = "ARGO_RESULTS_BATCH_MAX", default_value_t = 128,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub batch_max: u16,

    /// How long a write that finds the writer idle waits for others to join its
    /// transaction (at most 1s), only when the write before it came less than that long
    /// before it (a lone write goes at once); writes queued behind a transaction go at
    /// once.
    #[arg(long, env = "ARGO_RESULTS_BATCH_WAIT", default_value = "2ms",
          value_parser = duration_between(ZERO, SECOND))]
    pub batch_wait: Duration,

    /// Print the OpenAPI document of this server's API and exit.
    #[arg(long)]
    pub openapi: bool,

    /// Print, as ClusterRoles, the RBAC that --rbac checks, and exit.
    #[arg(long)]
    pub print_rbac_rules: bool,

    /// API requests served at once; the excess answers 429 overloaded with Retry-After
    /// [default: 32 per database connection]. Waiting watches do not count.
    #[arg(long, env = "ARGO_RESULTS_MAX_IN_FLIGHT", value_parser = count_between(1, 1_000_000))]
    pub max_in_flight: Option<usize>,

    /// Feed requests waiting for a change at once (watch=true); more are answered 429.
    #[arg(long, env = "ARGO_RESULTS_MAX_WATCHES", default_value_t = 128,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_watches: u32,

    /// Log lines as text or as one JSON object per line (then the lines printed at start,
    /// on stdout, are JSON objects too).
    #[arg(
        long,
        env = "ARGO_RESULTS_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

const ZERO: Duration = Duration::ZERO;
const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);
const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const TIB: u64 = 1 << 40;
/// What one page reserves of `--max-answer-memory` (`http/answers.rs`, `PAGE_BYTES`): less
/// would refuse every list.
const PAGE: u64 = 16 * MIB;

/// A duration from `min` to `max`. Every duration flag has its range: zero where zero
/// means nothing (a timeout, a retention pass without pause), and no more than any use
/// could want, so that a typo stops the server at start (exit 2, the flag named) rather
/// than runs it broken.
fn duration_between(
    min: Duration,
    max: Duration,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |text| {
        let duration = parse_duration(text)?;
        if duration < min {
            return Err(format!("{text:?} is shorter than {}", shown(min)));
        }
        if duration > max {
            return Err(format!("{text:?} is longer than {}", shown(max)));
        }
        Ok(duration)
    }
}

/// A count, or a size in bytes, from `min` to `max`, as every such flag takes it.
fn count_between(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(min..=max)
}

/// A duration as the flags write it, in its largest whole unit.
fn shown(duration: Duration) -> String {
    let millis = duration.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if millis > 0 && millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

/// A duration such as `500ms`, `90s`, `15m`, `24h`, `7d` or `1h30m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("{text:?} is not a duration like 90s, 15m, 24h or 7d");
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(invalid)?;
        let number: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86_400),
            _ => return Err(invalid()),
        };
        total += unit * u32::try_from(number).map_err(|_| invalid())?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

impl Config {
    /// A read holds a connection for milliseconds and a write waits for one shared
    /// commit, so 32 waiting per connection stay far inside the 3 s in which an outage
    /// is answered, while a real overload is still shed.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
            .unwrap_or(self.max_connections as usize * 32)
    }

    pub fn pod_write_budget(&self) -> usize {
        self.pod_write_budget
            .unwrap_or(self.max_body_bytes.saturating_mul(8))
    }

    pub fn batching(&self) -> Batching {
        Batching {
            max: usize::from(self.batch_max),
            wait: self.batch_wait,
        }
    }

    pub fn database_url(&self) -> String {
        self.database_url.clone().unwrap_or_else(|| {
            format!(
                "sqlite://{}",
                self.data_dir.join("argo-results.db").display()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{SECOND, ZERO, duration_between, parse_duration, shown};
    use std::time::Duration;

    #[test]
    fn durations_read_like_kubernetes_flags() {
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "10", "h", "5x", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        let batch_wait = duration_between(ZERO, SECOND);
        assert_eq!(batch_wait("0ms"), Ok(Duration::ZERO));
        assert_eq!(batch_wait("2s"), Err("\"2s\" is longer than 1s".to_owned()));
        assert_eq!(shown(Duration::from_secs(3650 * 86_400)), "3650d");
        assert_eq!(shown(Duration::from_millis(100)), "100ms");
        assert_eq!(shown(Duration::ZERO), "0ms");
    }
}
