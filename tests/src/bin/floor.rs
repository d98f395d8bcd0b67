//! floor: the least a server can do for a connection, for the benchmarks' floors. It
//! answers every request on `--listen` with `200 ok`, over TLS with `--tls-cert` and
//! `--tls-key` (as argo-results-server serves its API) or plain without, on the crates
//! argo-results-server is built on (tokio, hyper, rustls on aws-lc-rs, mimalloc) and
//! nothing else: no routing, no middleware, no logging. Prints `listening on ADDR` once it
//! accepts.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use clap::Parser;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The server's allocator, so that the floor allocates as it does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "floor",
    about = "A server that answers 200 ok and does nothing else"
)]
struct Cli {
    #[arg(long)]
    listen: SocketAddr,
    /// PEM certificate chain; with --tls-key, serve TLS 1.3 and 1.2.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

fn acceptor(cert: &PathBuf, key: &PathBuf) -> Result<TlsAcceptor, Error> {
    let chain = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

async fn answer(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cli = Cli::parse();
    let tls = match (&cli.tls_cert, &cli.tls_key) {
        (Some(cert), Some(key)) => Some(acceptor(cert, key)?),
        _ => None,
    };
    let listener = TcpListener::bind(cli.listen).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = service_fn(answer);
            // A connection that fails ends alone, as the real server's do.
            let _ = match tls {
                Some(tls) => match tls.accept(stream).await {
                    Ok(stream) => {
                        http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await
                    }
                    Err(_) => return,
                },
                None => {
                    http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
            };
        });
    }
}
