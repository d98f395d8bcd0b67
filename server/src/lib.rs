//! argo-results-server: the service that stores Argo Workflows' step results.
//!
//! [`run`] wires everything: flags (`config`) decide authentication (`auth`) and the
//! store (`store`); the HTTP API (`http`) serves them until SIGTERM or SIGINT.

// Flags' help is written in doc comments, where `<ARG>` is usage notation, not HTML.
#![allow(rustdoc::invalid_html_tags)]

mod auth;
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

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use argo_results_proto::token::{self, DEV_ADMIN_SUBJECT, DEV_ISSUER, DEV_KEY_ID, TokenClaims};
use tokio::sync::watch;

use auth::dev::{DevKey, DevKeyError};
use auth::keys::{Issuer, KeyError, KeySet, Lifetime, TokenPolicy};
use auth::kube_calls::KubeCalls;
use auth::kube_keys::KubeKeys;
use auth::rbac::Rbac;
use auth::token_review::TokenReviewer;
use auth::{Authenticator, Authorizer, KubeApi, RoleLists, Verifier};
use config::AuthMode;
use listener::Guard;
use store::{ReportPolicy, StoreError};
use validate::Limits;

/// Connections open at once on the `--metrics-listen` address, at most.
const OPERATIONS_CONNECTIONS: usize = 64;

/// Lifetime of the admin token printed by the embedded default.
const DEV_ADMIN_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("--auth none is refused on {0}: it is allowed on a loopback address only")]
    UnauthenticatedOnNetwork(SocketAddr),
    #[error(
        "no token validation is configured for {0}: give --jwks-file, --kube-jwks or \
         --token-review, or listen on a loopback address to use the dev key"
    )]
    NoValidation(SocketAddr),
    #[error(
        "--jwks-file needs --issuer ISS, the `iss` its tokens must carry, or --any-issuer \
         to trust every issuer its keys sign for"
    )]
    IssuerRequired,
    #[error("--jwks-file {path}: {source}")]
    JwksFile {
        path: String,
        source: std::io::Error,
    },
    #[error("--jwks-file {path}: {source}")]
    Jwks { path: String, source: KeyError },
    #[error("Kubernetes API (in-cluster config or KUBECONFIG): {0}")]
    Kube(kube::Error),
    #[error("dev key: {0}")]
    DevKey(#[from] DevKeyError),
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

/// How requests are authenticated and authorized, and the dev key when the embedded
/// default made one.
async fn authenticator(config: &Config) -> Result<(Authenticator, Option<DevKey>), StartError> {
    let loopback = config.listen.ip().is_loopback();
    if config.auth == AuthMode::None {
        if !loopback {
            return Err(StartError::UnauthenticatedOnNetwork(config.listen));
        }
        return Ok((Authenticator::disabled(), None));
    }
    let needs_kube = config.kube_jwks
        || config.token_review
        || config.rbac
        || config.allow_unbound_executor_tokens;
    let kube = if needs_kube {
        let client = kube::Client::try_default()
            .await
            .map_err(StartError::Kube)?;
        Some(KubeApi(client))
    } else {
        None
    };
    // Given, or (--any-issuer) any; `None`: the cluster's, for --kube-jwks.
    let issuer = match (&config.issuer, config.any_issuer) {
        (Some(issuer), _) => Some(Issuer::Only(issuer.clone())),
        (None, true) => Some(Issuer::Any),
        (None, false) => None,
    };
    let calls = Arc::new(KubeCalls::new(config.kube_api_qps));
    let lifetime = Lifetime {
        max: config.max_token_lifetime,
        leeway: config.clock_leeway,
    };
    let mut roles = RoleLists {
        readers: config.readers.clone(),
        controllers: config.controllers.clone(),
    };
    let mut dev = None;
    let verifier = match (&config.jwks_file, &kube) {
        (Some(path), _) => {
            let issuer = issuer.ok_or(StartError::IssuerRequired)?;
            let text = std::fs::read_to_string(path).map_err(|source| StartError::JwksFile {
                path: path.display().to_string(),
                source,
            })?;
            let policy = TokenPolicy {
                audience: config.audience.clone(),
                issuer,
                lifetime,
            };
            Verifier::Keys(KeySet::from_jwks(&text, &policy).map_err(|source| {
                StartError::Jwks {
                    path: path.display().to_string(),
                    source,
                }
            })?)
        }
        (None, Some(kube)) if config.kube_jwks => Verifier::KubeKeys(KubeKeys::start(
            kube.clone(),
            config.audience.clone(),
            issuer,
            lifetime,
        )),
        (None, Some(kube)) if config.token_review => Verifier::TokenReview(TokenReviewer::new(
            kube.clone(),
            config.audience.clone(),
            Arc::clone(&calls),
        )),
        _ if loopback => {
            let policy = TokenPolicy {
                audience: config.audience.clone(),
                issuer: Issuer::Only(DEV_ISSUER.to_owned()),
                lifetime,
            };
            let (key, keys) = auth::dev::load_or_create(&config.data_dir, &policy)?;
            dev = Some(key);
            roles.readers.push(DEV_ADMIN_SUBJECT.to_owned());
            roles.controllers.push(DEV_ADMIN_SUBJECT.to_owned());
            Verifier::Keys(keys)
        }
        _ => return Err(StartError::NoValidation(config.listen)),
    };
    let authorizer = match &kube {
        Some(kube) if config.rbac => Authorizer::Rbac(Rbac::new(kube.clone(), Arc::clone(&calls))),
        _ => Authorizer::Lists(roles),
    };
    let unbound = kube
        .filter(|_| config.allow_unbound_executor_tokens)
        .map(|kube| Rbac::new(kube, calls));
    Ok((Authenticator::tokens(verifier, authorizer, unbound), dev))
}

/// The CLI as it can be run now: the binary built beside this one (cargo builds both into
/// `target/`, the image holds both), else through cargo from the repository.
fn cli_command() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("argo-results")))
        .filter(|cli| cli.is_file())
        .map_or_else(
            || "cargo run -q -p argo-results-client --".to_owned(),
            |cli| cli.display().to_string(),
        )
}

/// What a newcomer needs to talk to the embedded default, printed once it listens.
fn dev_banner(
    format: LogFormat,
    dev: &DevKey,
    audience: &str,
    scheme: &str,
    addr: SocketAddr,
) -> Result<(), StartError> {
    let claims = TokenClaims::user(DEV_ISSUER, audience, DEV_ADMIN_SUBJECT, DEV_ADMIN_TOKEN_TTL);
    let admin = token::mint(&dev.pem, DEV_KEY_ID, &claims)?;
    let key = dev.path.display().to_string();
    let curl = format!("curl -H \"Authorization: Bearer {admin}\" {scheme}://{addr}/api/v1/whoami");
    let mint = format!(
        "{} token --key {key} --namespace argo --pod-name my-wf-main-1234 --pod-uid pod-uid-1",
        cli_command()
    );
    let text = format!(
        "dev auth: trusting tokens signed by {key} (loopback only)\n\
         admin token (reader + controller, valid 24h):\n  \
         export ARGO_RESULTS_TOKEN={admin}\n\
         try it:\n  \
         {curl}\n\
         mint a pod token to play the wait container:\n  \
         {mint}"
    );
    let fields = [
        ("key", key.as_str()),
        ("admin_token", admin.as_str()),
        ("try", curl.as_str()),
        ("mint_pod_token", mint.as_str()),
    ];
    console::say(format, &text, &fields);
    Ok(())
}

/// Starts the server and serves until SIGTERM or SIGINT.
pub async fn run(config: Config) -> Result<(), StartError> {
    let (authenticator, dev) = authenticator(&config).await?;
    if config.auth == AuthMode::None {
        tracing::warn!(
            "AUTHENTICATION IS OFF (--auth none): anyone who can reach {} may read and write every result",
            config.listen
        );
    }
    let policy = ReportPolicy {
        require_expectation: config
            .require_expectation
            .unwrap_or(dev.is_none() && config.auth == AuthMode::Tokens),
        max_outputs_bytes: config.max_body_bytes,
    };
    if policy.require_expectation {
        tracing::info!("pods may report only the nodes registered for them");
    } else if dev.is_none() && config.auth == AuthMode::Tokens {
        tracing::warn!(
            "--require-expectation=false: the first pod to report a node binds its result, \
             so a pod can claim any node its name fits"
        );
    }
    let metrics = Arc::new(metrics::Metrics::new());
    let connections = listener::fit_open_files(
        listener::Limits {
            header_timeout: config.header_timeout,
            idle_timeout: config.idle_timeout,
            max_connections: config.max_open_connections as usize,
            max_per_peer: config
                .max_connections_per_peer
                .map_or(config.max_open_connections as usize / 2, |n| n as usize)
                .max(1),
        },
        // The metrics listener's, the pool's, and a margin for files, the writer's
        // connection and the Kubernetes client.
        OPERATIONS_CONNECTIONS + config.max_connections as usize + 64,
    );
    let api_guard = Guard::new("api", connections, Arc::clone(&metrics));
    let listener =
        listener::bind(config.listen, connections.max_connections).map_err(|source| {
            StartError::Listen {
                addr: config.listen,
                source,
            }
        })?;
    let addr = listener.local_addr().map_err(StartError::Serve)?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(
            tls::serve_files(cert.clone(), key.clone())
                .await
                .map_err(StartError::Tls)?,
        ),
        _ => None,
    };
    // Kubelet and Prometheus need a few connections; a flood of the API's cannot take
    // these.
    let operations = match config.metrics_listen {
        Some(addr) => {
            let listener = listener::bind(addr, OPERATIONS_CONNECTIONS)
                .map_err(|source| StartError::Listen { addr, source })?;
            let limits = listener::Limits {
                max_connections: connections.max_connections.min(OPERATIONS_CONNECTIONS),
                max_per_peer: OPERATIONS_CONNECTIONS,
                ..connections
            };
            Some((
                listener,
                Guard::new("metrics", limits, Arc::clone(&metrics)),
            ))
        }
        None => None,
    };
    // Probes answer from here on: a long wait for the database or a long migration is
    // not killed by the liveness probe, and readiness says not yet.
    let starting = http::starting::Starting::serve(
        (&listener, &api_guard),
        tls.clone(),
        operations
            .as_ref()
            .map(|(listener, guard)| (listener, guard)),
        &metrics,
    )
    .map_err(StartError::Serve)?;
    let database = argo_results_proto::redacted(&config.database_url());
    console::say(
        config.log_format,
        &format!("argo-results-server opening the store {database}"),
        &[("database", &database)],
    );
    let store = store::open(
        &config.database_url(),
        store::Opening {
            max_connections: config.max_connections,
            wait: config.database_wait,
            batching: config.batching(),
            policy,
            new_epoch: config.new_epoch,
        },
        Arc::clone(&metrics),
    )
    .await?;
    starting.stop().await;
    let (stop, stopping) = watch::channel(false);
    retention::spawn(
        retention::Retention {
            feed: config.feed_retention,
            results: config.result_retention,
            claims: config.claim_retention,
            every: config.retention_every,
        },
        Arc::clone(&store),
        Arc::clone(&metrics),
    );
    let state = http::AppState::new(http::Shared {
        store,
        auth: authenticator,
        metrics: Arc::clone(&metrics),
        limits: Limits {
            max_body_bytes: config.max_body_bytes,
            max_result_bytes: config.max_result_bytes,
        },
        stopping,
        admission: http::Admission::new(
            config.max_in_flight(),
            config.max_watches as usize,
            config.max_body_memory,
            config.max_answer_memory,
            config.body_timeout,
        ),
        pod_writes: http::PodWrites::new(config.pod_write_budget()),
        api_connections: api_guard.clone(),
    });
    let scheme = if tls.is_some() { "https" } else { "http" };
    if let Some(dev) = &dev {
        dev_banner(config.log_format, dev, &config.audience, scheme, addr)?;
    }
    let handle = axum_server::Handle::new();
    if let Some((listener, guard)) = operations {
        let addr = listener.local_addr().map_err(StartError::Serve)?;
        let server = axum_server::from_tcp(listener)
            .map_err(StartError::Serve)?
            .acceptor(guard.clone());
        let router = http::operations_router(state.clone()).into_make_service();
        let url = format!("http://{addr}");
        console::say(
            config.log_format,
            &format!("argo-results-server serving metrics and probes on {url}"),
            &[("url", &url)],
        );
        let serving = guard.configure(server).handle(handle.clone()).serve(router);
        tokio::spawn(async move {
            if let Err(error) = serving.await {
                tracing::error!(%error, "the metrics listener stopped");
            }
        });
    }
    // Printed last: once it is out, the server is ready and all else was said.
    let url = format!("{scheme}://{addr}");
    console::say(
        config.log_format,
        &format!("argo-results-server listening on {url}"),
        &[("url", &url)],
    );

    let grace = config.shutdown_grace;
    let stopping_handle = handle.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        // Ends long polls so that in-flight requests finish promptly.
        let _ = stop.send(true);
        stopping_handle.graceful_shutdown(Some(grace));
    });
    let app = http::router(state, config.metrics_listen.is_none()).into_make_service();
    let guard = api_guard;
    match tls {
        Some(tls) => {
            let server = axum_server::from_tcp_rustls(listener, tls)
                .map_err(StartError::Serve)?
                .map(|tls| {
                    tls.handshake_timeout(guard.header_timeout())
                        .acceptor(guard.clone())
                });
            guard.configure(server).handle(handle).serve(app).await
        }
        None => {
            let server = axum_server::from_tcp(listener)
                .map_err(StartError::Serve)?
                .acceptor(guard.clone());
            guard.configure(server).handle(handle).serve(app).await
        }
    }
    .map_err(StartError::Serve)
}

async fn shutdown_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                return std::future::pending().await;
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = terminate.recv() => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
