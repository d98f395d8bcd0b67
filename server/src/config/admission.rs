//! The flags of what one request may take: body and answer sizes and memory, requests and
//! watches at once, a pod's write budget.

use std::time::Duration;

use clap::Args;

use super::values::{KIB, MIB, MINUTE, PAGE, SECOND, TIB, count_between, duration_between};
use crate::http::admission;
use crate::validate;

#[derive(Debug, Clone, Args)]
pub struct AdmissionFlags {
    /// Largest request body accepted: 2 MiB by default, so that any outputs a
    /// WorkflowTaskResult holds today (etcd's 1.5 MiB object limit) fit.
    #[arg(long, env = "ARGO_RESULTS_MAX_BODY_BYTES", default_value_t = 2 << 20, display_order = 330,
          value_parser = count_between(KIB, 256 * MIB))]
    pub max_body_bytes: usize,

    /// Time a client has to send a request's body once its headers arrived; past it the
    /// request is answered 408 request_timeout.
    #[arg(long, env = "ARGO_RESULTS_BODY_TIMEOUT", default_value = "10s", display_order = 340,
          value_parser = duration_between(SECOND, 10 * MINUTE))]
    pub body_timeout: Duration,

    /// Bytes of request bodies held in memory at once, across requests; a body that would
    /// pass it is answered 429 overloaded.
    #[arg(long, env = "ARGO_RESULTS_MAX_BODY_MEMORY", default_value_t = 64 << 20, display_order = 350,
          value_parser = count_between(KIB, TIB))]
    pub max_body_memory: usize,

    /// Bytes of answers being built or sent at once, across requests: each is held until
    /// its client has taken it, a page item by item as it is read. One caller holding
    /// several takes at most an eighth, and an eighth is kept for the controller; an
    /// answer that would pass them is answered 429 overloaded (at least 16 MiB).
    #[arg(long, env = "ARGO_RESULTS_MAX_ANSWER_MEMORY", default_value_t = 64 << 20, display_order = 360,
          value_parser = count_between(PAGE, TIB))]
    pub max_answer_memory: usize,

    /// Largest `outputs.result` accepted (Argo's executor keeps 256 KiB).
    #[arg(long, env = "ARGO_RESULTS_MAX_RESULT_BYTES", default_value_t = 256 << 10, display_order = 370,
          value_parser = count_between(KIB, 256 * MIB))]
    pub max_result_bytes: usize,

    /// Bytes of results one pod may change per hour, each change counted at the stored
    /// result's size (the feed keeps a copy of each); past it the pod's reports answer 429
    /// until its budget refills [default: 8 x --max-body-bytes, 16 MiB].
    #[arg(long, env = "ARGO_RESULTS_POD_WRITE_BUDGET", display_order = 380,
          value_parser = count_between(KIB, TIB))]
    pub pod_write_budget: Option<usize>,

    /// API requests served at once; the excess answers 429 overloaded with Retry-After
    /// [default: 32 per database connection]. Waiting watches do not count, nor writes
    /// waiting for the writer's transaction: as many of those may wait, one caller (a pod)
    /// at most an eighth, and an eighth is kept for the controller.
    #[arg(long, env = "ARGO_RESULTS_MAX_IN_FLIGHT", display_order = 440,
          value_parser = count_between(1, 1_000_000))]
    pub max_in_flight: Option<usize>,

    /// Feed requests waiting for a change at once (watch=true); more are answered 429.
    #[arg(long, env = "ARGO_RESULTS_MAX_WATCHES", default_value_t = 128, display_order = 450,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_watches: u32,
}

impl AdmissionFlags {
    /// What admission holds requests to, given the pool's `--max-connections`: a read
    /// holds a connection for milliseconds and a write waits for one shared commit, so 32
    /// requests in flight per connection stay far inside the 3 s in which an outage is
    /// answered, while a real overload is still shed.
    pub fn limits(&self, max_connections: u32) -> admission::Limits {
        admission::Limits {
            max_in_flight: self.max_in_flight.unwrap_or(max_connections as usize * 32),
            max_watches: self.max_watches as usize,
            max_body_memory: self.max_body_memory,
            max_answer_memory: self.max_answer_memory,
            body_timeout: self.body_timeout,
        }
    }

    pub fn pod_write_budget(&self) -> usize {
        self.pod_write_budget
            .unwrap_or(self.max_body_bytes.saturating_mul(8))
    }
}

impl From<&AdmissionFlags> for validate::Limits {
    fn from(flags: &AdmissionFlags) -> Self {
        validate::Limits {
            max_body_bytes: flags.max_body_bytes,
            max_result_bytes: flags.max_result_bytes,
        }
    }
}
