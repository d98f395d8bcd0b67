//! The connection and namespace flags of the admin commands, and how they call the server.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use argo_results_client::{Client, ClientBuilder, ClientError, RetryPolicy, TokenSource};
use clap::Args;
use clap::builder::BoolishValueParser;
use tokio::time::Instant;

use super::failure::{self, Failure};
use super::kubeconfig;

#[derive(Debug, Args)]
pub struct Connection {
    /// The server's URL, with its scheme: http:// or https://.
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

    #[command(flatten)]
    pub tls: TlsArgs,

    /// Give up retrying an overloaded or restarting server after this long (a refused
    /// connection, a TLS mismatch or a missing token file fail at once).
    #[arg(long, default_value = "30s", value_parser = super::parse_duration)]
    pub timeout: Duration,
}

/// kubectl's flags for a server whose certificate does not name the URL's host.
#[derive(Debug, Args)]
pub struct TlsArgs {
    /// Verify the server's certificate for NAME, and send NAME as the TLS server name
    /// (SNI), instead of the URL's host.
    ///
    /// As kubectl's flag: e.g. --server https://127.0.0.1:8443 through kubectl port-forward
    /// to a server whose certificate names argo-results.argo.svc. The connection still goes
    /// to the URL's address. An https:// URL only, and a DNS name.
    #[arg(long, env = "ARGO_RESULTS_TLS_SERVER_NAME", value_name = "NAME")]
    pub tls_server_name: Option<String>,

    /// Do not verify the server's certificate at all (a warning on stderr says so).
    ///
    /// As kubectl's flag: the connection is encrypted, but to whoever answers. For a test
    /// server only; --ca-file is then not used. ARGO_RESULTS_INSECURE_SKIP_TLS_VERIFY takes
    /// true or false.
    #[arg(
        long,
        env = "ARGO_RESULTS_INSECURE_SKIP_TLS_VERIFY",
        value_parser = BoolishValueParser::new()
    )]
    pub insecure_skip_tls_verify: bool,
}

/// The warning of --insecure-skip-tls-verify, printed once however many clients a command
/// makes.
static INSECURE_WARNING: Once = Once::new();

impl TlsArgs {
    /// `builder` with these flags, warning on stderr when the certificate of an `https://`
    /// server will not be verified.
    pub fn apply(&self, builder: ClientBuilder, server: &str) -> ClientBuilder {
        let https = reqwest::Url::parse(server).is_ok_and(|url| url.scheme() == "https");
        if self.insecure_skip_tls_verify && https {
            INSECURE_WARNING.call_once(|| {
                eprintln!(
                    "argo-results: warning: --insecure-skip-tls-verify: the server's \
                     certificate is not verified, so the connection is not secure: anyone \
                     in between can read and change it"
                );
            });
        }
        builder
            .tls_server_name(self.tls_server_name.clone())
            .insecure_skip_tls_verify(self.insecure_skip_tls_verify)
    }
}

/// Checks that the server's URL can be used as it is: `http://` or `https://` and a host.
/// A URL without a scheme would otherwise fail every attempt until the deadline.
pub fn check_server_url(url: &str, source: &str) -> Result<(), Failure> {
    // Messages show the URL without its password.
    let shown = argo_results_client::proto::redacted(url);
    let usage = |why: String| Failure::Usage(format!("the server URL {shown:?} ({source}) {why}"));
    let no_scheme = || {
        usage(format!(
            "has no scheme: use http://{shown} (or https://{shown} for a server with TLS)"
        ))
    };
    if !url.contains("://") {
        return Err(no_scheme());
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| usage(format!("is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(usage(format!(
            "has the scheme {}://: use http:// or https://",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(usage("names no host".into()));
    }
    Ok(())
}

/// Prints each transient failure before the wait that follows it.
fn notice(error: &ClientError, wait: Duration) {
    eprintln!(
        "argo-results: {}; retrying in {:.1}s",
        failure::explain(error),
        wait.as_secs_f64()
    );
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

    fn builder(&self) -> Result<argo_results_client::ClientBuilder, Failure> {
        check_server_url(&self.server, "--server or ARGO_RESULTS_URL")?;
        let builder = Client::builder(&self.server)
            .token(self.token())
            .ca_file(self.ca_file.clone());
        Ok(self.tls.apply(builder, &self.server))
    }

    /// A client that retries transient failures until `deadline` (`None`: without end).
    pub fn client_until(&self, deadline: Option<Instant>) -> Result<Client, Failure> {
        Ok(self
            .builder()?
            .retry(RetryPolicy {
                deadline,
                ..RetryPolicy::default()
            })
            .on_retry(notice)
            .build()?)
    }

    /// The server as an interactive command calls it: see [`Api::call`].
    pub fn api(&self) -> Result<Api, Failure> {
        Ok(Api {
            once: self.builder()?.build()?,
            retrying: self.client_until(Some(Instant::now() + self.timeout))?,
            deadline: Instant::now() + self.timeout,
        })
    }
}

/// The server, for a command someone waits for at a terminal.
#[derive(Debug)]
pub struct Api {
    /// Tries once: its failure says at once what is wrong.
    once: Client,
    /// Retries transient failures until `--timeout`.
    retrying: Client,
    deadline: Instant,
}

impl Api {
    /// Calls `op` once; a mistake that waiting cannot mend (nothing listens at the URL, a
    /// host that does not resolve, TLS spoken to a plain server or the other way round, an
    /// untrusted certificate, a token file that cannot be read) fails at once. Other
    /// transient failures (overload, a server restarting, a timeout) are retried until
    /// `--timeout`, as `report` retries them.
    pub async fn call<T, F, Fut>(&self, op: F) -> Result<T, Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let error = match op(self.once.clone()).await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if failure::diagnose(&error).is_some() {
            return Err(Failure::Unreachable(failure::explain(&error)));
        }
        if matches!(error, ClientError::TokenFile { .. }) || !error.is_transient() {
            return Err(error.into());
        }
        let wait = Duration::from_secs(1);
        if Instant::now() + wait > self.deadline {
            return Err(Failure::GaveUp(ClientError::GaveUp {
                attempts: 1,
                last: Box::new(error),
            }));
        }
        notice(&error, wait);
        tokio::time::sleep(wait).await;
        Ok(op(self.retrying.clone()).await?)
    }
}

/// `-n` as given: a namespace is never empty.
fn given(namespace: &str) -> Result<String, Failure> {
    if namespace.trim().is_empty() {
        return Err(Failure::Usage(
            "-n/--namespace is empty: give a namespace, or leave -n out for the default".into(),
        ));
    }
    Ok(namespace.to_owned())
}

/// `-n/--namespace` of a command that works in one namespace.
#[derive(Debug, Args)]
pub struct NamespaceArg {
    /// The namespace [default: ARGO_RESULTS_NAMESPACE, else the namespace of the current
    /// kubeconfig context, else default].
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// The namespace when `-n` is not given: `ARGO_RESULTS_NAMESPACE`, else the current
/// kubeconfig context's (`KUBECONFIG`, else `~/.kube/config`), else `default`, as kubectl.
pub fn default_namespace() -> Result<String, Failure> {
    if let Ok(namespace) = std::env::var("ARGO_RESULTS_NAMESPACE")
        && !namespace.trim().is_empty()
    {
        return Ok(namespace.trim().to_owned());
    }
    match kubeconfig::current_namespace() {
        Ok(namespace) => Ok(namespace.unwrap_or_else(|| "default".into())),
        Err(unreadable) => Err(Failure::Usage(format!(
            "cannot read the kubeconfig {}: {} (it gives the default namespace: fix it, \
             point KUBECONFIG elsewhere, or pass -n/--namespace)",
            unreadable.path.display(),
            unreadable.detail
        ))),
    }
}

impl NamespaceArg {
    /// `-n`, else [`default_namespace`].
    pub fn resolve(&self) -> Result<String, Failure> {
        match &self.namespace {
            Some(namespace) => given(namespace),
            None => default_namespace(),
        }
    }

    /// The namespace and name that a NAME argument gives: `NAME` in `-n`'s namespace, or
    /// the older `NAMESPACE/NAME`, still taken with a note on stderr that gives the new
    /// form (`command` and `rest`: the command line around the name, for the note).
    pub fn locate(
        &self,
        text: &str,
        command: &str,
        rest: &str,
    ) -> Result<(String, String), Failure> {
        let Some((namespace, name)) = text.split_once('/') else {
            return Ok((self.resolve()?, text.to_owned()));
        };
        // Kubernetes names hold no '/': `argo/wf/node` is a node given as a third part.
        if namespace.is_empty() || name.is_empty() || name.contains('/') {
            return Err(Failure::Usage(format!(
                "{text:?} is not a name: give NAME, with -n NAMESPACE, e.g. \
                 argo-results {command} etl-x7k2p -n argo"
            )));
        }
        let new_form = format!("argo-results {command} {name}{rest} -n {namespace}");
        if let Some(flag) = &self.namespace
            && flag != namespace
        {
            return Err(Failure::Usage(format!(
                "{text:?} names namespace {namespace} but -n says {flag}: give the name \
                 alone, e.g. argo-results {command} {name}{rest} -n {flag}"
            )));
        }
        eprintln!("argo-results: NAMESPACE/NAME is the old form; use: {new_form}");
        Ok((namespace.to_owned(), name.to_owned()))
    }
}

/// `-n` and `-A` of a command that may work across namespaces.
#[derive(Debug, Args)]
pub struct NamespacesArg {
    /// The namespace [default: ARGO_RESULTS_NAMESPACE, else the namespace of the current
    /// kubeconfig context, else default].
    #[arg(short, long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,

    /// Every namespace (the caller must be a reader of all of them).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

impl NamespacesArg {
    /// The one namespace, or `None` for all of them.
    pub fn resolve(&self) -> Result<Option<String>, Failure> {
        match (&self.namespace, self.all_namespaces) {
            (_, true) => Ok(None),
            (Some(namespace), false) => given(namespace).map(Some),
            (None, false) => default_namespace().map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(result: Result<(), Failure>) -> String {
        match result {
            Err(Failure::Usage(message)) => message,
            other => panic!("expected a usage failure, got {other:?}"),
        }
    }

    #[test]
    fn a_server_url_needs_http_or_https_and_a_host() {
        for url in [
            "http://127.0.0.1:8080",
            "https://results.argo.svc:8443/",
            "http://[::1]:8080",
        ] {
            assert!(check_server_url(url, "--server").is_ok(), "{url}");
        }
        let secret = usage(check_server_url("u:SECRET@127.0.0.1:8080", "--server"));
        assert!(
            secret.contains("use http://u:***@127.0.0.1:8080") && !secret.contains("SECRET"),
            "{secret}"
        );
        let no_scheme = usage(check_server_url("127.0.0.1:8080", "--server"));
        assert!(
            no_scheme.contains("has no scheme: use http://127.0.0.1:8080"),
            "{no_scheme}"
        );
        // Parsed by a URL parser as the scheme `localhost`.
        assert!(usage(check_server_url("localhost:8080", "--server")).contains("no scheme"));
        assert!(usage(check_server_url("ftp://host", "--server")).contains("ftp://"));
        assert!(usage(check_server_url("http://", "--server")).contains("http://"));
    }

    #[test]
    fn the_old_namespace_slash_name_form_is_taken_unless_n_disagrees() {
        let none = NamespaceArg { namespace: None };
        assert_eq!(
            none.locate("argo/etl", "get", "").ok(),
            Some(("argo".into(), "etl".into()))
        );
        let same = NamespaceArg {
            namespace: Some("argo".into()),
        };
        assert_eq!(
            same.locate("argo/etl", "get", "").ok(),
            Some(("argo".into(), "etl".into()))
        );
        assert_eq!(
            same.locate("etl", "get", "").ok(),
            Some(("argo".into(), "etl".into()))
        );
        let other = NamespaceArg {
            namespace: Some("prod".into()),
        };
        assert!(matches!(
            other.locate("argo/etl", "get", ""),
            Err(Failure::Usage(message)) if message.contains("-n says prod")
        ));
        assert!(matches!(
            same.locate("argo/etl/node", "get", ""),
            Err(Failure::Usage(_))
        ));
    }
}
