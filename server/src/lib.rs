//! argo-results-server: the service that stores Argo Workflows' step results.
//!
//! [`run`] wires everything: flags (`config`) decide authentication (`auth`) and the
//! store (`store`); the HTTP API (`http`) serves them until SIGTERM or SIGINT.

// Flags' help is written in doc comments, where `<ARG>` is usage notation, not HTML.
#![allow(rustdoc::invalid_html_tags)]

mod auth;
mod banner;
mod config;
mod console;
mod http;
mod listener;
mod metrics;
mod paths;
mod rate;
mod retention;
mod store;
mod tls;
mod validate;

pub use auth::rbac_rules::print as print_rbac_rules;
pub use config::{Config, LogFormat};
pub use console::line as console_line;
pub use http::openapi_json;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use axum::Router;
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use tokio::sync::watch;

use config::{AuthError, ListenFlags};
use listener::Guard;
use metrics::Metrics;
use store::{ReportPolicy, StoreError};

/// Connections open at once on the `--metrics-listen` address, at most.
const OPERATIONS_CONNECTIONS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("could not mint the dev admin token: {0}")]
    Mint(#[from] jsonwebtoken::errors::Error),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("server: {0}")]
    Serve(std::io::Error),
    #[error("--tls-cert/--tls-key: {0}")]
    Tls(std::io::Error),
    #[error("cannot listen for SIGTERM and SIGINT: {0}")]
    Signals(std::io::Error),
}

impl StartError {
    /// The process's exit status for this error (listed in `--help`): an orchestrator or
    /// a script can tell a database that never came, or migrations that failed, from a
    /// mistake in the flags.
    pub fn exit_code(&self) -> u8 {
        match self {
            StartError::Store(StoreError::Unreachable { .. }) => 3,
            StartError::Store(StoreError::Migrate(_)) => 4,
            _ => 1,
        }
    }
}

/// Starts the server and serves until SIGTERM or SIGINT.
pub async fn run(config: Config) -> Result<(), StartError> {
    let (authenticator, dev) = (config.auth)
        .authenticator(config.listen.listen, &config.data_dir)
        .await?;
    let policy = report_policy(&config, dev.is_some());
    let metrics = Arc::new(Metrics::new());
    let mut listening =
        Listening::bind(&config.listen, config.store.max_connections, &metrics).await?;
    // Probes answer from here on: a long wait for the database or a long migration is
    // not killed by the liveness probe, and readiness says not yet.
    let starting = http::starting::Starting::serve(
        (&listening.api, &listening.api_guard),
        listening.tls.clone(),
        listening
            .operations
            .as_ref()
            .map(|(listener, guard)| (listener, guard)),
        &metrics,
    )
    .map_err(StartError::Serve)?;
    let database_url = config.database_url();
    let database = argo_results_proto::redacted(&database_url);
    console::say(
        config.log_format,
        &format!("argo-results-server opening the store {database}"),
        &[("database", &database)],
    );
    let opening = config.store.opening(policy);
    let store = store::open(&database_url, opening, Arc::clone(&metrics)).await?;
    starting.stop().await;
    let (drain, draining) = watch::channel(false);
    let (stop, stopping) = watch::channel(false);
    let retention = (&config.retention).into();
    retention::spawn(retention, Arc::clone(&store), Arc::clone(&metrics));
    let admission = config.admission.limits(config.store.max_connections);
    let state = http::AppState::new(http::Shared {
        store,
        auth: authenticator,
        metrics,
        limits: (&config.admission).into(),
        draining,
        stopping,
        admission: http::Admission::new(admission),
        pod_writes: http::PodWrites::new(config.admission.pod_write_budget()),
        api_connections: listening.api_guard.clone(),
        readiness: http::Readiness::default(),
        refusal_log: http::RefusalLog::default(),
    });
    let url = listening.url()?;
    if let Some(dev) = &dev {
        banner::print(config.log_format, dev, &config.auth.audience, &url)?;
    }
    let handle = Handle::new();
    if let Some((listener, guard)) = listening.operations.take() {
        let router = http::operations_router(state.clone());
        serve_operations(listener, guard, router, &handle, config.log_format)?;
    }
    // Before the line below: a SIGTERM sent as soon as it is out must not kill the
    // process unannounced.
    let signals = Signals::listen().map_err(StartError::Signals)?;
    // Printed last: once it is out, the server is ready and all else was said.
    console::say(
        config.log_format,
        &format!("argo-results-server listening on {url}"),
        &[("url", &url)],
    );
    let (delay, grace) = (config.listen.shutdown_delay, config.listen.shutdown_grace);
    let stopping_handle = handle.clone();
    tokio::spawn(async move {
        let signal = signals.next().await;
        let _ = drain.send(true);
        if signal == Signal::Terminate && !delay.is_zero() {
            tracing::info!(
                "SIGTERM: serving {delay:?} more (--shutdown-delay), /readyz 503, while \
                 Kubernetes takes this pod out of its endpoints"
            );
            tokio::time::sleep(delay).await;
        }
        tracing::info!("shutting down: finishing in-flight requests");
        // Ends long polls so that in-flight requests finish promptly.
        let _ = stop.send(true);
        stopping_handle.graceful_shutdown(Some(grace));
    });
    let app = http::router(state, config.listen.metrics_listen.is_none());
    listening.serve(app, handle).await
}

/// Whether pods may report only the nodes registered for them, said in the log.
fn report_policy(config: &Config, dev: bool) -> ReportPolicy {
    let policy = ReportPolicy {
        require_expectation: config.auth.require_expectation(dev),
        max_outputs_bytes: config.admission.max_body_bytes,
    };
    if policy.require_expectation {
        tracing::info!("pods may report only the nodes registered for them");
    } else if !dev && config.auth.auth == config::AuthMode::Tokens {
        tracing::warn!(
            "--require-expectation=false: the first pod to report a node binds its result, \
             so a pod can claim any node its name fits"
        );
    }
    policy
}

/// The sockets, bound before the store opens.
struct Listening {
    api: TcpListener,
    api_guard: Guard,
    tls: Option<RustlsConfig>,
    /// `--metrics-listen`'s: kubelet and Prometheus need a few connections, and a flood of
    /// the API's cannot take these.
    operations: Option<(TcpListener, Guard)>,
}

impl Listening {
    /// Binds the addresses of `flags`; `pool` database connections take open files too.
    async fn bind(
        flags: &ListenFlags,
        pool: u32,
        metrics: &Arc<Metrics>,
    ) -> Result<Self, StartError> {
        let limits = listener::fit_open_files(
            flags.into(),
            // The metrics listener's, the pool's, and a margin for files, the writer's
            // connection and the Kubernetes client.
            OPERATIONS_CONNECTIONS + pool as usize + 64,
        );
        let api = listener::bind(flags.listen, limits.max_connections).map_err(|source| {
            StartError::Listen {
                addr: flags.listen,
                source,
            }
        })?;
        let tls = match (&flags.tls_cert, &flags.tls_key) {
            (Some(cert), Some(key)) => Some(
                tls::serve_files(cert.clone(), key.clone())
                    .await
                    .map_err(StartError::Tls)?,
            ),
            _ => None,
        };
        let operations = match flags.metrics_listen {
            Some(addr) => {
                let listener = listener::bind(addr, OPERATIONS_CONNECTIONS)
                    .map_err(|source| StartError::Listen { addr, source })?;
                let limits = listener::Limits {
                    max_connections: limits.max_connections.min(OPERATIONS_CONNECTIONS),
                    max_per_peer: OPERATIONS_CONNECTIONS,
                    // Plain HTTP: connections cost no handshake.
                    handshakes_per_peer: 0,
                    ..limits
                };
                Some((listener, Guard::new("metrics", limits, Arc::clone(metrics))))
            }
            None => None,
        };
        Ok(Listening {
            api,
            api_guard: Guard::new("api", limits, Arc::clone(metrics)),
            tls,
            operations,
        })
    }

    /// The API's URL, as the line that says the server is ready prints it.
    fn url(&self) -> Result<String, StartError> {
        let addr = self.api.local_addr().map_err(StartError::Serve)?;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        Ok(format!("{scheme}://{addr}"))
    }

    /// Serves the API until `handle` shuts it down.
    async fn serve(self, app: Router, handle: Handle<SocketAddr>) -> Result<(), StartError> {
        // The peer's address goes into each request's log line.
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        let guard = self.api_guard;
        match self.tls {
            Some(tls) => {
                let server = axum_server::from_tcp_rustls(self.api, tls)
                    .map_err(StartError::Serve)?
                    .map(|tls| {
                        tls.handshake_timeout(guard.header_timeout())
                            .acceptor(guard.clone())
                    });
                guard.configure(server).handle(handle).serve(app).await
            }
            None => {
                let server = axum_server::from_tcp(self.api)
                    .map_err(StartError::Serve)?
                    .acceptor(guard.clone());
                guard.configure(server).handle(handle).serve(app).await
            }
        }
        .map_err(StartError::Serve)
    }
}

/// Serves probes and metrics on `--metrics-listen` in the background until `handle` shuts
/// it down.
fn serve_operations(
    listener: TcpListener,
    guard: Guard,
    router: Router,
    handle: &Handle<SocketAddr>,
    format: LogFormat,
) -> Result<(), StartError> {
    let addr = listener.local_addr().map_err(StartError::Serve)?;
    let server = axum_server::from_tcp(listener)
        .map_err(StartError::Serve)?
        .acceptor(guard.clone());
    let url = format!("http://{addr}");
    console::say(
        format,
        &format!("argo-results-server serving metrics and probes on {url}"),
        &[("url", &url)],
    );
    let serving = guard
        .configure(server)
        .handle(handle.clone())
        .serve(router.into_make_service_with_connect_info::<SocketAddr>());
    tokio::spawn(async move {
        if let Err(error) = serving.await {
            tracing::error!(%error, "the metrics listener stopped");
        }
    });
    Ok(())
}

/// The signal that asked the server to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    /// SIGTERM: Kubernetes stopping the pod.
    Terminate,
    /// SIGINT: a person at a terminal.
    Interrupt,
}

/// SIGTERM and SIGINT, listened for once: from then on neither kills the process, and the
/// first one asks the server to stop.
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(mut self) -> Signal {
        tokio::select! {
            _ = self.interrupt.recv() => Signal::Interrupt,
            _ = self.terminate.recv() => Signal::Terminate,
        }
    }
}
