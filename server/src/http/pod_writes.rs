//! What one pod may change: `--pod-write-budget` bytes of results an hour, refilled
//! continuously. Each change a pod's report makes costs the size of the stored result,
//! since the feed keeps a copy of the whole result at each change for `--feed-retention`:
//! a pod rewriting a megabyte of outputs over and over would otherwise fill the database.
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

    /// Whether the pod with UID `pod` has budget left (a write may take it into debt).
    pub fn allows(&self, pod: &str) -> bool {
        let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        budgets.get_mut(pod).is_none_or(Bucket::has_some)
    }

    /// Charges the pod with UID `pod` for a change that stored `result`.
    pub fn charge(&self, pod: &str, result: &NodeResult) {
        let cost = CHANGE_OVERHEAD
            + result
                .outputs
                .as_ref()
                .map_or(0, |outputs| outputs.get().len())
            + result.message.as_ref().map_or(0, String::len);
        let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        if budgets.len() >= PODS_REMEMBERED && !budgets.contains_key(pod) {
            budgets.retain(|_, budget| !budget.is_full());
            // Still full of pods in debt: start over rather than grow without bound.
            if budgets.len() >= PODS_REMEMBERED {
                budgets.clear();
            }
        }
        let per_hour = self.per_hour as f64;
        budgets
            .entry(pod.to_owned())
            .or_insert_with(|| Bucket::full(per_hour / 3600.0, per_hour))
            .spend(cost as f64);
    }
}
