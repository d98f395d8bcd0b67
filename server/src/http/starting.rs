//! What the listeners answer while the store opens (waiting for the database, running
//! migrations): alive, not ready, and every API request told to come back. So kubelet's
//! liveness probe does not kill a long migration, and a pod's report is retried rather
//! than refused.

use std::sync::Arc;

use argo_results_proto::ProblemCode;
use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;

use super::error::ApiError;
use super::probes;
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
    /// the `--metrics-listen` one: the sockets stay open when these stop, so no
    /// connection is refused in between.
    pub fn serve(
        api: &std::net::TcpListener,
        tls: Option<axum_server::tls_rustls::RustlsConfig>,
        operations: Option<&std::net::TcpListener>,
        metrics: &Arc<Metrics>,
    ) -> std::io::Result<Self> {
        let handle = axum_server::Handle::new();
        let mut served = Vec::new();
        let api_router = router(Arc::clone(metrics), operations.is_none()).into_make_service();
        let api_server = axum_server::from_tcp(api.try_clone()?)?.handle(handle.clone());
        served.push(match tls {
            Some(tls) => {
                let server = api_server.acceptor(axum_server::tls_rustls::RustlsAcceptor::new(tls));
                tokio::spawn(async move {
                    let _ = server.serve(api_router).await;
                })
            }
            None => tokio::spawn(async move {
                let _ = api_server.serve(api_router).await;
            }),
        });
        if let Some(listener) = operations {
            let server = axum_server::from_tcp(listener.try_clone()?)?.handle(handle.clone());
            let router = router(Arc::clone(metrics), true).into_make_service();
            served.push(tokio::spawn(async move {
                let _ = server.serve(router).await;
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
