//! How a command ends badly: one line on stderr, and an exit code a script can act on (the
//! codes are listed in `argo-results --help`).

use std::process::ExitCode;

use argo_results_client::ClientError;
use argo_results_client::proto::ProblemCode;

#[derive(Debug)]
pub enum Failure {
    /// Bad arguments, environment or files: exit 2.
    Usage(String),
    /// The server refused the request: exit 3.
    Refused(ClientError),
    /// Nothing of what `get` names exists: exit 3, as the server's `404 not_found`.
    NotFound(String),
    /// The server cannot be reached or spoken to, said at once: exit 4.
    Unreachable(String),
    /// Transient failures lasted until the deadline: exit 4.
    GaveUp(ClientError),
    /// Stdout was closed (`| head`): nothing more to say, exit 0.
    StdoutClosed,
    /// Anything else: exit 1.
    Other(String),
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::GaveUp { .. } => Failure::GaveUp(error),
            ClientError::Api(_) => Failure::Refused(error),
            ClientError::CaFile { .. }
            | ClientError::TokenFile { .. }
            | ClientError::TlsServerName { .. } => Failure::Usage(explain(&error)),
            other if other.is_transient() => Failure::GaveUp(other),
            other => Failure::Other(explain(&other)),
        }
    }
}

/// What a failure to talk to the server means, when it is not going to mend by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Diagnosis {
    /// Nothing listens at the address.
    Refused,
    /// The host name does not resolve.
    UnknownHost,
    /// `https://` to a server that speaks plain HTTP (rustls: "corrupt message").
    PlainHttpServer,
    /// `http://` to a server that speaks TLS (hyper: "invalid HTTP version").
    TlsServer,
    /// The server's certificate is not trusted.
    Certificate,
    /// The server's certificate names another host than the one dialled.
    CertificateName,
}

/// The scheme, host and port of the URL a transport error was for.
fn origin(error: &reqwest::Error) -> Option<(String, String)> {
    let url = error.url()?;
    Some((url.scheme().to_owned(), url.origin().ascii_serialization()))
}

/// Whether an `io::Error` in the error's chain has `kind`.
fn has_io_kind(error: &reqwest::Error, kind: std::io::ErrorKind) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == kind)
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// Why a request got no answer, when that is a mistake of configuration rather than a
/// passing failure (a timeout, a reset, a closed connection are none of these).
pub fn diagnose(error: &ClientError) -> Option<Diagnosis> {
    let ClientError::Transport(transport) = error else {
        return None;
    };
    let text = error.to_string().to_ascii_lowercase();
    let scheme = origin(transport).map(|(scheme, _)| scheme);
    if transport.is_timeout() {
        return None;
    }
    if has_io_kind(transport, std::io::ErrorKind::ConnectionRefused)
        || text.contains("connection refused")
    {
        return Some(Diagnosis::Refused);
    }
    if text.contains("dns error") || text.contains("failed to lookup address") {
        return Some(Diagnosis::UnknownHost);
    }
    if scheme.as_deref() == Some("https")
        && (text.contains("corrupt message") || text.contains("invalidcontenttype"))
    {
        return Some(Diagnosis::PlainHttpServer);
    }
    if scheme.as_deref() == Some("http") && text.contains("invalid http version") {
        return Some(Diagnosis::TlsServer);
    }
    if text.contains("not valid for name") {
        return Some(Diagnosis::CertificateName);
    }
    if text.contains("invalid peer certificate") || text.contains("certificate verify failed") {
        return Some(Diagnosis::Certificate);
    }
    None
}

/// The other scheme's URL of the same host and port.
fn with_scheme(origin: &str, scheme: &str) -> String {
    match origin.split_once("://") {
        Some((_, rest)) => format!("{scheme}://{rest}"),
        None => origin.to_owned(),
    }
}

/// A client error in words an operator can act on: what went wrong, at which URL, and
/// what to do; the underlying error follows in parentheses.
pub fn explain(error: &ClientError) -> String {
    match error {
        ClientError::GaveUp { attempts, last } => {
            format!(
                "gave up at the deadline after {attempts} attempts; last error: {}",
                explain(last)
            )
        }
        ClientError::TokenFile { .. } => format!(
            "{error} (the bearer token: --token-file or ARGO_RESULTS_TOKEN_FILE, else \
             ARGO_RESULTS_TOKEN)"
        ),
        ClientError::CaFile { .. } => {
            format!("{error} (a PEM CA bundle: --ca-file or ARGO_RESULTS_CA_FILE)")
        }
        ClientError::TlsServerName { .. } => {
            format!("{error} (--tls-server-name or ARGO_RESULTS_TLS_SERVER_NAME)")
        }
        ClientError::Transport(transport) => {
            let Some(diagnosis) = diagnose(error) else {
                return error.to_string();
            };
            let (_, at) = origin(transport).unwrap_or_default();
            let what = match diagnosis {
                Diagnosis::Refused => format!(
                    "cannot connect to {at}: connection refused: is argo-results-server \
                     running there, and is the URL (--server or ARGO_RESULTS_URL) right?"
                ),
                Diagnosis::UnknownHost => format!(
                    "cannot resolve the host of {at}: check the URL (--server or \
                     ARGO_RESULTS_URL)"
                ),
                Diagnosis::PlainHttpServer => format!(
                    "{at} answered in plain HTTP, not TLS: use {}, or serve TLS \
                     (argo-results-server --tls-cert FILE --tls-key FILE)",
                    with_scheme(&at, "http")
                ),
                Diagnosis::TlsServer => format!(
                    "{at} did not answer in plain HTTP: the server speaks TLS, use {}",
                    with_scheme(&at, "https")
                ),
                Diagnosis::Certificate => format!(
                    "the TLS certificate of {at} is not trusted: pass the CA that signed \
                     it with --ca-file or ARGO_RESULTS_CA_FILE, and use the host name or \
                     address it was issued for"
                ),
                Diagnosis::CertificateName => format!(
                    "the TLS certificate of {at} was issued for another name: use a name it \
                     was issued for, in the URL or with --tls-server-name NAME (as through \
                     kubectl port-forward to 127.0.0.1)"
                ),
            };
            format!("{what} ({error})")
        }
        _ => error.to_string(),
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
        let (message, code) = match self {
            Failure::Usage(message) => (message.clone(), 2),
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
                (format!("{detail}{}", hint(error)), 3)
            }
            Failure::NotFound(message) => (message.clone(), 3),
            Failure::Unreachable(message) => (message.clone(), 4),
            Failure::GaveUp(error) => (explain(error), 4),
            Failure::StdoutClosed => return ExitCode::SUCCESS,
            Failure::Other(message) => (message.clone(), 1),
        };
        eprintln!("argo-results: {message}");
        ExitCode::from(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_other_scheme_keeps_host_and_port() {
        assert_eq!(
            with_scheme("https://127.0.0.1:8080", "http"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            with_scheme("http://results.argo:443", "https"),
            "https://results.argo:443"
        );
    }

    #[test]
    fn an_api_refusal_is_no_transport_diagnosis() {
        let problem = serde_json::from_str(
            r#"{"type":"about:blank","title":"Not Found","status":404,"code":"not_found","detail":"no such result"}"#,
        )
        .expect("a problem");
        let error = ClientError::Api(Box::new(problem));
        assert_eq!(diagnose(&error), None);
        assert!(matches!(Failure::from(error), Failure::Refused(_)));
    }
}
