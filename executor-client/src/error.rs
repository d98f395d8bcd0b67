use argo_results_proto::{Problem, ProblemCode};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The request did not get an answer (connection, TLS, timeout).
    #[error("{0}")]
    Transport(#[from] reqwest::Error),
    /// The server refused the request with a problem.
    #[error("{status} {code:?}: {detail}", status = .0.status, code = .0.code, detail = .0.detail)]
    Api(Box<Problem>),
    /// The server answered something that is not the API's JSON.
    #[error("unexpected answer ({status}): {body}")]
    Unexpected { status: u16, body: String },
}

impl ClientError {
    /// The problem's `code`, when the server refused the request.
    pub fn code(&self) -> Option<ProblemCode> {
        match self {
            ClientError::Api(problem) => Some(problem.code),
            _ => None,
        }
    }

    pub fn problem(&self) -> Option<&Problem> {
        match self {
            ClientError::Api(problem) => Some(problem),
            _ => None,
        }
    }
}
