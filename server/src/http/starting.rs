//! What the listeners answer while the store opens (waiting for the database, running
//! migrations): alive, not ready, and every API request told to come back. So kubelet's
//! liveness probe does not kill a long migration, and a pod's report is retried rather
//! than refused.

use std::net::TcpListener;
use std::sync::Arc;

use argo_results_proto::ProblemCode;
use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum_server::tls_rustls::RustlsConfig;

use super::error::ApiError;
use super::probes;
use crate::listener::Guard;
use crate::metrics::Metrics;

/// The routes served until the store is open; `/metrics` where the full router will
/// serve it.
pub fn router(metrics: Arc<Metrics>, with_metrics: bool) -> Router {
    let router = Router::new()
        .route("/healthz", get(probes::healthz))
        .route("/readyz", get(not_ready));
    let router = if with_metrics {
        router.route("/metrics", get(scrape))
    } else {
        router
    };
    router.fallback(starting).with_state(metrics)
}

async fn scrape(State(metrics): State<Arc<Metrics>>) -> Response {
    probes::encoded(&metrics)
}

async fn not_ready() -> ApiError {
    ApiError::new(ProblemCode::Unavailable, "not ready: starting")
}

async fn starting() -> ApiError {
    ApiError::new(
        ProblemCode::Unavailable,
        "the server is starting: its database is not open yet; retry later",
    )
}

/// The listeners' answers while the store opens, until [`Starting::stop`].
#[derive(Debug)]
pub struct Starting {
    handle: axum_server::Handle<std::net::SocketAddr>,
    served: Vec<tokio::task::JoinHandle<()>>,
}

impl Starting {
    /// Serves [`router`] on copies of the API listener (with `tls` when given) and of
    /// the `--metrics-listen` one, under the same guards as the full server (connection
    /// caps, silent connections closed): the sockets stay open when these stop, so no
    /// connection is refused in between.
    pub fn serve(
        api: (&TcpListener, &Guard),
        tls: Option<RustlsConfig>,
        operations: Option<(&TcpListener, &Guard)>,
        metrics: &Arc<Metrics>,
    ) -> std::io::Result<Self> {
        let handle = axum_server::Handle::new();
        let mut served = Vec::new();
        let (listener, guard) = api;
        let api_router = router(Arc::clone(metrics), operations.is_none()).into_make_service();
        served.push(match tls {
            Some(tls) => {
                let server = axum_server::from_tcp_rustls(listener.try_clone()?, tls)?.map(|tls| {
                    tls.handshake_timeout(guard.header_timeout())
                        .acceptor(guard.clone())
                });
                let serving = guard
                    .configure(server)
                    .handle(handle.clone())
                    .serve(api_router);
                tokio::spawn(async move {
                    let _ = serving.await;
                })
            }
            None => {
                let server = axum_server::from_tcp(listener.try_clone()?)?.acceptor(guard.clone());
                let serving = guard
                    .configure(server)
                    .handle(handle.clone())
                    .serve(api_router);
                tokio::spawn(async move {
                    let _ = serving.await;
                })
            }
        });
        if let Some((listener, guard)) = operations {
            let server = axum_server::from_tcp(listener.try_clone()?)?.acceptor(guard.clone());
            let router = router(Arc::clone(metrics), true).into_make_service();
            let serving = guard.configure(server).handle(handle.clone()).serve(router);
            served.push(tokio::spawn(async move {
                let _ = serving.await;
            }));
        }
        Ok(Starting { handle, served })
    }

    /// Stops taking connections and lets those open finish (a second at most).
    pub async fn stop(self) {
        self.handle
            .graceful_shutdown(Some(std::time::Duration::from_secs(1)));
        for served in self.served {
            let _ = served.await;
        }
    }
}
