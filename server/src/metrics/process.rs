//! The process's own series, as every Prometheus client library exports them
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`...),
//! read from `/proc/self` at each scrape.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of `/proc/self/stat`'s CPU times: `USER_HZ`, 100 on every
/// architecture Linux runs containers on (it is part of the kernel's user ABI).
const USER_HZ: f64 = 100.0;

/// The process's series; what `/proc` does not give (another OS) is left out.
#[derive(Debug)]
pub struct Process {
    /// Unix time the server started, in seconds.
    started: f64,
}

impl Process {
    pub fn new() -> Self {
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Process {
            started: started.as_secs_f64(),
        }
    }
}

/// The soft limit on open files (`ulimit -n`), if `/proc` says it.
pub fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// User plus system CPU time, in seconds (`/proc/self/stat` fields 14 and 15).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name, in parentheses, may hold spaces: the fields follow its last `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    // Field 3 (the state) is the first after the name: fields 14 and 15 are at 11 and 12.
    Some((ticks(11)? + ticks(12)?) / USER_HZ)
}

/// A size from `/proc/self/status` (`VmRSS`, `VmSize`), in bytes.
fn status_bytes(key: &str) -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix(key))?;
    let kib: i64 = line
        .trim_start_matches(':')
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn open_fds() -> Option<i64> {
    let count = std::fs::read_dir("/proc/self/fd").ok()?.count();
    i64::try_from(count).ok()
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(seconds) = cpu_seconds() {
            let counter = ConstCounter::new(seconds);
            let metric = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                status_bytes("VmRSS"),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                status_bytes("VmSize"),
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                open_fds(),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                open_files_limit().and_then(|n| i64::try_from(n).ok()),
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
                gauge.encode(metric)?;
            }
        }
        let started = ConstGauge::new(self.started);
        let metric = encoder.encode_descriptor(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            None,
            started.metric_type(),
        )?;
        started.encode(metric)
    }
}
