//! Prometheus metrics, served on `/metrics` in the OpenMetrics text format.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::auth::Reason;
use crate::store::Pruned;

/// What became of a report; never a node ID or other unbounded value.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum ReportOutcome {
    created,
    updated,
    replayed,
    refused,
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
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: &'static str,
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reports: Family<OutcomeLabels, Counter>,
    auth_failures: Family<ReasonLabels, Counter>,
    retention_deleted: Family<KindLabels, Counter>,
    watchers: Gauge,
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
            "Rows removed by retention: kind=results (unchanged too long) or changes (feed history)",
            retention_deleted.clone(),
        );
        let watchers = Gauge::default();
        registry.register(
            "feed_watchers",
            "Feed requests waiting for a change (watch=true)",
            watchers.clone(),
        );
        Metrics {
            registry,
            reports,
            auth_failures,
            retention_deleted,
            watchers,
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

    pub fn retained(&self, pruned: Pruned) {
        for (kind, count) in [("results", pruned.results), ("changes", pruned.changes)] {
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

    pub fn report(&self, outcome: ReportOutcome) {
        self.reports.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
