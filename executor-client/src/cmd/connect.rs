//! The connection flags of the admin commands.

use std::path::PathBuf;
use std::time::Duration;

use argo_results_client::{Client, RetryPolicy, TokenSource};
use clap::Args;
use tokio::time::Instant;

use super::failure::Failure;

#[derive(Debug, Args)]
pub struct Connection {
    /// The server's URL.
    #[arg(
        long,
        env = "ARGO_RESULTS_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,

    /// Read the bearer token from this file (else ARGO_RESULTS_TOKEN).
    #[arg(long, env = "ARGO_RESULTS_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,

    /// A PEM CA to trust besides the system's, for a server with a private CA.
    #[arg(long, env = "ARGO_RESULTS_CA_FILE")]
    pub ca_file: Option<PathBuf>,

    /// Give up retrying an unreachable or overloaded server after this long.
    #[arg(long, default_value = "30s", value_parser = super::parse_duration)]
    pub timeout: Duration,
}

impl Connection {
    fn token(&self) -> TokenSource {
        match (&self.token_file, std::env::var("ARGO_RESULTS_TOKEN")) {
            (Some(path), _) => TokenSource::File(path.clone()),
            (None, Ok(token)) if !token.trim().is_empty() => {
                TokenSource::Value(token.trim().to_owned())
            }
            _ => TokenSource::None,
        }
    }

    /// A client that retries transient failures until `deadline` (`None`: without end).
    pub fn client_until(&self, deadline: Option<Instant>) -> Result<Client, Failure> {
        Ok(Client::builder(&self.server)
            .token(self.token())
            .ca_file(self.ca_file.clone())
            .retry(RetryPolicy { deadline })
            .on_retry(|error, wait| {
                eprintln!(
                    "argo-results: {error}; retrying in {:.1}s",
                    wait.as_secs_f64()
                );
            })
            .build()?)
    }

    /// A client that gives up after `--timeout`.
    pub fn client(&self) -> Result<Client, Failure> {
        self.client_until(Some(Instant::now() + self.timeout))
    }
}

/// Splits `NAMESPACE/NAME`.
pub fn namespaced(text: &str) -> Result<(String, String), Failure> {
    match text.split_once('/') {
        // Kubernetes names hold no '/': `argo/wf/node` is a node given as a third part.
        Some((namespace, name))
            if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
        {
            Ok((namespace.to_owned(), name.to_owned()))
        }
        _ => Err(Failure::Usage(format!(
            "{text:?} is not NAMESPACE/NAME, e.g. argo/etl-x7k2p"
        ))),
    }
}
