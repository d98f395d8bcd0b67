//! The listeners' flags: addresses, TLS, and how long and how many connections may stay.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::{HOUR, MINUTE, SECOND, ZERO, duration_between};
use crate::listener::Limits;

#[derive(Debug, Clone, Args)]
pub struct ListenFlags {
    /// Address to listen on; port 0 picks a free port (printed at start).
    #[arg(
        long,
        env = "ARGO_RESULTS_LISTEN",
        default_value = "127.0.0.1:8080",
        display_order = 30
    )]
    pub listen: SocketAddr,

    /// Also serve /metrics, /healthz and /readyz over plain HTTP on this address (for
    /// Prometheus and kubelet probes when the API listens with TLS).
    #[arg(long, env = "ARGO_RESULTS_METRICS_LISTEN", display_order = 40)]
    pub metrics_listen: Option<SocketAddr>,

    /// Serve HTTPS with this PEM certificate chain (re-read when it changes).
    #[arg(
        long,
        env = "ARGO_RESULTS_TLS_CERT",
        requires = "tls_key",
        display_order = 60
    )]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(
        long,
        env = "ARGO_RESULTS_TLS_KEY",
        requires = "tls_cert",
        display_order = 70
    )]
    pub tls_key: Option<PathBuf>,

    /// Time a client has to send a request's headers, from the connection's start (or the
    /// TLS handshake's) or from the previous answer: an idle HTTP/1.1 keep-alive
    /// connection is closed after this too.
    #[arg(long, env = "ARGO_RESULTS_HEADER_TIMEOUT", default_value = "10s", display_order = 80,
          value_parser = duration_between(SECOND, 10 * MINUTE))]
    pub header_timeout: Duration,

    /// A connection with no request in flight for this long is closed (HTTP/2; over
    /// HTTP/1.1 --header-timeout comes first). An answer must be read within it.
    #[arg(long, env = "ARGO_RESULTS_IDLE_TIMEOUT", default_value = "60s", display_order = 90,
          value_parser = duration_between(SECOND, 24 * HOUR))]
    pub idle_timeout: Duration,

    /// Connections open at once on the API address; more are closed as they arrive. The
    /// --metrics-listen address takes at most 64 of its own.
    #[arg(long, env = "ARGO_RESULTS_MAX_OPEN_CONNECTIONS", default_value_t = 512, display_order = 100,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_open_connections: u32,

    /// Connections open at once from one address [default: half of
    /// --max-open-connections]. Behind a proxy or a SNAT that gives every client one
    /// address, raise it to --max-open-connections.
    #[arg(long, env = "ARGO_RESULTS_MAX_CONNECTIONS_PER_PEER", display_order = 110,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections_per_peer: Option<u32>,

    /// With TLS, new connections a second from one address, after a burst of
    /// --max-connections-per-peer: each costs a handshake (about 0.3 ms of CPU with an
    /// ECDSA key, 0.5 ms with RSA), and past the rate a peer's new connections are closed
    /// as they arrive. Clients keep their connections open; 0 turns the limit off. Behind
    /// a proxy or a SNAT that gives every client one address, raise it.
    #[arg(long, env = "ARGO_RESULTS_MAX_TLS_HANDSHAKES_PER_PEER", default_value_t = 100, display_order = 115,
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub max_tls_handshakes_per_peer: u32,

    /// On SIGTERM or SIGINT, how long in-flight requests may take to finish before their
    /// connections are closed (an unfinished write is rolled back, never acknowledged).
    #[arg(long, env = "ARGO_RESULTS_SHUTDOWN_GRACE", default_value = "20s", display_order = 320,
          value_parser = duration_between(ZERO, HOUR))]
    pub shutdown_grace: Duration,

    /// On SIGTERM, go on accepting connections and serving for this long, /readyz
    /// answering 503, before --shutdown-grace begins: time for Kubernetes to take the pod
    /// out of its Service's endpoints, so that a rollout refuses no connection (5s in
    /// deploy/). SIGINT does not wait.
    #[arg(long, env = "ARGO_RESULTS_SHUTDOWN_DELAY", default_value = "0s", display_order = 325,
          value_parser = duration_between(ZERO, 10 * MINUTE))]
    pub shutdown_delay: Duration,
}

/// The API address's connection limits.
impl From<&ListenFlags> for Limits {
    fn from(flags: &ListenFlags) -> Self {
        let max_connections = flags.max_open_connections as usize;
        Limits {
            header_timeout: flags.header_timeout,
            idle_timeout: flags.idle_timeout,
            max_connections,
            max_per_peer: flags
                .max_connections_per_peer
                .map_or(max_connections / 2, |n| n as usize)
                .max(1),
            handshakes_per_peer: if flags.tls_cert.is_some() {
                flags.max_tls_handshakes_per_peer
            } else {
                0
            },
        }
    }
}
