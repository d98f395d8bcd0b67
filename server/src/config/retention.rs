//! The retention pass's flags: how long the feed, results and cron claims are kept.

use std::time::Duration;

use clap::Args;

use super::values::{DAY, HOUR, SECOND, duration_between};
use crate::retention::Retention;

#[derive(Debug, Clone, Args)]
pub struct RetentionFlags {
    /// Keep the change feed's history this long (e.g. 24h); older `since` answer 410.
    #[arg(long, env = "ARGO_RESULTS_FEED_RETENTION", default_value = "24h", display_order = 270,
          value_parser = duration_between(SECOND, 3650 * DAY))]
    pub feed_retention: Duration,

    /// Remove results unchanged for this long (e.g. 7d), deleted workflows or not.
    #[arg(long, env = "ARGO_RESULTS_RESULT_RETENTION", default_value = "7d", display_order = 280,
          value_parser = duration_between(SECOND, 3650 * DAY))]
    pub result_retention: Duration,

    /// Remove settled cron claims taken this long ago (e.g. 30d), except each cron
    /// workflow's newest settled one, and claims whose lease expired unsettled this long ago.
    #[arg(long, env = "ARGO_RESULTS_CLAIM_RETENTION", default_value = "30d", display_order = 290,
          value_parser = duration_between(SECOND, 3650 * DAY))]
    pub claim_retention: Duration,

    /// How often the retention pass runs.
    #[arg(long, env = "ARGO_RESULTS_RETENTION_EVERY", default_value = "1m", display_order = 310,
          value_parser = duration_between(Duration::from_millis(100), 24 * HOUR))]
    pub retention_every: Duration,
}

impl From<&RetentionFlags> for Retention {
    fn from(flags: &RetentionFlags) -> Self {
        Retention {
            feed: flags.feed_retention,
            results: flags.result_retention,
            claims: flags.claim_retention,
            every: flags.retention_every,
        }
    }
}
