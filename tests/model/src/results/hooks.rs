//! Where the product's behaviour can be swapped for a broken one.

use argo_results_client::controller::{Decision, PodPhase};
use argo_results_proto::NodeResult;
use argo_results_rules::feed::FeedBounds;
use argo_results_rules::{Expectation, Refusal, Rejected, Report, ReportPolicy, Row, Written};

use super::{POLICY, PodView};

/// Where the product's behaviour can be swapped for a broken one: the negative controls
/// (`tests/controls.rs`) do, to show that the checker then finds a counterexample.
#[derive(Clone, Copy)]
pub struct Hooks {
    /// Where a feed reader goes on after a read (the product: `feed::next_since`).
    pub feed_rule: fn(i64, Option<&str>, &FeedBounds) -> Result<i64, Refusal>,
    /// Whether the controller carries out the settle that `decide` asks for, given what
    /// the pod informer shows (the product: always).
    pub settles: fn(&PodView) -> bool,
    /// The server answers a report when it is received, before the commit.
    pub ack_before_commit: bool,
    /// Applied to a stored row before a report is decided on it (the product: nothing).
    pub before_report: fn(&mut Row, &Report),
    /// Applied to a stored row and to the controller's expectation before it is decided
    /// on the row (the product: nothing).
    pub before_expect: fn(&mut Row, &mut Expectation),
    /// The controller's decision on a node from its pod and its result as known (the
    /// product: `controller::decide`).
    pub decide: fn(PodPhase, Option<&NodeResult>) -> Decision,
    /// How the store judges reports (the product: `server::POLICY`, as deployed).
    pub policy: ReportPolicy,
    /// Whether the server answers a report's outcome 2xx (the product: when it is `Ok`).
    pub answers_ok: fn(&Report, &Result<Written, Rejected>) -> bool,
    /// A deletion leaves a tombstone in the feed for each result (the product: yes).
    pub tombstones: bool,
    /// A container's `wait` may send progress after its final report took its sequence
    /// (the product: no, `Reporter.Progress`).
    pub progress_after_final: bool,
    /// The controller passes over the workflow again after an error, as Argo requeues it,
    /// and decides every node it can (the product: yes; Argo's settle sites as first
    /// written ran once, on the pod's change).
    pub requeues: bool,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("ack_before_commit", &self.ack_before_commit)
            .field("policy", &self.policy.require_expectation)
            .field("tombstones", &self.tombstones)
            .field("progress_after_final", &self.progress_after_final)
            .field("requeues", &self.requeues)
            .finish_non_exhaustive()
    }
}

impl Hooks {
    /// The product as it is.
    pub fn product() -> Self {
        Hooks {
            feed_rule: argo_results_rules::feed::next_since,
            settles: |_| true,
            ack_before_commit: false,
            before_report: |_, _| {},
            before_expect: |_, _| {},
            decide: argo_results_client::controller::decide,
            policy: POLICY,
            answers_ok: |_, outcome| outcome.is_ok(),
            tombstones: true,
            progress_after_final: false,
            requeues: true,
        }
    }
}
