//! What one pod may change: `--pod-write-budget` bytes of results an hour, refilled
//! continuously. Each change a pod's report makes costs the size of the stored result,
//! since the feed keeps a copy of the whole result at each change for `--feed-retention`:
//! a pod rewriting a megabyte of outputs over and over would otherwise fill the database.
//! A replay, or a report refused once merged, stores nothing but cost the writer its merge,
//! and costs its own size.
//! `--require-expectation` already keeps a pod to the rows registered for it; this keeps
//! it from churning them. A real wait container reports its outputs once or twice and its
//! progress once a minute (Argo's `ARGO_PROGRESS_PATCH_TICK_DURATION`), far within it.

use std::collections::HashMap;
use std::sync::Mutex;

use argo_results_proto::NodeResult;

use crate::rate::Bucket;

/// Pods remembered at once; past it, those whose budget is whole again are forgotten.
const PODS_REMEMBERED: usize = 10_000;
/// What a change costs besides its outputs and message: the other fields, and the row.
const CHANGE_OVERHEAD: usize = 1024;

#[derive(Debug)]
pub struct PodWrites {
    budgets: Mutex<HashMap<String, Bucket>>,
    per_hour: usize,
}

impl PodWrites {
    pub fn new(per_hour: usize) -> Self {
        PodWrites {
            budgets: Mutex::new(HashMap::new()),
            per_hour,
        }
    }

    pub fn per_hour(&self) -> usize {
        self.per_hour
    }

    /// Reserves a change of `outputs` and `message` from the budget of the pod with UID
    /// `pod` before it is written, so that writes in flight at once cannot all pass the
    /// check and spend it several times over; `None` when nothing is left (a write may take
    /// it into debt by its own size).
    pub fn reserve(
        &self,
        pod: &str,
        outputs: Option<&str>,
        message: Option<&str>,
    ) -> Option<Reserved<'_>> {
        let amount = cost(outputs, message);
        let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        if budgets.len() >= PODS_REMEMBERED && !budgets.contains_key(pod) {
            budgets.retain(|_, budget| !budget.is_full());
            // Still full of pods in debt: start over rather than grow without bound.
            if budgets.len() >= PODS_REMEMBERED {
                budgets.clear();
            }
        }
        let per_hour = self.per_hour as f64;
        let budget = budgets
            .entry(pod.to_owned())
            .or_insert_with(|| Bucket::full(per_hour / 3600.0, per_hour));
        if !budget.has_some() {
            return None;
        }
        budget.spend(amount);
        Some(Reserved {
            writes: self,
            pod: pod.to_owned(),
            amount,
        })
    }

    /// Spends `amount` more of the pod's budget (gives it back when negative).
    fn adjust(&self, pod: &str, amount: f64) {
        let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(budget) = budgets.get_mut(pod) {
            budget.spend(amount);
        }
    }
}

/// What a change costs: its outputs and message, and the rest of the row.
fn cost(outputs: Option<&str>, message: Option<&str>) -> f64 {
    (CHANGE_OVERHEAD + outputs.map_or(0, str::len) + message.map_or(0, str::len)) as f64
}

/// A change reserved from a pod's budget: settled at the size it was stored at, kept as
/// reserved (a replay, a refusal of the merged row: the merge was done), or given back
/// whole when dropped (refused before the merge, or not done at all).
#[derive(Debug)]
pub struct Reserved<'a> {
    writes: &'a PodWrites,
    pod: String,
    amount: f64,
}

impl Reserved<'_> {
    /// The change was stored as `result`.
    pub fn settle(mut self, result: &NodeResult) {
        let stored = cost(
            result.outputs.as_deref().map(|outputs| outputs.get()),
            result.message.as_deref(),
        );
        self.writes.adjust(&self.pod, stored - self.amount);
        self.amount = 0.0;
    }

    /// The report cost the writer its merge but stored nothing: it keeps its price.
    pub fn keep(mut self) {
        self.amount = 0.0;
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if self.amount != 0.0 {
            self.writes.adjust(&self.pod, -self.amount);
        }
    }
}
