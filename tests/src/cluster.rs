//! The real Kubernetes control plane: kube-apiserver and etcd built from their Go modules
//! (`tests/kube/`, its `build` script caches the binary by version), started on loopback
//! by `kube-control-plane up`. The tokens here are the API server's own: TokenRequest for a
//! service account, bound to a real Pod (stored with a real UID; no kubelet runs, so it
//! stays Pending), checked by the server through the cluster's real OIDC discovery, JWKS,
//! TokenReview and SubjectAccessReview.
//!
//! [`Cluster::shared`] is one control plane per test process (each test takes namespaces
//! of its own); [`Cluster::start`] one of the test's own, for what changes the whole
//! cluster (its signing keys, its ClusterRoles). The control plane stops when its
//! [`Cluster`] is dropped or the test process exits (it stops when its standard input
//! closes).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The audience argo-results' tokens carry, as Argo's pods would request them.
pub const AUDIENCE: &str = crate::tokens::AUDIENCE;
/// The API server's own audience (its issuer), which tokens for it carry.
pub const API_SERVER_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// A running control plane.
#[derive(Debug)]
pub struct Cluster {
    /// Its standard input: closed (dropped) to stop it.
    stdin: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
    /// Where it keeps etcd's data, its keys and its kubeconfigs.
    pub dir: PathBuf,
    /// The admin kubeconfig (system:masters).
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// `control plane: kube-apiserver v1.N.M, etcd vX.Y.Z, ready in S s`, as printed.
    pub banner: String,
    ca: Vec<u8>,
    identity: Vec<u8>,
}

/// What a test asks of its own control plane (see `tests/kube/up --help`).
#[derive(Debug, Clone, Copy)]
pub struct Keys<'a> {
    /// Service-account keys trusted, by name: `"1"`, then `"1,2"`, then `"2"` rotates.
    pub trusted: &'a str,
    /// The one that signs new tokens.
    pub signing: &'a str,
}

impl Keys<'static> {
    pub const FIRST: Keys<'static> = Keys {
        trusted: "1",
        signing: "1",
    };
}

/// The control plane binary, built by `tests/kube/build` unless this machine has it.
fn binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("kube/build");
            eprintln!("==> the Kubernetes control plane: {}", script.display());
            let output = Command::new(&script)
                .stderr(Stdio::inherit())
                .output()
                .unwrap_or_else(|error| panic!("cannot run {}: {error}", script.display()));
            assert!(
                output.status.success(),
                "{} failed ({}): the real kube-apiserver and etcd are built from their Go \
                 modules, which needs Go and the Go module proxy (see its output above)",
                script.display(),
                output.status
            );
            let stdout = String::from_utf8(output.stdout).expect("UTF-8 path");
            PathBuf::from(stdout.lines().last().expect("the binary's path").trim())
        })
        .clone()
}

impl Cluster {
    /// The control plane of this test process, started by the first test that asks. `up`
    /// keeps it in a directory of its own and removes it when it stops, with the process.
    pub fn shared() -> &'static Cluster {
        static SHARED: OnceLock<Cluster> = OnceLock::new();
        SHARED.get_or_init(|| Cluster::launch(None, Keys::FIRST))
    }

    /// A control plane of the test's own in `dir`, which keeps its state across a
    /// [`Cluster::restart`].
    pub fn start(dir: &Path, keys: Keys<'_>) -> Cluster {
        Cluster::launch(Some(dir), keys)
    }

    fn launch(dir: Option<&Path>, keys: Keys<'_>) -> Cluster {
        let mut command = Command::new(binary());
        command.arg("up");
        if let Some(dir) = dir {
            command.arg("--dir").arg(dir);
        }
        let mut child = command
            .args(["--sa-keys", keys.trusted, "--sa-signing-key", keys.signing])
            .arg("--stop-with-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start kube-control-plane up");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        // `up` says on stderr why it stopped, with its logs' last lines.
        let mut next = || match lines.next() {
            Some(Ok(line)) => line,
            _ => panic!("the control plane did not start: see kube-control-plane up's lines above"),
        };
        let banner = next();
        let kubeconfig = PathBuf::from(
            next()
                .strip_prefix("kubeconfig: ")
                .expect("the kubeconfig line"),
        );
        // Once per control plane, as `tests/kube/up` prints it: the CI log shows it.
        eprintln!("{banner}\nkubeconfig: {}", kubeconfig.display());
        let dir = kubeconfig
            .parent()
            .expect("the kubeconfig's directory")
            .to_owned();
        let url = std::fs::read_to_string(dir.join("ports"))
            .ok()
            .and_then(|ports| ports.split_whitespace().next().map(str::to_owned))
            .map(|port| format!("https://127.0.0.1:{port}"))
            .expect("the ports file");
        let read = |name: &str| std::fs::read(dir.join(name)).expect("the control plane's PKI");
        let mut identity = read("admin.crt");
        identity.extend(read("admin.key"));
        let ca = read("ca.crt");
        Cluster {
            stdin: Mutex::new(child.stdin.take()),
            child: Mutex::new(child),
            dir,
            kubeconfig,
            url,
            banner,
            ca,
            identity,
        }
    }

    /// Stops this control plane and starts it again on the same state with `keys`, as an
    /// operator restarts kube-apiserver with new `--service-account-key-file`s.
    pub fn restart(self, keys: Keys<'_>) -> Cluster {
        let dir = self.dir.clone();
        drop(self);
        Cluster::start(&dir, keys)
    }

    /// An HTTP client with the admin's certificate. One per call site: a client's
    /// connections belong to the runtime of the test that made them.
    pub fn admin(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(&self.ca).expect("CA")])
            .identity(reqwest::Identity::from_pem(&self.identity).expect("admin identity"))
            .build()
            .expect("client")
    }

    /// Sends `body` to `path` as the admin and returns the answer's JSON; panics unless
    /// the API server answered 2xx.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (status, answer) = self.try_call(method.clone(), path, body).await;
        assert!(status.is_success(), "{method} {path}: {status} {answer}");
        answer
    }

    /// As [`Cluster::call`], returning the status whatever it is.
    pub async fn try_call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self.admin().request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.expect("the API server answers");
        let status = answer.status();
        let text = answer.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// A namespace of the test's own (`<prefix>-<n>`), with its `default` service account,
    /// which a controller manager would make and which Pods need.
    pub async fn namespace(&self, prefix: &str) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.ensure_namespace(&name).await;
        name
    }

    /// Creates `namespace` and its `default` service account unless they exist.
    pub async fn ensure_namespace(&self, namespace: &str) {
        let body =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        self.create("/api/v1/namespaces", body).await;
        self.service_account(namespace, "default").await;
    }

    /// Creates a service account unless it exists.
    pub async fn service_account(&self, namespace: &str, name: &str) {
        let body = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": name, "namespace": namespace}});
        self.create(
            &format!("/api/v1/namespaces/{namespace}/serviceaccounts"),
            body,
        )
        .await;
    }

    /// POSTs an object; one that exists already is left as it is.
    async fn create(&self, path: &str, body: Value) {
        let (status, answer) = self.try_call(Method::POST, path, Some(body)).await;
        assert!(
            status.is_success() || status == StatusCode::CONFLICT,
            "POST {path}: {status} {answer}"
        );
    }

    /// Creates a Pod running as `account` and returns its UID. It stays Pending: no kubelet
    /// runs here, which is all a token bound to it needs.
    pub async fn pod(&self, namespace: &str, name: &str, account: &str) -> String {
        let body = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"serviceAccountName": account,
                     "containers": [{"name": "main", "image": "argoproj/argosay:v2"}]},
        });
        let pod = self
            .call(
                Method::POST,
                &format!("/api/v1/namespaces/{namespace}/pods"),
                Some(body),
            )
            .await;
        pod["metadata"]["uid"].as_str().expect("uid").to_owned()
    }

    /// Deletes a Pod at once (it was never scheduled, so nothing waits for a kubelet).
    pub async fn delete_pod(&self, namespace: &str, name: &str) {
        self.call(
            Method::DELETE,
            &format!("/api/v1/namespaces/{namespace}/pods/{name}"),
            None,
        )
        .await;
    }

    /// A token from the TokenRequest API for `account`, for `audience`, bound to the Pod
    /// `pod` (name and UID) if given, valid for `seconds` (at least 600, Kubernetes' least).
    pub async fn token(
        &self,
        namespace: &str,
        account: &str,
        audience: &str,
        pod: Option<(&str, &str)>,
        seconds: u32,
    ) -> String {
        let mut spec = json!({"audiences": [audience], "expirationSeconds": seconds});
        if let Some((name, uid)) = pod {
            spec["boundObjectRef"] =
                json!({"kind": "Pod", "apiVersion": "v1", "name": name, "uid": uid});
        }
        let request =
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
        let answer = self
            .call(
                Method::POST,
                &format!("/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"),
                Some(request),
            )
            .await;
        answer["status"]["token"]
            .as_str()
            .expect("a token")
            .to_owned()
    }

    /// A kubeconfig that acts as the service account `namespace/account` (a token from
    /// TokenRequest for the API server's own audience), as a pod of it would.
    pub async fn kubeconfig_for(&self, namespace: &str, account: &str) -> PathBuf {
        self.service_account(namespace, account).await;
        let token = self
            .token(namespace, account, API_SERVER_AUDIENCE, None, 86_400)
            .await;
        let path = self.dir.join(format!("{namespace}-{account}.kubeconfig"));
        let config = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "test", "cluster": {
                "server": self.url,
                "certificate-authority": self.dir.join("ca.crt"),
            }}],
            "users": [{"name": account, "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": account, "namespace": namespace}}],
            "current-context": "test",
        });
        std::fs::write(&path, serde_json::to_string(&config).expect("JSON")).expect("kubeconfig");
        path
    }

    /// Runs `kubectl` (Debian's `kubernetes-client`) as the admin with `stdin`, and returns
    /// its standard output; panics with its error unless it succeeded.
    pub fn kubectl(&self, args: &[&str], stdin: &str) -> String {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl (Debian's kubernetes-client) is installed");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write kubectl's input");
        let output = child.wait_with_output().expect("kubectl");
        assert!(
            output.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("UTF-8")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Its standard input closed, `up` stops the API server and etcd and exits.
        drop(self.stdin.lock().expect("stdin").take());
        let _ = self.child.lock().expect("child").wait();
    }
}
