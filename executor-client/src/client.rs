use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use argo_results_proto::{
    AbandonRequest, Claim, ClaimList, ClaimRequest, DeleteResponse, ExpectationRequest, FeedPage,
    NodeResult, Problem, ReportRequest, ResultList, SettleRequest, Version, Whoami, WorkflowList,
};
use reqwest::header::RETRY_AFTER;
use reqwest::{Method, RequestBuilder};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::error::Failed;
use crate::retry::{Backoff, RetryPolicy};
use crate::{ClientError, TokenSource};

/// An ordinary request's time limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The server's long-poll wait when `timeoutSeconds` is not given.
const DEFAULT_WATCH_SECONDS: u64 = 30;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// `Retry-After` is honoured up to this long.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// A decoded answer and its status (`201` for a first write, `200` otherwise).
#[derive(Debug, Clone)]
pub struct Answer<T> {
    pub status: u16,
    pub body: T,
}

/// Query of a workflow's results.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListOptions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// Query of the workflows that have results.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowsOptions {
    /// Only this namespace's; every namespace's when `None` (a reader of all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// Query of a cron workflow's claims.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunsOptions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron_workflow_uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// Query of the change feed.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedOptions {
    pub since: i64,
    /// The epoch `since` was read in; the server answers `410 gone` when it is not the
    /// store's (the database was restored or replaced since).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub watch: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// A callback told of each transient failure and of the wait before the next attempt.
type NoticeFn = dyn Fn(&ClientError, Duration) + Send + Sync;

#[derive(Clone)]
struct RetryNotice(Arc<NoticeFn>);

impl std::fmt::Debug for RetryNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryNotice")
    }
}

/// Resolves the server name that replaced the URL's host (see
/// [`ClientBuilder::tls_server_name`]) to the addresses of that host, so that the
/// connection goes where the URL says while TLS speaks to the name.
#[derive(Debug)]
struct ServerNameResolver {
    /// The server name, lowercase, as the request URLs carry it.
    name: String,
    /// The URL's own host, without the brackets of an IPv6 address.
    host: String,
}

impl reqwest::dns::Resolve for ServerNameResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        // The client only ever asks for the server name; anything else is looked up as is.
        let host = if name.as_str().eq_ignore_ascii_case(&self.name) {
            self.host.clone()
        } else {
            name.as_str().to_owned()
        };
        Box::pin(async move {
            // Port 0: reqwest puts the URL's port in its place.
            let addresses: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Where requests go when a TLS server name replaces the URL's host.
#[derive(Debug)]
struct Renamed {
    /// The base URL with the server name as its host.
    base: String,
    /// The URL's own host (IPv6 in brackets), put back into the URLs errors show.
    host: String,
    resolver: ServerNameResolver,
}

/// The base URL `base` with `name` as its host, for [`ClientBuilder::tls_server_name`].
fn rename(base: &str, name: &str) -> Result<Renamed, ClientError> {
    let refuse = |detail: &str| ClientError::TlsServerName {
        name: name.to_owned(),
        detail: detail.to_owned(),
    };
    let url = reqwest::Url::parse(base)
        .map_err(|_| refuse("cannot be used: the server URL is not a URL"))?;
    if url.scheme() != "https" {
        return Err(refuse(&format!(
            "is for an https:// server URL only, not {}://",
            url.scheme()
        )));
    }
    let host = url
        .host_str()
        .filter(|host| !host.is_empty())
        .ok_or_else(|| refuse("cannot be used: the server URL names no host"))?
        .to_owned();
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return Err(refuse(
            "is an IP address: give the DNS name the certificate was issued for (for a \
             certificate issued for an IP address, put the address in the URL)",
        ));
    }
    let mut renamed = url;
    if name.is_empty() || name.contains([':', '/', '@']) || renamed.set_host(Some(name)).is_err() {
        return Err(refuse("is not a DNS name"));
    }
    let resolver = ServerNameResolver {
        name: renamed.host_str().unwrap_or(name).to_owned(),
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
    };
    Ok(Renamed {
        base: renamed.as_str().trim_end_matches('/').to_owned(),
        host,
        resolver,
    })
}

/// Configures a [`Client`].
#[derive(Debug)]
pub struct ClientBuilder {
    base: String,
    token: TokenSource,
    ca_file: Option<PathBuf>,
    tls_server_name: Option<String>,
    insecure_skip_tls_verify: bool,
    retry: Option<RetryPolicy>,
    notice: Option<RetryNotice>,
}

impl ClientBuilder {
    pub fn token(mut self, token: TokenSource) -> Self {
        self.token = token;
        self
    }

    /// Trust this PEM CA (bundle) besides the system's roots.
    pub fn ca_file(mut self, ca_file: Option<PathBuf>) -> Self {
        self.ca_file = ca_file;
        self
    }

    /// Verify the server's certificate for `name`, and send `name` as the TLS server name
    /// (SNI), instead of the URL's host, as kubectl's `--tls-server-name`: e.g.
    /// `https://127.0.0.1:8443` through `kubectl port-forward` to a server whose certificate
    /// names `argo-results.argo.svc`. The connection still goes to the URL's host and port;
    /// requests carry `name` in their `Host` header, as they would with `name` in the URL.
    /// An `https://` URL only, and a DNS name, not an IP address.
    pub fn tls_server_name(mut self, name: Option<String>) -> Self {
        self.tls_server_name = name;
        self
    }

    /// Accept any certificate the server shows, for any name, as kubectl's
    /// `--insecure-skip-tls-verify`: the connection is encrypted, but to whoever answers.
    /// For a test server only; the CA file is then not used.
    pub fn insecure_skip_tls_verify(mut self, skip: bool) -> Self {
        self.insecure_skip_tls_verify = skip;
        self
    }

    /// Retry transient failures (connection errors, timeouts, 408, 429, 502, 503, 504).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Called before each wait between attempts.
    pub fn on_retry(
        mut self,
        notice: impl Fn(&ClientError, Duration) + Send + Sync + 'static,
    ) -> Self {
        self.notice = Some(RetryNotice(Arc::new(notice)));
        self
    }

    pub fn build(self) -> Result<Client, ClientError> {
        let mut http = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT);
        if self.insecure_skip_tls_verify {
            http = http.tls_danger_accept_invalid_certs(true);
        } else if let Some(path) = &self.ca_file {
            let ca_error = |detail: String| ClientError::CaFile {
                path: path.clone(),
                detail,
            };
            let pem = std::fs::read(path).map_err(|e| ca_error(e.to_string()))?;
            let certs =
                reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ca_error(e.to_string()))?;
            if certs.is_empty() {
                return Err(ca_error("no PEM certificate in it".into()));
            }
            http = http.tls_certs_merge(certs);
        }
        let (base, shown_host) = match &self.tls_server_name {
            Some(name) => {
                let renamed = rename(&self.base, name)?;
                http = http.dns_resolver(Arc::new(renamed.resolver));
                (renamed.base, Some(renamed.host))
            }
            None => (self.base.trim_end_matches('/').to_owned(), None),
        };
        Ok(Client {
            http: http.build()?,
            base,
            shown_host,
            token: self.token,
            retry: self.retry,
            notice: self.notice,
        })
    }
}

/// A client of one argo-results server.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    /// With a TLS server name: the URL's own host, which errors name.
    shown_host: Option<String>,
    token: TokenSource,
    retry: Option<RetryPolicy>,
    notice: Option<RetryNotice>,
}

/// Whether a request carries the bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Auth {
    Token,
    /// An endpoint open to anyone: no token is read or sent.
    Anonymous,
}

fn runs_path(namespace: &str, cron_workflow: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/cronworkflows/{cron_workflow}/runs")
}

fn node_path(namespace: &str, workflow: &str, node_id: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{node_id}")
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let seconds: u64 = response
        .headers()
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

impl Client {
    /// `base_url` like `http://127.0.0.1:8080`, sending `token`, with no retries.
    pub fn new(base_url: &str, token: Option<String>) -> Result<Self, ClientError> {
        Self::builder(base_url)
            .token(token.map_or(TokenSource::None, TokenSource::Value))
            .build()
    }

    pub fn builder(base_url: &str) -> ClientBuilder {
        ClientBuilder {
            base: base_url.to_owned(),
            token: TokenSource::None,
            ca_file: None,
            tls_server_name: None,
            insecure_skip_tls_verify: false,
            retry: None,
            notice: None,
        }
    }

    /// A transport error with the URL as given: the URL's host in place of a TLS server
    /// name, so that messages name the address that was dialled.
    fn unmask(&self, mut error: reqwest::Error) -> reqwest::Error {
        if let (Some(host), Some(url)) = (&self.shown_host, error.url_mut()) {
            // The host came from a URL that parsed: it parses again.
            let _ = url.set_host(Some(host));
        }
        error
    }

    /// One attempt: the token is read afresh (with `auth`), the answer decoded as `T` or as
    /// a problem.
    async fn attempt<T: DeserializeOwned>(
        &self,
        request: &impl Fn(&reqwest::Client) -> RequestBuilder,
        timeout: Duration,
        auth: Auth,
    ) -> Result<Answer<T>, Failed> {
        let mut builder = request(&self.http);
        if auth == Auth::Token
            && let Some(token) = self.token.current()?
        {
            builder = builder.bearer_auth(token);
        }
        let timeout = match self.retry.and_then(|policy| policy.deadline) {
            Some(deadline) => timeout.min(
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_secs(1)),
            ),
            None => timeout,
        };
        let response = builder
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| self.unmask(e))?;
        let status = response.status();
        let retry_after = retry_after(&response);
        let bytes = response.bytes().await.map_err(|e| self.unmask(e))?;
        let error = if status.is_success() {
            if let Ok(body) = serde_json::from_slice(&bytes) {
                return Ok(Answer {
                    status: status.as_u16(),
                    body,
                });
            }
            None
        } else {
            serde_json::from_slice::<Problem>(&bytes)
                .ok()
                .map(|p| ClientError::Api(Box::new(p)))
        };
        let error = error.unwrap_or_else(|| ClientError::Unexpected {
            status: status.as_u16(),
            body: String::from_utf8_lossy(&bytes).into_owned(),
        });
        Err(Failed { error, retry_after })
    }

    /// Sends a request with the token, retrying transient failures as the retry policy
    /// allows.
    async fn execute<T: DeserializeOwned>(
        &self,
        request: impl Fn(&reqwest::Client) -> RequestBuilder,
        timeout: Duration,
    ) -> Result<Answer<T>, ClientError> {
        self.execute_as(request, timeout, Auth::Token).await
    }

    /// [`Client::execute`], with or without the token.
    async fn execute_as<T: DeserializeOwned>(
        &self,
        request: impl Fn(&reqwest::Client) -> RequestBuilder,
        timeout: Duration,
        auth: Auth,
    ) -> Result<Answer<T>, ClientError> {
        let mut backoff = Backoff::new();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let failed = match self.attempt(&request, timeout, auth).await {
                Ok(answer) => return Ok(answer),
                Err(failed) => failed,
            };
            let Some(policy) = self.retry else {
                return Err(failed.error);
            };
            if !policy.retries(&failed.error) {
                return Err(failed.error);
            }
            let wait = failed.retry_after.unwrap_or_else(|| backoff.next());
            if policy
                .deadline
                .is_some_and(|deadline| Instant::now() + wait > deadline)
            {
                return Err(ClientError::GaveUp {
                    attempts,
                    last: Box::new(failed.error),
                });
            }
            if let Some(notice) = &self.notice {
                (notice.0)(&failed.error, wait);
            }
            tokio::time::sleep(wait).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn call<T: DeserializeOwned>(
        &self,
        request: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> Result<T, ClientError> {
        Ok(self.execute(request, REQUEST_TIMEOUT).await?.body)
    }

    /// The wait container's report of its node's result.
    pub async fn report(
        &self,
        namespace: &str,
        workflow: &str,
        node_id: &str,
        report: &ReportRequest,
    ) -> Result<Answer<NodeResult>, ClientError> {
        let url = self.url(&format!(
            "{}/result",
            node_path(namespace, workflow, node_id)
        ));
        self.execute(
            |http| http.request(Method::PUT, &url).json(report),
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// Registers the pod whose result the controller awaits.
    pub async fn expect(
        &self,
        namespace: &str,
        workflow: &str,
        node_id: &str,
        expectation: &ExpectationRequest,
    ) -> Result<Answer<NodeResult>, ClientError> {
        let url = self.url(&format!(
            "{}/expectation",
            node_path(namespace, workflow, node_id)
        ));
        self.execute(
            |http| http.request(Method::PUT, &url).json(expectation),
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// Gives up on a node; `already_completed` carries the completed result.
    pub async fn abandon(
        &self,
        namespace: &str,
        workflow: &str,
        node_id: &str,
        abandon: &AbandonRequest,
    ) -> Result<NodeResult, ClientError> {
        let url = self.url(&format!(
            "{}/result/abandon",
            node_path(namespace, workflow, node_id)
        ));
        self.call(|http| http.post(&url).json(abandon)).await
    }

    pub async fn get_result(
        &self,
        namespace: &str,
        workflow: &str,
        node_id: &str,
        workflow_uid: Option<&str>,
    ) -> Result<NodeResult, ClientError> {
        let url = self.url(&format!(
            "{}/result",
            node_path(namespace, workflow, node_id)
        ));
        let query: Vec<(&str, &str)> = workflow_uid
            .map(|uid| ("workflowUid", uid))
            .into_iter()
            .collect();
        self.call(|http| http.get(&url).query(&query)).await
    }

    /// One page of a workflow's results; [`Client::list_all`] streams every page.
    pub async fn list_results(
        &self,
        namespace: &str,
        workflow: &str,
        options: &ListOptions,
    ) -> Result<ResultList, ClientError> {
        let url = self.url(&format!(
            "/api/v1/namespaces/{namespace}/workflows/{workflow}/results"
        ));
        self.call(|http| http.get(&url).query(options)).await
    }

    /// A page of the workflows that have results, each with what its results add up to.
    pub async fn workflows(&self, options: &WorkflowsOptions) -> Result<WorkflowList, ClientError> {
        let url = self.url("/api/v1/workflows");
        self.call(|http| http.get(&url).query(options)).await
    }

    /// Deletes every result of one workflow incarnation.
    pub async fn delete_results(
        &self,
        namespace: &str,
        workflow: &str,
        workflow_uid: &str,
    ) -> Result<DeleteResponse, ClientError> {
        let url = self.url(&format!(
            "/api/v1/namespaces/{namespace}/workflows/{workflow}/results"
        ));
        self.call(|http| http.delete(&url).query(&[("workflowUid", workflow_uid)]))
            .await
    }

    /// Changes after `options.since`, oldest first; [`Client::watch`] follows them.
    pub async fn feed(&self, options: &FeedOptions) -> Result<FeedPage, ClientError> {
        let url = self.url("/api/v1/results");
        let timeout = if options.watch {
            let wait = options.timeout_seconds.unwrap_or(DEFAULT_WATCH_SECONDS);
            Duration::from_secs(wait) + REQUEST_TIMEOUT
        } else {
            REQUEST_TIMEOUT
        };
        Ok(self
            .execute(|http| http.get(&url).query(options), timeout)
            .await?
            .body)
    }

    /// Claims one tick of a cron workflow under a lease, or takes it over from a holder
    /// whose lease expired unsettled (`takenOver`); `already_claimed` carries the claim that
    /// holds or settled the tick. [`crate::cron::run_tick`] runs the whole protocol.
    pub async fn claim(
        &self,
        namespace: &str,
        cron_workflow: &str,
        claim: &ClaimRequest,
    ) -> Result<Claim, ClientError> {
        let url = self.url(&runs_path(namespace, cron_workflow));
        self.call(|http| http.post(&url).json(claim)).await
    }

    /// Records what the holder did with its tick; idempotent for the same outcome.
    /// `lease_lost`: the tick was taken over, and its new holder finishes it.
    pub async fn settle(
        &self,
        namespace: &str,
        cron_workflow: &str,
        settle: &SettleRequest,
    ) -> Result<Claim, ClientError> {
        let url = self.url(&format!("{}/settle", runs_path(namespace, cron_workflow)));
        self.call(|http| http.post(&url).json(settle)).await
    }

    /// One page of a cron workflow's claims, newest first, with its newest settled tick.
    pub async fn runs(
        &self,
        namespace: &str,
        cron_workflow: &str,
        options: &RunsOptions,
    ) -> Result<ClaimList, ClientError> {
        let url = self.url(&runs_path(namespace, cron_workflow));
        self.call(|http| http.get(&url).query(options)).await
    }

    pub async fn whoami(&self) -> Result<Whoami, ClientError> {
        let url = self.url("/api/v1/whoami");
        self.call(|http| http.get(&url)).await
    }

    /// The server's release and report protocol (`GET /version`), asked without a token.
    pub async fn version(&self) -> Result<Version, ClientError> {
        let url = self.url("/version");
        Ok(self
            .execute_as(|http| http.get(&url), REQUEST_TIMEOUT, Auth::Anonymous)
            .await?
            .body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(base: &str, name: &str) -> String {
        match rename(base, name) {
            Err(error @ ClientError::TlsServerName { .. }) => error.to_string(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_tls_server_name_replaces_the_host_and_resolves_to_it() {
        let renamed = rename("https://127.0.0.1:8443/", "Argo-Results.argo.svc").expect("renamed");
        assert_eq!(renamed.base, "https://argo-results.argo.svc:8443");
        assert_eq!(renamed.host, "127.0.0.1");
        assert_eq!(renamed.resolver.name, "argo-results.argo.svc");
        assert_eq!(renamed.resolver.host, "127.0.0.1");
        let v6 = rename("https://[::1]:8443/prefix", "results.example").expect("renamed");
        assert_eq!(v6.base, "https://results.example:8443/prefix");
        assert_eq!(
            (v6.host.as_str(), v6.resolver.host.as_str()),
            ("[::1]", "::1")
        );
    }

    #[test]
    fn a_tls_server_name_needs_https_and_a_dns_name() {
        assert!(refusal("http://127.0.0.1:8080", "a.svc").contains("https:// server URL only"));
        for name in ["10.0.0.1", "[::1]", "::1"] {
            assert!(
                refusal("https://127.0.0.1", name).contains("is an IP address"),
                "{name}"
            );
        }
        for name in ["", "a.svc:443", "a/b", "u@a.svc", "a b"] {
            assert!(
                refusal("https://127.0.0.1", name).contains("not a DNS name"),
                "{name:?}"
            );
        }
    }
}
