//! HTTPS with rustls (aws-lc-rs): TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1 by ALPN, and the
//! certificate files re-read when they change (cert-manager rotates them) without dropping
//! open connections.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use axum_server::tls_rustls::RustlsConfig;
use rustls::SignatureAlgorithm;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;

/// How often the certificate files are checked for a change.
const RELOAD_CHECK: Duration = Duration::from_secs(5);

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Says, once, when the key is RSA: each new connection, which is each pod's, then costs
/// the server about twice the CPU of an ECDSA P-256 key's handshake.
fn note_rsa(key: &Path) {
    let algorithm = PrivateKeyDer::from_pem_file(key)
        .ok()
        .and_then(|der| rustls::crypto::aws_lc_rs::sign::any_supported_type(&der).ok())
        .map(|signer| signer.algorithm());
    if algorithm == Some(SignatureAlgorithm::RSA) {
        tracing::warn!(
            key = %key.display(),
            "the TLS key is RSA: every new connection (each pod opens one) costs about twice \
             the server CPU of an ECDSA P-256 key's; cert-manager: privateKey: \
             {{algorithm: ECDSA, size: 256}} (docs/operations.md, \"TLS\")"
        );
    }
}

/// Loads the PEM certificate chain and key, and keeps reloading them as they change.
pub async fn serve_files(cert: PathBuf, key: PathBuf) -> std::io::Result<RustlsConfig> {
    let config = RustlsConfig::from_pem_file(&cert, &key).await?;
    note_rsa(&key);
    let watched = config.clone();
    tokio::spawn(async move {
        let mut seen = (modified(&cert), modified(&key));
        loop {
            tokio::time::sleep(RELOAD_CHECK).await;
            let now = (modified(&cert), modified(&key));
            if now == seen {
                continue;
            }
            match watched.reload_from_pem_file(&cert, &key).await {
                Ok(()) => {
                    tracing::info!(cert = %cert.display(), "TLS certificate reloaded");
                    seen = now;
                }
                // A half-written pair is retried at the next check; the old one serves on.
                Err(error) => tracing::warn!(%error, "TLS certificate not reloaded"),
            }
        }
    });
    Ok(config)
}
