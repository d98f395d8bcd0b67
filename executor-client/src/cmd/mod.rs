pub mod completion;
mod connect;
pub mod failure;
pub mod get;
mod kubeconfig;
pub mod list;
mod output;
pub mod report;
pub mod runs;
mod sequence;
pub mod token;
pub mod version;
pub mod watch;
pub mod whoami;
mod yaml;

use std::time::Duration;

/// A duration such as `500ms`, `10s`, `5m`, `1h30m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let signed: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{text:?} is not a duration like 10s, 5m or 1h: {e}"))?;
    Duration::try_from(signed).map_err(|_| format!("{text:?} must be positive"))
}
