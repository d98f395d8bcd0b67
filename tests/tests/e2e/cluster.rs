//! Authentication, pod binding and `--rbac` against the real Kubernetes API server and
//! etcd ([`argo_results_tests::cluster`]): tokens the cluster issues through TokenRequest,
//! bound to real Pods; its OIDC discovery and JWKS; its TokenReview; its
//! SubjectAccessReview deciding with `deploy/base`'s ClusterRoles and bindings, applied
//! with `kubectl apply`. The server talks to the API server as `deploy/base`'s
//! ServiceAccount `argo/argo-results`, with only the rights `deploy/base` grants it.
//!
//! What stays on the fake API server (`fake_kube.rs`), and why:
//! - an API server that fails, is slow or flaps on demand: `security.rs`
//!   `cluster_keys_rotate_without_a_restart_and_survive_a_failing_endpoint` (its failing
//!   JWKS; the rotation itself is `kube_jwks_follows_a_key_rotation_without_a_restart`
//!   here) and `readiness_waits_for_the_cluster_keys`; `hostile.rs`'s slow and failing
//!   reviews;
//! - counting the calls it serves: `security.rs` `cluster_keys_are_fetched_rarely` and
//!   `token_reviews_are_cached`, `hostile.rs` `garbage_never_reaches_token_review` and
//!   `rbac_floods_stay_off_the_api_server`;
//! - claims no API server issues (a wrong `sub`, a forged `kubernetes.io` claim, another
//!   algorithm), signed by a key it trusts: `security.rs`'s attack suite with
//!   `--kube-jwks` and `--token-review`;
//! - a token that has expired: the API server issues none shorter than 10 minutes, so
//!   expiry stays with the attack suite's tokens (`security.rs`) and `auth.rs`.

use std::sync::OnceLock;
use std::time::Duration;

use argo_results_client::ClientError;
use argo_results_client::proto::{
    ExpectationRequest, PROTOCOL_VERSION, ProblemCode, ReportRequest,
};
use argo_results_tests::cluster::{API_SERVER_AUDIENCE, AUDIENCE, Cluster, Keys};
use argo_results_tests::tokens::{self, CONTROLLER, READER};
use argo_results_tests::{Auth, Backend, TestServer, eventually};
use reqwest::Method;

/// Argo's namespace in `deploy/base`: its controller `argo` and `argo-server` live here.
const ARGO: &str = "argo";
/// argo-server's account in Argo's install manifests. argo-server reads nodes from the
/// Workflow object and never calls argo-results, so `deploy/` grants it nothing.
const ARGO_SERVER: &str = "system:serviceaccount:argo:argo-server";
const WF: &str = "hello";
const WF_UID: &str = "0d6f1b52-7b1e-4f57-9a43-2f0c5e9d3a11";

/// `deploy/<dir>` as `kubectl kustomize` renders it, with `edit` applied to the text.
fn deploy(dir: &str, edit: impl Fn(String) -> String) -> String {
    let path = format!("{}/../deploy/{dir}", env!("CARGO_MANIFEST_DIR"));
    let output = std::process::Command::new("kubectl")
        .args(["kustomize", &path])
        .output()
        .expect("kubectl is installed");
    assert!(output.status.success(), "kubectl kustomize {path}");
    edit(String::from_utf8(output.stdout).expect("UTF-8"))
}

/// Applies `manifests` to `cluster` as an operator would, into namespace `argo`.
fn apply(cluster: &Cluster, manifests: &str) -> String {
    let namespace = cluster.kubectl(
        &[
            "create",
            "namespace",
            ARGO,
            "--dry-run=client",
            "-o",
            "yaml",
        ],
        "",
    );
    cluster.kubectl(&["apply", "-f", "-"], &namespace);
    cluster.kubectl(&["apply", "-f", "-"], manifests)
}

/// The shared control plane with `deploy/base` applied for real, once per test process.
fn cluster() -> &'static Cluster {
    static APPLIED: OnceLock<()> = OnceLock::new();
    let cluster = Cluster::shared();
    APPLIED.get_or_init(|| {
        let applied = apply(cluster, &deploy("base", |text| text));
        eprintln!("deploy/base applied:\n{applied}");
    });
    cluster
}

/// A server on `backend` asking `cluster` as `deploy/base`'s ServiceAccount, with `flags`
/// (`--kube-jwks`, `--token-review`, `--rbac`), ready.
async fn server(cluster: &Cluster, backend: Backend, flags: &[&str]) -> TestServer {
    let kubeconfig = cluster.kubeconfig_for(ARGO, "argo-results").await;
    let server = TestServer::builder(backend)
        .auth(Auth::Kube(&kubeconfig))
        .flags(flags)
        .start()
        .await;
    server.wait_ready().await;
    server
}

/// A token of the service account `subject` (`system:serviceaccount:NS:NAME`) bound to no
/// pod, as Argo's controller or argo-server hold.
async fn account_token(cluster: &Cluster, subject: &str) -> String {
    let mut parts = subject.rsplit(':');
    let (name, namespace) = (
        parts.next().expect("name"),
        parts.next().expect("namespace"),
    );
    cluster.ensure_namespace(namespace).await;
    cluster.service_account(namespace, name).await;
    cluster.token(namespace, name, AUDIENCE, None, 3600).await
}

/// A Pod of a step of workflow [`WF`] in `namespace`, with its bound token.
struct Pod {
    namespace: String,
    name: String,
    uid: String,
    token: String,
}

impl Pod {
    /// The Pod of node `<workflow>-<hash>`, named as Argo names it.
    async fn create(cluster: &Cluster, namespace: &str, hash: u32) -> Pod {
        let name = format!("{WF}-main-{hash}");
        let uid = cluster.pod(namespace, &name, "default").await;
        let token = Pod::token_for(cluster, namespace, &name, &uid).await;
        Pod {
            namespace: namespace.to_owned(),
            name,
            uid,
            token,
        }
    }

    async fn token_for(cluster: &Cluster, namespace: &str, name: &str, uid: &str) -> String {
        cluster
            .token(namespace, "default", AUDIENCE, Some((name, uid)), 600)
            .await
    }

    /// A token bound to this Pod for the API server's own audience, not argo-results'.
    async fn token_for_the_api_server(&self, cluster: &Cluster) -> String {
        let pod = Some((self.name.as_str(), self.uid.as_str()));
        cluster
            .token(&self.namespace, "default", API_SERVER_AUDIENCE, pod, 600)
            .await
    }

    fn node(&self) -> String {
        self.name.replace("-main-", "-")
    }

    fn expectation(&self) -> ExpectationRequest {
        ExpectationRequest {
            workflow_uid: WF_UID.into(),
            pod_name: self.name.clone(),
            pod_uid: Some(self.uid.clone()),
        }
    }

    fn report(&self) -> ReportRequest {
        ReportRequest {
            protocol_version: PROTOCOL_VERSION,
            workflow_uid: WF_UID.into(),
            pod_name: self.name.clone(),
            pod_uid: self.uid.clone(),
            instance_id: None,
            sequence: Some(1),
            is_final: true,
            outputs: None,
            progress: None,
            phase: None,
            message: None,
        }
    }

    /// Its wait container's final report, with the token `token`.
    async fn report_with(&self, server: &TestServer, token: &str) -> Result<(), ClientError> {
        server
            .client(Some(token.to_owned()))
            .report(&self.namespace, WF, &self.node(), &self.report())
            .await
            .map(drop)
    }
}

/// The status of `GET /api/v1/whoami` with `token`.
async fn whoami_status(server: &TestServer, token: &str) -> u16 {
    server.get("/api/v1/whoami", Some(token)).await.status
}

fn code(result: Result<(), ClientError>) -> Option<ProblemCode> {
    let error = result.expect_err("refused");
    eprintln!("refused: {error}");
    error.code()
}

on_both_backends!(kube_jwks_accepts_the_tokens_the_cluster_issues);

async fn kube_jwks_accepts_the_tokens_the_cluster_issues(backend: Backend) {
    let cluster = cluster();
    let server = server(cluster, backend, &["--kube-jwks"]).await;
    let namespace = cluster.namespace("jwks").await;
    let controller = server.client(Some(account_token(cluster, CONTROLLER).await));
    let pod = Pod::create(cluster, &namespace, 1529417051).await;

    // The pod's token names its Pod: the server shows the binding the cluster signed.
    let whoami = server.get("/api/v1/whoami", Some(&pod.token)).await;
    assert_eq!(whoami.status, 200, "{}", whoami.text);
    assert_eq!(
        whoami.json["pod"]["name"],
        pod.name.as_str(),
        "{}",
        whoami.text
    );
    assert_eq!(
        whoami.json["pod"]["uid"],
        pod.uid.as_str(),
        "{}",
        whoami.text
    );

    // Not registered yet: refused (--require-expectation is the default with cluster keys).
    assert_eq!(
        code(pod.report_with(&server, &pod.token).await),
        Some(ProblemCode::NotExpected)
    );
    controller
        .expect(&namespace, WF, &pod.node(), &pod.expectation())
        .await
        .expect("the controller registers the pod");
    pod.report_with(&server, &pod.token)
        .await
        .expect("the pod's final report");
    let stored = controller
        .get_result(&namespace, WF, &pod.node(), None)
        .await
        .expect("stored");
    assert_eq!(stored.pod_uid.as_deref(), Some(pod.uid.as_str()));

    // Another pod of the same namespace cannot write the node registered for this one.
    let other = Pod::create(cluster, &namespace, 1529417052).await;
    let foreign = server
        .client(Some(other.token.clone()))
        .report(&namespace, WF, &pod.node(), &pod.report())
        .await
        .map(drop);
    assert!(foreign.is_err(), "another pod wrote this pod's node");

    // A token the cluster issued for another audience (the API server's own) is refused.
    let for_the_api_server = pod.token_for_the_api_server(cluster).await;
    assert_eq!(whoami_status(&server, &for_the_api_server).await, 401);
}

#[tokio::test]
async fn binding_refuses_a_recreated_pod_with_another_uid() {
    let cluster = cluster();
    let server = server(cluster, Backend::Sqlite, &["--kube-jwks"]).await;
    let namespace = cluster.namespace("binding").await;
    let controller = server.client(Some(account_token(cluster, CONTROLLER).await));
    let first = Pod::create(cluster, &namespace, 1529417053).await;
    controller
        .expect(&namespace, WF, &first.node(), &first.expectation())
        .await
        .expect("registered");
    // The Pod is deleted and another made under the same name: a new UID, a valid token.
    cluster.delete_pod(&namespace, &first.name).await;
    let second = Pod::create(cluster, &namespace, 1529417053).await;
    assert_ne!(first.uid, second.uid);
    let impostor = ReportRequest {
        pod_uid: second.uid.clone(),
        ..first.report()
    };
    let refused = server
        .client(Some(second.token.clone()))
        .report(&namespace, WF, &first.node(), &impostor)
        .await
        .map(drop);
    assert_eq!(code(refused), Some(ProblemCode::PodMismatch));
    // Naming the registered UID in the body does not help: the token's UID is the
    // cluster's, and it is the new one.
    let claimed = first.report_with(&server, &second.token).await;
    assert!(claimed.is_err(), "the recreated pod took the node");
    assert_eq!(
        server
            .count("SELECT COUNT(*) FROM results WHERE state = 'completed'")
            .await,
        0
    );
}

#[tokio::test]
async fn token_review_refuses_what_the_api_server_refuses() {
    let cluster = cluster();
    let server = server(cluster, Backend::Sqlite, &["--token-review"]).await;
    let namespace = cluster.namespace("review").await;
    let pod = Pod::create(cluster, &namespace, 1529417054).await;
    assert_eq!(whoami_status(&server, &pod.token).await, 200);
    // A token minted while the Pod lived, first used after it was deleted: the API server
    // refuses it, and so does the server.
    let later = Pod::token_for(cluster, &namespace, &pod.name, &pod.uid).await;
    cluster.delete_pod(&namespace, &pod.name).await;
    let refused = server.get("/api/v1/whoami", Some(&later)).await;
    assert_eq!(
        (refused.status, refused.json["code"].as_str()),
        (401, Some("unauthenticated")),
        "{}",
        refused.text
    );
    // Another audience: refused before any review is asked, and by the review too.
    let alive = Pod::create(cluster, &namespace, 1529417055).await;
    let for_the_api_server = alive.token_for_the_api_server(cluster).await;
    assert_eq!(whoami_status(&server, &for_the_api_server).await, 401);
    assert_eq!(whoami_status(&server, &alive.token).await, 200);
}

#[tokio::test]
async fn kube_jwks_follows_a_key_rotation_without_a_restart() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let cluster = Cluster::start(dir.path(), Keys::FIRST);
    // The server's own identity here is the admin's certificate, which a key rotation
    // leaves valid (a pod's projected token would be renewed by its kubelet).
    let server = TestServer::builder(Backend::Sqlite)
        .auth(Auth::Kube(&cluster.kubeconfig))
        .flags(&["--kube-jwks"])
        .start()
        .await;
    server.wait_ready().await;
    let old = account_token(&cluster, READER).await;
    assert_eq!(whoami_status(&server, &old).await, 200);

    // A second key added and made the signing one: the API server restarted with both.
    let cluster = cluster.restart(Keys {
        trusted: "1,2",
        signing: "2",
    });
    let new = account_token(&cluster, READER).await;
    // Its unknown key ID makes the server fetch the keys again (at most every 30 s).
    let trusted = async || (whoami_status(&server, &new).await == 200).then_some(());
    eventually("the new key is trusted", Duration::from_secs(45), trusted).await;
    assert_eq!(
        whoami_status(&server, &old).await,
        200,
        "the old key is still trusted"
    );

    // The first key retired: its tokens are refused from the server's next fetch of the
    // keys, every 10 minutes or at once for a token of an unknown key, as this one.
    let _cluster = cluster.restart(Keys {
        trusted: "2",
        signing: "2",
    });
    let unknown_key = tokens::user_token(READER);
    let retired = async || {
        whoami_status(&server, &unknown_key).await;
        (whoami_status(&server, &old).await == 401).then_some(())
    };
    eventually(
        "the retired key is refused",
        Duration::from_secs(45),
        retired,
    )
    .await;
    assert_eq!(whoami_status(&server, &new).await, 200);
}

#[tokio::test]
async fn unbound_executor_tokens_need_the_option_and_rbac() {
    let cluster = cluster();
    let flags = ["--token-review", "--allow-unbound-executor-tokens"];
    let lenient = server(cluster, Backend::Sqlite, &flags).await;
    let namespace = cluster.namespace("unbound").await;
    let controller = lenient.client(Some(account_token(cluster, CONTROLLER).await));
    // An executor whose token names no pod: granted `create` by deploy/base's
    // argo-results-executor in this namespace, and another that is not.
    let executor = granted_in(
        cluster,
        &namespace,
        "workflow-executor",
        "argo-results-executor",
    )
    .await;
    cluster.service_account(&namespace, "other-executor").await;
    let ungranted = cluster
        .token(&namespace, "other-executor", AUDIENCE, None, 3600)
        .await;
    // The Pod exists; the token does not name it, so the UID the controller registered is
    // what binds the row.
    let pod = Pod::create(cluster, &namespace, 1529417070).await;
    controller
        .expect(&namespace, WF, &pod.node(), &pod.expectation())
        .await
        .expect("registered");
    let refused = pod.report_with(&lenient, &ungranted).await;
    assert_eq!(code(refused), Some(ProblemCode::Forbidden), "no RBAC grant");
    pod.report_with(&lenient, &executor)
        .await
        .expect("the granted executor reports");
    let stored = controller
        .get_result(&namespace, WF, &pod.node(), None)
        .await
        .expect("stored");
    assert_eq!(stored.pod_uid.as_deref(), Some(pod.uid.as_str()));

    // Without the option the same token is refused, and the answer says how to enable it.
    let strict = server(cluster, Backend::Sqlite, &["--token-review"]).await;
    let answer = strict
        .client(Some(executor))
        .report(&namespace, WF, &pod.node(), &pod.report())
        .await
        .expect_err("refused");
    assert_eq!(answer.code(), Some(ProblemCode::Forbidden));
    assert!(
        answer
            .to_string()
            .contains("--allow-unbound-executor-tokens"),
        "{answer}"
    );
}

/// A ServiceAccount `account` of `namespace` granted `deploy/base`'s ClusterRole `role`
/// there by a RoleBinding, as docs/security.md tells an operator to grant it; its token.
async fn granted_in(cluster: &Cluster, namespace: &str, account: &str, role: &str) -> String {
    cluster.service_account(namespace, account).await;
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": account, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    });
    cluster
        .call(
            Method::POST,
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings"),
            Some(binding),
        )
        .await;
    cluster
        .token(namespace, account, AUDIENCE, None, 3600)
        .await
}

/// What `--rbac` decides for Argo's controller and argo-server (their accounts, as
/// `system:serviceaccount:NS:NAME`), a reader of one namespace and a stranger, through the
/// cluster's SubjectAccessReview; the failures, one per line. Nothing grants argo-server:
/// every call of its is refused `403` `forbidden`, so a grant re-added to `deploy/` fails
/// here. Every `403` must carry the code `forbidden`.
async fn rbac_decisions(cluster: &Cluster, controller: &str, argo_server: &str) -> Vec<String> {
    let server = server(cluster, Backend::Sqlite, &["--kube-jwks", "--rbac"]).await;
    let team = cluster.namespace("team").await;
    let elsewhere = cluster.namespace("elsewhere").await;
    let controller = account_token(cluster, controller).await;
    let argo_server = account_token(cluster, argo_server).await;
    let reader = granted_in(cluster, &team, "team-reader", "argo-results-reader").await;
    let stranger = {
        cluster.service_account(&team, "stranger").await;
        cluster.token(&team, "stranger", AUDIENCE, None, 3600).await
    };
    let pod = Pod::create(cluster, &team, 1529417060).await;

    let list = |namespace: &str| format!("/api/v1/namespaces/{namespace}/workflows/{WF}/results");
    let expectation = format!(
        "/api/v1/namespaces/{team}/workflows/{WF}/nodes/{}/expectation",
        pod.node()
    );
    let expectation_body = serde_json::to_string(&pod.expectation()).expect("JSON");
    let mut failures = Vec::new();
    let mut check = async |what: &str, method: Method, path: &str, token: &str, want: u16| {
        let body = if method == Method::PUT {
            expectation_body.clone()
        } else {
            String::new()
        };
        let content_type = (method == Method::PUT).then_some("application/json");
        let answer = server
            .raw(
                method.clone(),
                path,
                Some(token),
                content_type,
                body.into_bytes(),
            )
            .await;
        let forbidden = ProblemCode::Forbidden.to_string();
        let code_ok = want != 403 || answer.json["code"].as_str() == Some(forbidden.as_str());
        if answer.status != want || !code_ok {
            let code = if want == 403 { " forbidden" } else { "" };
            failures.push(format!(
                "{what}: {method} {path}: expected {want}{code}, got {} {}",
                answer.status, answer.text
            ));
        }
    };
    check(
        "argo-server may not list",
        Method::GET,
        &list(&team),
        &argo_server,
        403,
    )
    .await;
    check(
        "argo-server may not follow the feed",
        Method::GET,
        "/api/v1/results",
        &argo_server,
        403,
    )
    .await;
    check(
        "argo-server may not register",
        Method::PUT,
        &expectation,
        &argo_server,
        403,
    )
    .await;
    check(
        "the controller registers",
        Method::PUT,
        &expectation,
        &controller,
        201,
    )
    .await;
    check(
        "the controller lists",
        Method::GET,
        &list(&elsewhere),
        &controller,
        200,
    )
    .await;
    check(
        "the controller follows the feed",
        Method::GET,
        "/api/v1/results",
        &controller,
        200,
    )
    .await;
    let delete = format!("{}?workflowUid={WF_UID}", list(&team));
    check(
        "the controller deletes",
        Method::DELETE,
        &delete,
        &controller,
        200,
    )
    .await;
    check(
        "a reader of its namespace lists",
        Method::GET,
        &list(&team),
        &reader,
        200,
    )
    .await;
    check(
        "a reader of one namespace, another",
        Method::GET,
        &list(&elsewhere),
        &reader,
        403,
    )
    .await;
    check(
        "a reader of one namespace, every namespace",
        Method::GET,
        "/api/v1/results",
        &reader,
        403,
    )
    .await;
    let feed = format!("/api/v1/results?namespace={team}");
    check(
        "a reader of one namespace, its feed",
        Method::GET,
        &feed,
        &reader,
        200,
    )
    .await;
    check(
        "a reader may not delete",
        Method::DELETE,
        &delete,
        &reader,
        403,
    )
    .await;
    check(
        "a stranger may not list",
        Method::GET,
        &list(&team),
        &stranger,
        403,
    )
    .await;
    check(
        "a stranger may not register",
        Method::PUT,
        &expectation,
        &stranger,
        403,
    )
    .await;
    check(
        "a pod needs no RBAC to ask who it is",
        Method::GET,
        "/api/v1/whoami",
        &pod.token,
        200,
    )
    .await;
    failures
}

#[tokio::test]
async fn rbac_decides_as_deploy_base_grants() {
    let failures = rbac_decisions(cluster(), CONTROLLER, ARGO_SERVER).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The argo-helm overlay binds the controller's ClusterRole to the account argo-helm's
/// chart names, and nothing to its argo-server's; Argo's raw-manifest controller account
/// then has no rights, which the first decision below shows.
#[tokio::test]
async fn rbac_decides_as_the_argo_helm_overlay_grants() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let cluster = Cluster::start(dir.path(), Keys::FIRST);
    apply(&cluster, &deploy("overlays/argo-helm", |text| text));
    let server = server(&cluster, Backend::Sqlite, &["--kube-jwks", "--rbac"]).await;
    let raw_manifests_controller = account_token(&cluster, CONTROLLER).await;
    let list = format!("/api/v1/namespaces/{ARGO}/workflows/{WF}/results");
    let refused = server.get(&list, Some(&raw_manifests_controller)).await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    let failures = rbac_decisions(
        &cluster,
        "system:serviceaccount:argo:argo-workflows-workflow-controller",
        "system:serviceaccount:argo:argo-workflows-server",
    )
    .await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The negative control of the test above: `delete` removed from `deploy/base`'s
/// `argo-results-controller` ClusterRole makes the controller's delete a 403, decided by
/// the API server's SubjectAccessReview, and nothing else changes.
#[tokio::test]
async fn rbac_a_rule_removed_from_deploy_base_is_a_403() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let cluster = Cluster::start(dir.path(), Keys::FIRST);
    let controller_role = "verbs:\n  - get\n  - list\n  - create\n  - delete\n";
    let base = deploy("base", |text| {
        assert!(
            text.contains(controller_role),
            "the controller's verbs in:\n{text}"
        );
        text.replace(controller_role, "verbs:\n  - get\n  - list\n  - create\n")
    });
    apply(&cluster, &base);
    let failures = rbac_decisions(&cluster, CONTROLLER, ARGO_SERVER).await;
    assert_eq!(failures.len(), 1, "{}", failures.join("\n"));
    assert!(
        failures[0].starts_with("the controller deletes: DELETE")
            && failures[0].contains("expected 200, got 403"),
        "{}",
        failures[0]
    );
}

/// `--help`'s "Example (production)" starts as written against the real API server, the
/// cluster's keys and discovery: only the database (the test's Postgres) and the port (any
/// free one) are the test's. Its `--controller` and `--reader` then hold: the controller's
/// account and the admin's get their roles.
#[tokio::test]
async fn the_help_production_example_starts() {
    let help =
        std::process::Command::new(argo_results_tests::server::binary("argo-results-server"))
            .arg("--help")
            .output()
            .expect("--help");
    let help = String::from_utf8(help.stdout).expect("UTF-8");
    let example: String = help
        .lines()
        .skip_while(|line| !line.starts_with("Example (production):"))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .map(|line| line.trim().trim_end_matches('\\'))
        .collect::<Vec<_>>()
        .join(" ");
    let words: Vec<&str> = example.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"argo-results-server"), "{example}");
    // The database is the harness's (it passes --database-url itself); the port any.
    let mut flags = Vec::new();
    let mut rest = words[1..].iter();
    while let Some(word) = rest.next() {
        match *word {
            "--database-url" => {
                rest.next();
            }
            "--listen" => {
                let address = rest.next().expect("an address");
                let host = address.rsplit_once(':').expect("host:port").0;
                flags.extend(["--listen".to_owned(), format!("{host}:0")]);
            }
            other => flags.push(other.to_owned()),
        }
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let cluster = cluster();
    let server = server(cluster, Backend::Postgres, &flags).await;
    let roles = async |subject: &str| {
        let token = account_token(cluster, subject).await;
        server.get("/api/v1/whoami", Some(&token)).await.json["roles"].clone()
    };
    assert_eq!(
        roles("system:serviceaccount:argo:argo").await,
        serde_json::json!(["reader", "controller"]),
        "the example: {example}"
    );
    assert_eq!(
        roles("system:serviceaccount:argo:argo-results-admin").await,
        serde_json::json!(["reader"]),
        "the example: {example}"
    );
}
