//! How a command ends badly: one line on stderr, and an exit code a script can act on.

use std::process::ExitCode;

use argo_results_client::ClientError;
use argo_results_client::proto::ProblemCode;

#[derive(Debug)]
pub enum Failure {
    /// Bad arguments or environment: exit 2.
    Usage(String),
    /// The server refused the request: exit 3.
    Refused(ClientError),
    /// Transient failures lasted until the deadline: exit 4.
    GaveUp(ClientError),
    /// Anything else: exit 1.
    Other(String),
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::GaveUp { .. } => Failure::GaveUp(error),
            ClientError::Api(_) => Failure::Refused(error),
            ClientError::CaFile { .. } | ClientError::TokenFile { .. } => {
                Failure::Usage(error.to_string())
            }
            other if other.is_transient() => Failure::GaveUp(other),
            other => Failure::Other(other.to_string()),
        }
    }
}

/// What to do next, for the refusals an operator can act on.
fn hint(error: &ClientError) -> &'static str {
    match error.code() {
        Some(ProblemCode::Unauthenticated) => {
            " (check the token: ARGO_RESULTS_TOKEN, --token-file or ARGO_RESULTS_TOKEN_FILE)"
        }
        Some(ProblemCode::Forbidden) => {
            " (argo-results whoami shows who the server thinks you are)"
        }
        _ => "",
    }
}

impl Failure {
    /// Prints the failure and returns the exit code.
    pub fn report(&self) -> ExitCode {
        match self {
            Failure::Usage(message) => {
                eprintln!("argo-results: {message}");
                ExitCode::from(2)
            }
            Failure::Refused(error) => {
                let detail = match error.problem() {
                    Some(problem) => {
                        format!(
                            "refused: {} {}: {}",
                            problem.status, problem.code, problem.detail
                        )
                    }
                    None => format!("refused: {error}"),
                };
                eprintln!("argo-results: {detail}{}", hint(error));
                ExitCode::from(3)
            }
            Failure::GaveUp(error) => {
                eprintln!("argo-results: {error}");
                ExitCode::from(4)
            }
            Failure::Other(message) => {
                eprintln!("argo-results: {message}");
                ExitCode::FAILURE
            }
        }
    }
}
