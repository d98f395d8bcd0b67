use std::path::PathBuf;
use std::time::Duration;

use argo_results_proto::{Problem, ProblemCode};

use crate::retry::transient_status;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The request got no answer (connection refused or reset, TLS, timeout).
    #[error("{}", describe_transport(.0))]
    Transport(#[from] reqwest::Error),
    /// The server refused the request with a problem.
    #[error("{} {}: {}", .0.status, .0.code, .0.detail)]
    Api(Box<Problem>),
    /// The server answered something that is not the API's JSON (a proxy, perhaps).
    #[error("unexpected answer ({status}): {body}")]
    Unexpected { status: u16, body: String },
    #[error("cannot read the token file {path}: {source}")]
    TokenFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the CA file {path}: {detail}")]
    CaFile { path: PathBuf, detail: String },
    /// The TLS server name cannot be used with this URL (see
    /// [`crate::ClientBuilder::tls_server_name`]).
    #[error("the TLS server name {name:?} {detail}")]
    TlsServerName { name: String, detail: String },
    /// Transient failures went on until the deadline.
    #[error("gave up at the deadline after {attempts} attempts; last error: {last}")]
    GaveUp {
        attempts: u32,
        last: Box<ClientError>,
    },
}

/// reqwest's own message hides the cause ("error sending request"); name it.
fn describe_transport(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl ClientError {
    /// The problem's `code`, when the server refused the request.
    pub fn code(&self) -> Option<ProblemCode> {
        self.problem().map(|problem| problem.code)
    }

    pub fn problem(&self) -> Option<&Problem> {
        match self {
            ClientError::Api(problem) => Some(problem),
            ClientError::GaveUp { last, .. } => last.problem(),
            _ => None,
        }
    }

    /// Whether trying again may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Transport(_) | ClientError::TokenFile { .. } => true,
            ClientError::Api(problem) => transient_status(problem.status),
            ClientError::Unexpected { status, .. } => transient_status(*status),
            ClientError::CaFile { .. }
            | ClientError::TlsServerName { .. }
            | ClientError::GaveUp { .. } => false,
        }
    }
}

/// A failed attempt, with the server's `Retry-After` when it sent one.
#[derive(Debug)]
pub(crate) struct Failed {
    pub error: ClientError,
    pub retry_after: Option<Duration>,
}

impl From<ClientError> for Failed {
    fn from(error: ClientError) -> Self {
        Failed {
            error,
            retry_after: None,
        }
    }
}

impl From<reqwest::Error> for Failed {
    fn from(error: reqwest::Error) -> Self {
        ClientError::Transport(error).into()
    }
}
