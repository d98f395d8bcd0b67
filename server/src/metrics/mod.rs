//! Prometheus metrics, served on `/metrics` in the OpenMetrics text format: the server's,
//! prefixed `argo_results_`, and the process's ([`process`]).

pub mod process;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::auth::Reason;

/// What became of a report that reached the store; never a node ID or other unbounded
/// value. (The label values are the variants' names, hence their case.)
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum ReportOutcome {
    created,
    updated,
    replayed,
    /// `stale_sequence`.
    stale,
    /// `already_completed`: a write to a frozen result.
    conflict,
    pod_mismatch,
    /// `not_expected`: no expectation names the reporting pod.
    not_expected,
    /// Any other refusal or failure.
    refused,
}

impl ReportOutcome {
    const ALL: [ReportOutcome; 8] = [
        ReportOutcome::created,
        ReportOutcome::updated,
        ReportOutcome::replayed,
        ReportOutcome::stale,
        ReportOutcome::conflict,
        ReportOutcome::pod_mismatch,
        ReportOutcome::not_expected,
        ReportOutcome::refused,
    ];
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: ReportOutcome,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

/// The `state` labels of `argo_results_db_pool_connections`.
const POOL: [&str; 2] = ["idle", "in_use"];

/// The `state` labels of `argo_results_results_pending`.
const PENDING: [&str; 2] = ["expected", "reporting"];

/// The `kind` labels of `argo_results_retention_deleted_total`.
const RETAINED: [&str; 3] = ["results", "changes", "claims"];

/// Request durations from 1 ms to 30 s (long polls land in the last buckets).
const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: &'static str,
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// The process's series, named as every client library names them (no prefix).
    process: Registry,
    pool_connections: Family<StateLabels, Gauge>,
    pool_max: Gauge,
    reports: Family<OutcomeLabels, Counter>,
    auth_failures: Family<ReasonLabels, Counter>,
    retention_deleted: Family<KindLabels, Counter>,
    watchers: Gauge,
    requests: Family<RequestLabels, Counter>,
    durations: Family<RouteLabels, Histogram>,
    pending: Family<StateLabels, Gauge>,
    commits: Histogram,
    store_durations: Histogram,
    store_errors: Family<KindLabels, Counter>,
    batches: Histogram,
    connections: Family<ListenerLabels, Gauge>,
    connections_refused: Family<ListenerLabels, Counter>,
    connections_evicted: Family<ListenerLabels, Counter>,
    feed_head: Gauge,
    controller_revision: Gauge,
    controller_read_at: Gauge,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

/// Counts one waiting feed request for as long as it lives.
#[derive(Debug)]
pub struct Watching(Gauge);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("argo_results");
        let build_info = Family::<VersionLabels, Gauge>::default();
        build_info
            .get_or_create(&VersionLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("build_info", "Version of the running server", build_info);
        let reports = Family::<OutcomeLabels, Counter>::default();
        registry.register("reports", "Reports received, by outcome", reports.clone());
        let auth_failures = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "auth_failures",
            "Requests refused by authentication or authorization, by reason",
            auth_failures.clone(),
        );
        let retention_deleted = Family::<KindLabels, Counter>::default();
        registry.register(
            "retention_deleted",
            "Rows removed by retention: kind=results (unchanged too long), changes (feed history) or claims (cron run claims)",
            retention_deleted.clone(),
        );
        let watchers = Gauge::default();
        registry.register(
            "feed_watchers",
            "Feed requests waiting for a change (watch=true)",
            watchers.clone(),
        );
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by route template, method and status",
            requests.clone(),
        );
        let durations = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(DURATION_BUCKETS)
        });
        registry.register(
            "http_request_duration_seconds",
            "Time from request to answer, by route template; the feed's long polls \
             (watch=true), which wait for a change by design, are not timed",
            durations.clone(),
        );
        let pending = Family::<StateLabels, Gauge>::default();
        registry.register(
            "results_pending",
            "Results not finished (expected, reporting), as of the last retention pass",
            pending.clone(),
        );
        let commits = Histogram::new(DURATION_BUCKETS);
        registry.register(
            "report_commit_duration_seconds",
            "Time from a report's arrival to its commit",
            commits.clone(),
        );
        let store_durations = Histogram::new(DURATION_BUCKETS);
        registry.register(
            "store_transaction_duration_seconds",
            "Time a caller waits for each store operation (a write's shared transaction, or one snapshot read)",
            store_durations.clone(),
        );
        let store_errors = Family::<KindLabels, Counter>::default();
        registry.register(
            "store_errors",
            "Store operations that failed: unavailable, database, migrate, corrupt",
            store_errors.clone(),
        );
        let batches = Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0]);
        registry.register(
            "store_batch_writes",
            "Writes decided together in one transaction (group commit)",
            batches.clone(),
        );
        let connections = Family::<ListenerLabels, Gauge>::default();
        registry.register(
            "http_connections",
            "Connections open, by listener (api, metrics)",
            connections.clone(),
        );
        let connections_refused = Family::<ListenerLabels, Counter>::default();
        registry.register(
            "http_connections_refused",
            "Connections closed on arrival because --max-open-connections were open and in use, \
             or their peer held --max-connections-per-peer or opened TLS connections faster \
             than --max-tls-handshakes-per-peer, by listener",
            connections_refused.clone(),
        );
        let connections_evicted = Family::<ListenerLabels, Counter>::default();
        registry.register(
            "http_connections_evicted",
            "Connections never used, closed to make room for a new one at \
             --max-open-connections, by listener",
            connections_evicted.clone(),
        );
        let feed_head = Gauge::default();
        registry.register(
            "feed_head_revision",
            "Newest committed feed revision this replica knows (as of the scrape)",
            feed_head.clone(),
        );
        let controller_revision = Gauge::default();
        registry.register(
            "controller_feed_revision",
            "Revision up to which this replica last answered a feed read by a controller \
             (a caller allowed to register expectations); 0 until one",
            controller_revision.clone(),
        );
        let controller_read_at = Gauge::default();
        registry.register(
            "controller_last_read_timestamp_seconds",
            "Unix time this replica last answered a feed read by a controller; 0 until one",
            controller_read_at.clone(),
        );
        // Every series with known labels exists from the start, at zero: a healthy
        // server's panels and alerts read 0, not "No data".
        for outcome in ReportOutcome::ALL {
            let _ = reports.get_or_create(&OutcomeLabels { outcome });
        }
        for reason in Reason::ALL {
            let _ = auth_failures.get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            });
        }
        for kind in RETAINED {
            let _ = retention_deleted.get_or_create(&KindLabels { kind });
        }
        for state in PENDING {
            let _ = pending.get_or_create(&StateLabels { state });
        }
        let mut process = Registry::default();
        process.register_collector(Box::new(process::Process::new()));
        let pool_connections = Family::<StateLabels, Gauge>::default();
        registry.register(
            "db_pool_connections",
            "Connections of the requests' database pool, by state (idle, in_use)",
            pool_connections.clone(),
        );
        let pool_max = Gauge::default();
        registry.register(
            "db_pool_max_connections",
            "Connections the requests' database pool may open (--max-connections)",
            pool_max.clone(),
        );
        for state in POOL {
            let _ = pool_connections.get_or_create(&StateLabels { state });
        }
        Metrics {
            registry,
            process,
            pool_connections,
            pool_max,
            feed_head,
            controller_revision,
            controller_read_at,
            batches,
            connections,
            connections_refused,
            connections_evicted,
            reports,
            auth_failures,
            retention_deleted,
            watchers,
            requests,
            durations,
            pending,
            commits,
            store_durations,
            store_errors,
        }
    }

    /// Counts a refused request; `None` (the deciding service was unreachable) is not one.
    pub fn auth_failure(&self, reason: Option<Reason>) {
        if let Some(reason) = reason {
            self.auth_failures
                .get_or_create(&ReasonLabels {
                    reason: reason.as_str(),
                })
                .inc();
        }
    }

    /// A request answered; `took` is `None` for a long poll, whose wait says nothing of
    /// how fast the server answers.
    pub fn http_request(
        &self,
        route: &str,
        method: &str,
        status: u16,
        took: Option<std::time::Duration>,
    ) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_owned(),
                method: method.to_owned(),
                status,
            })
            .inc();
        if let Some(took) = took {
            self.durations
                .get_or_create(&RouteLabels {
                    route: route.to_owned(),
                })
                .observe(took.as_secs_f64());
        }
    }

    pub fn pending(&self, expected: u64, reporting: u64) {
        for (state, count) in PENDING.into_iter().zip([expected, reporting]) {
            self.pending
                .get_or_create(&StateLabels { state })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    /// The store's failure kinds, each exported at zero from now on (the store names them:
    /// `store::FailureKind`).
    pub fn seed_store_failures(&self, kinds: impl IntoIterator<Item = &'static str>) {
        for kind in kinds {
            let _ = self.store_errors.get_or_create(&KindLabels { kind });
        }
    }

    /// A store operation took `took`, and failed with `failure` if it did.
    pub fn store_operation(&self, took: std::time::Duration, failure: Option<&'static str>) {
        self.store_durations.observe(took.as_secs_f64());
        if let Some(kind) = failure {
            self.store_errors.get_or_create(&KindLabels { kind }).inc();
        }
    }

    /// One transaction decided `writes` writes.
    pub fn batch_decided(&self, writes: usize) {
        self.batches.observe(writes as f64);
    }

    /// A report committed `took` after it arrived.
    pub fn report_committed(&self, took: std::time::Duration) {
        self.commits.observe(took.as_secs_f64());
    }

    /// One retention pass deleted these results, feed changes and cron claims.
    pub fn retained(&self, results: u64, changes: u64, claims: u64) {
        for (kind, count) in RETAINED.into_iter().zip([results, changes, claims]) {
            self.retention_deleted
                .get_or_create(&KindLabels { kind })
                .inc_by(count);
        }
    }

    /// Marks a feed request as waiting until the returned guard is dropped.
    pub fn watching(&self) -> Watching {
        self.watchers.inc();
        Watching(self.watchers.clone())
    }

    /// The gauge of connections open on `listener`; its counters start at zero.
    pub fn connections(&self, listener: &'static str) -> Gauge {
        let labels = ListenerLabels { listener };
        let _ = self.connections_refused.get_or_create(&labels);
        let _ = self.connections_evicted.get_or_create(&labels);
        self.connections
            .get_or_create(&ListenerLabels { listener })
            .clone()
    }

    pub fn connection_refused(&self, listener: &'static str) {
        self.connections_refused
            .get_or_create(&ListenerLabels { listener })
            .inc();
    }

    pub fn connection_evicted(&self, listener: &'static str) {
        self.connections_evicted
            .get_or_create(&ListenerLabels { listener })
            .inc();
    }

    /// The newest revision this replica knows, set before each scrape.
    /// The requests' pool holds `open` connections, `idle` of them unused, of at most
    /// `max`.
    pub fn db_pool(&self, open: u32, idle: usize, max: u32) {
        let idle = i64::try_from(idle).unwrap_or(i64::MAX);
        let set = |state, value: i64| {
            self.pool_connections
                .get_or_create(&StateLabels { state })
                .set(value);
        };
        set("idle", idle);
        set("in_use", (i64::from(open) - idle).max(0));
        self.pool_max.set(i64::from(max));
    }

    pub fn feed_head(&self, revision: i64) {
        self.feed_head.set(revision);
    }

    /// A controller's feed read was answered up to `revision`.
    pub fn controller_read(&self, revision: i64) {
        self.controller_revision.set(revision);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        self.controller_read_at
            .set(i64::try_from(now).unwrap_or(i64::MAX));
    }

    pub fn report(&self, outcome: ReportOutcome) {
        self.reports.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    pub fn encode(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode_registry(&mut text, &self.registry);
        let _ = encode_registry(&mut text, &self.process);
        let _ = encode_eof(&mut text);
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
