use argo_results_proto::{
    AbandonRequest, Claim, ClaimList, ClaimRequest, DeleteResponse, ExpectationRequest, FeedPage,
    NodeResult, Problem, ReportRequest, ResultList, Whoami,
};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ClientError;

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

/// Query of the change feed.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedOptions {
    pub since: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub watch: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// A client of one argo-results server, authenticated by one bearer token.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

fn node_path(namespace: &str, workflow: &str, node_id: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{node_id}")
}

impl Client {
    /// `base_url` like `http://127.0.0.1:8080`; `token` sent as `Authorization: Bearer`.
    pub fn new(base_url: &str, token: Option<String>) -> Result<Self, ClientError> {
        Ok(Client {
            http: reqwest::Client::builder().build()?,
            base: base_url.trim_end_matches('/').to_owned(),
            token,
        })
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    async fn send<T: DeserializeOwned>(
        &self,
        request: RequestBuilder,
    ) -> Result<Answer<T>, ClientError> {
        let response = request.send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        if status.is_success() {
            if let Ok(body) = serde_json::from_slice(&bytes) {
                return Ok(Answer {
                    status: status.as_u16(),
                    body,
                });
            }
        } else if let Ok(problem) = serde_json::from_slice::<Problem>(&bytes) {
            return Err(ClientError::Api(Box::new(problem)));
        }
        Err(ClientError::Unexpected {
            status: status.as_u16(),
            body: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    async fn body<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, ClientError> {
        Ok(self.send(request).await?.body)
    }

    /// The wait container's report of its node's result.
    pub async fn report(
        &self,
        namespace: &str,
        workflow: &str,
        node_id: &str,
        report: &ReportRequest,
    ) -> Result<Answer<NodeResult>, ClientError> {
        let path = format!("{}/result", node_path(namespace, workflow, node_id));
        self.send(self.request(Method::PUT, &path).json(report))
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
        let path = format!("{}/expectation", node_path(namespace, workflow, node_id));
        self.send(self.request(Method::PUT, &path).json(expectation))
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
        let path = format!("{}/result/abandon", node_path(namespace, workflow, node_id));
        self.body(self.request(Method::POST, &path).json(abandon))
            .await
    }

    pub async fn get_result(
        &self,
        namespace: &str,
        workflow: &str,
        node_id: &str,
        workflow_uid: Option<&str>,
    ) -> Result<NodeResult, ClientError> {
        let path = format!("{}/result", node_path(namespace, workflow, node_id));
        let mut request = self.request(Method::GET, &path);
        if let Some(uid) = workflow_uid {
            request = request.query(&[("workflowUid", uid)]);
        }
        self.body(request).await
    }

    pub async fn list_results(
        &self,
        namespace: &str,
        workflow: &str,
        options: &ListOptions,
    ) -> Result<ResultList, ClientError> {
        let path = format!("/api/v1/namespaces/{namespace}/workflows/{workflow}/results");
        self.body(self.request(Method::GET, &path).query(options))
            .await
    }

    /// Deletes every result of one workflow incarnation.
    pub async fn delete_results(
        &self,
        namespace: &str,
        workflow: &str,
        workflow_uid: &str,
    ) -> Result<DeleteResponse, ClientError> {
        let path = format!("/api/v1/namespaces/{namespace}/workflows/{workflow}/results");
        let request = self
            .request(Method::DELETE, &path)
            .query(&[("workflowUid", workflow_uid)]);
        self.body(request).await
    }

    /// Changes after `options.since`, oldest first.
    pub async fn feed(&self, options: &FeedOptions) -> Result<FeedPage, ClientError> {
        self.body(self.request(Method::GET, "/api/v1/results").query(options))
            .await
    }

    /// Claims one tick of a cron workflow; `already_claimed` carries the existing claim.
    pub async fn claim(
        &self,
        namespace: &str,
        cron_workflow: &str,
        claim: &ClaimRequest,
    ) -> Result<Claim, ClientError> {
        let path = format!("/api/v1/namespaces/{namespace}/cronworkflows/{cron_workflow}/runs");
        self.body(self.request(Method::POST, &path).json(claim))
            .await
    }

    pub async fn claims(
        &self,
        namespace: &str,
        cron_workflow: &str,
        cron_workflow_uid: Option<&str>,
    ) -> Result<ClaimList, ClientError> {
        let path = format!("/api/v1/namespaces/{namespace}/cronworkflows/{cron_workflow}/runs");
        let mut request = self.request(Method::GET, &path);
        if let Some(uid) = cron_workflow_uid {
            request = request.query(&[("cronWorkflowUid", uid)]);
        }
        self.body(request).await
    }

    pub async fn whoami(&self) -> Result<Whoami, ClientError> {
        self.body(self.request(Method::GET, "/api/v1/whoami")).await
    }

    /// `true` once `/readyz` answers 200.
    pub async fn ready(&self) -> Result<bool, ClientError> {
        let response = self.request(Method::GET, "/readyz").send().await?;
        Ok(response.status() == StatusCode::OK)
    }
}
