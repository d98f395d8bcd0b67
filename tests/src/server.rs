//! Starting the real server binary for one test, on a fresh database.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argo_results_client::Client;
use sqlx::{PgPool, SqlitePool};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::eventually;
use crate::tokens::{self, CONTROLLER, ISSUER, READER};

/// A connection pool to a test server's database, on its own driver.
#[derive(Debug)]
pub enum Db {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

impl Db {
    pub async fn close(&self) {
        match self {
            Db::Postgres(pool) => pool.close().await,
            Db::Sqlite(pool) => pool.close().await,
        }
    }
}

/// Runs `$body` with `$pool` bound to the pool of a [`Db`], whichever database it is: the
/// same SQL text (with `$n` parameters) runs on both.
#[macro_export]
macro_rules! on_db {
    ($db:expr, |$pool:ident| $body:expr) => {
        match $db {
            $crate::server::Db::Postgres($pool) => $body,
            $crate::server::Db::Sqlite($pool) => $body,
        }
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// A binary of the workspace, built by `cargo test --workspace` next to the test executable.
/// `ARGO_RESULTS_TEST_SERVER` names another server binary to test instead (e.g. an older
/// release, to measure a change: `tests/bench/hostile.sh`).
pub fn binary(name: &str) -> PathBuf {
    if name == "argo-results-server"
        && let Some(path) = std::env::var_os("ARGO_RESULTS_TEST_SERVER")
    {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run the tests with `cargo test --workspace`, which builds it",
        path.display()
    );
    path
}

fn postgres_url() -> String {
    std::env::var("ARGO_RESULTS_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The test Postgres's URL for another database of the same server (`postgres` to create
/// and drop databases), with the same user, host, port and parameters: `tests/run` may
/// have started a private server on another port.
pub fn postgres_database_url(database: &str) -> String {
    let url = postgres_url();
    let (base, query) = url
        .split_once('?')
        .map_or((url.as_str(), None), |(b, q)| (b, Some(q)));
    let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
    match query {
        Some(query) => format!("{server}/{database}?{query}"),
        None => format!("{server}/{database}"),
    }
}

/// A schema name that no other server of this test process, or of another, is given.
fn unique_schema() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("t_{}_{n}", std::process::id())
}

/// The URL of a `listening on` line, printed as text or (`--log-format json`) as a JSON
/// object whose `fields.url` is the URL.
fn listening_on(line: &str) -> Option<String> {
    const PREFIX: &str = "argo-results-server listening on ";
    if let Some(url) = line.strip_prefix(PREFIX) {
        return Some(url.to_owned());
    }
    let json: serde_json::Value = serde_json::from_str(line).ok()?;
    let fields = &json["fields"];
    fields["message"]
        .as_str()?
        .starts_with(PREFIX)
        .then(|| fields["url"].as_str().map(str::to_owned))?
}

/// A running server process.
#[derive(Debug)]
pub struct TestServer {
    child: Child,
    /// The server's program (itself, or a wrapper that execs it), arguments and
    /// environment, to start it again on the same store.
    program: std::ffi::OsString,
    args: Vec<std::ffi::OsString>,
    envs: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    url: String,
    /// What the server printed on stdout.
    stdout: Arc<Mutex<String>>,
    database_url: String,
    schema: Option<String>,
    pub backend: Backend,
    /// Shared so that a test can start another server on the same files.
    pub dir: Arc<TempDir>,
}

/// How a test server checks tokens.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    /// `--jwks-file` with the test keys and their issuer (any issuer with `--any-issuer`).
    /// Reports need no expectation unless the flags say `--require-expectation`: most
    /// cases test one rule of a report apart from the pod binding, whose own cases ask
    /// for it.
    TestKeys,
    /// Asks the Kubernetes API server of this kubeconfig (the real one of
    /// [`crate::cluster`] or the fake of [`crate::fake_kube`]) as the flags say
    /// (`--kube-jwks`, `--token-review`, `--rbac`). Reports need an expectation, the default
    /// that these servers are there to show.
    Kube(&'a Path),
    /// `--auth none`.
    None,
    /// No flag about authentication: the server's default on loopback, dev auth.
    Dev,
}

/// A test server to start: [`TestServer::builder`], what the test changes, then
/// [`Builder::start`].
#[derive(Debug)]
#[must_use]
pub struct Builder<'a> {
    backend: Backend,
    auth: Auth<'a>,
    flags: Vec<String>,
    env: Vec<(String, String)>,
    database_url: Option<String>,
    bare: bool,
    open_files: Option<u32>,
}

impl<'a> Builder<'a> {
    /// Flags after those the builder adds; `--listen`, `--rbac` (no `--controller` and
    /// `--reader`) and `--any-issuer` replace the builder's own.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.flags
            .extend(flags.iter().map(|flag| (*flag).to_owned()));
        self
    }

    /// An environment variable of the server (e.g. `RUST_LOG`).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// How it checks tokens; [`Auth::TestKeys`] unless said.
    pub fn auth(mut self, auth: Auth<'a>) -> Self {
        self.auth = auth;
        self
    }

    /// The store at `url` that the test made (its own Postgres, or a SQLite file where it
    /// wants it), instead of a fresh one.
    pub fn database_url(mut self, url: &str) -> Self {
        self.database_url = Some(url.to_owned());
        self
    }

    /// Runs the server with at most `n` open files (`ulimit -n`), through util-linux's
    /// `prlimit`, which execs it: the same process.
    pub fn open_files(mut self, n: u32) -> Self {
        self.open_files = Some(n);
        self
    }

    /// No flag but the test's: the server's own defaults (address, store, auth) in its
    /// scratch directory, which is what the embedded default's cases test.
    pub fn bare(mut self) -> Self {
        self.bare = true;
        self
    }

    fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Starts the server and waits until it listens.
    pub async fn start(self) -> TestServer {
        let dir = Arc::new(tempfile::tempdir().expect("scratch directory"));
        let mut command = match self.open_files {
            None => Command::new(binary("argo-results-server")),
            Some(n) => {
                let mut prlimit = Command::new("prlimit");
                prlimit
                    .arg(format!("--nofile={n}:{n}"))
                    .arg("--")
                    .arg(binary("argo-results-server"));
                prlimit
            }
        };
        command.current_dir(dir.path());
        if self.bare {
            let database_url = format!("sqlite://{}", dir.path().join("argo-results.db").display());
            command.args(&self.flags).envs(self.env);
            return TestServer::launch(command, self.backend, dir, database_url, None).await;
        }
        let (database_url, schema) = match (&self.database_url, self.backend) {
            (Some(url), _) => (url.clone(), None),
            (None, Backend::Sqlite) => (
                format!("sqlite://{}", dir.path().join("results.db").display()),
                None,
            ),
            (None, Backend::Postgres) => {
                let schema = fresh_schema().await;
                let separator = if postgres_url().contains('?') {
                    '&'
                } else {
                    '?'
                };
                let url = format!(
                    "{}{separator}options=-csearch_path%3D{schema}",
                    postgres_url()
                );
                (url, Some(schema))
            }
        };
        if !self.has("--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        command
            .args(["--database-url", &database_url])
            .arg("--data-dir")
            .arg(dir.path());
        match self.auth {
            Auth::TestKeys => {
                let jwks = dir.path().join("jwks.json");
                std::fs::write(&jwks, &tokens::keys().jwks).expect("write JWKS");
                command.arg("--jwks-file").arg(&jwks);
                if !self.has("--any-issuer") {
                    command.args(["--issuer", ISSUER]);
                }
                if !self
                    .flags
                    .iter()
                    .any(|f| f.starts_with("--require-expectation"))
                {
                    command.arg("--require-expectation=false");
                }
            }
            Auth::Kube(kubeconfig) => {
                command.env("KUBECONFIG", kubeconfig);
            }
            Auth::None => {
                command.args(["--auth", "none"]);
            }
            Auth::Dev => {}
        }
        let checks_tokens = matches!(self.auth, Auth::TestKeys | Auth::Kube(_));
        if checks_tokens && !self.has("--rbac") {
            command.args(["--controller", CONTROLLER, "--reader", READER]);
        }
        command.args(&self.flags).envs(self.env);
        TestServer::launch(command, self.backend, dir, database_url, schema).await
    }
}

/// Creates a schema of its own on the test Postgres, for one server, and names it.
async fn fresh_schema() -> String {
    let schema = unique_schema();
    let admin = PgPool::connect(&postgres_url())
        .await
        .expect("Postgres is not reachable");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await
        .expect("create schema");
    admin.close().await;
    schema
}

impl TestServer {
    /// A server on `backend` trusting the test keys, with the test controller and reader,
    /// on a fresh store, once [`Builder::start`] is called.
    pub fn builder<'a>(backend: Backend) -> Builder<'a> {
        Builder {
            backend,
            auth: Auth::TestKeys,
            flags: Vec::new(),
            env: Vec::new(),
            database_url: None,
            bare: false,
            open_files: None,
        }
    }

    /// Runs `command` (the server binary with its flags) and waits until it listens.
    async fn launch(
        mut command: Command,
        backend: Backend,
        dir: Arc<TempDir>,
        database_url: String,
        schema: Option<String>,
    ) -> Self {
        let program = command.as_std().get_program().to_owned();
        let args = command.as_std().get_args().map(ToOwned::to_owned).collect();
        let envs = command
            .as_std()
            .get_envs()
            .filter_map(|(key, value)| Some((key.to_owned(), value?.to_owned())))
            .collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("server.log"))
            .expect("server log");
        if !command
            .as_std()
            .get_envs()
            .any(|(key, _)| key == "RUST_LOG")
        {
            command.env("RUST_LOG", "warn");
        }
        let mut child = command
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("start argo-results-server");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let stdout = Arc::new(Mutex::new(String::new()));
        let wait_for_address = async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                stdout
                    .lock()
                    .expect("stdout")
                    .push_str(&format!("{line}\n"));
                if let Some(url) = listening_on(&line) {
                    return Some(url);
                }
            }
            None
        };
        let url = tokio::time::timeout(Duration::from_secs(30), wait_for_address)
            .await
            .ok()
            .flatten();
        let Some(url) = url else {
            let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
            panic!("the server did not start; its log:\n{log}");
        };
        let captured = Arc::clone(&stdout);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                captured
                    .lock()
                    .expect("stdout")
                    .push_str(&format!("{line}\n"));
            }
        });
        TestServer {
            child,
            program,
            args,
            envs,
            url,
            stdout,
            database_url,
            schema,
            backend,
            dir,
        }
    }

    /// The database URL the server was given (with its schema, on Postgres).
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    /// The Postgres schema of this server's store.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `host:port` the server listens on.
    pub fn address(&self) -> &str {
        self.url.rsplit("://").next().unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running server")
    }

    /// The CPU time the server has used, in clock ticks (`getconf CLK_TCK`).
    pub fn cpu_ticks(&self) -> u64 {
        cpu_ticks(self.pid()).expect("/proc/<pid>/stat")
    }

    /// The server's resident set, in MiB.
    pub fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("/proc/<pid>/status");
        let kib: f64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kib / 1024.0
    }

    /// Everything the server printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.lock().expect("stdout").clone()
    }

    /// The `--jwks-file` of a server started with [`Auth::TestKeys`].
    pub fn jwks_file(&self) -> std::path::PathBuf {
        self.dir.path().join("jwks.json")
    }

    /// Everything the server logged (stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn client(&self, token: Option<String>) -> Client {
        Client::new(&self.url, token).expect("client")
    }

    pub fn controller(&self) -> Client {
        self.client(Some(tokens::user_token(CONTROLLER)))
    }

    pub fn reader(&self) -> Client {
        self.client(Some(tokens::user_token(READER)))
    }

    /// The wait container of pod `pod_name` in `namespace`.
    pub fn pod(&self, namespace: &str, pod_name: &str, pod_uid: &str) -> Client {
        self.client(Some(tokens::pod_token(namespace, pod_name, pod_uid)))
    }

    /// The server's database, to check what was stored; statements run on it through
    /// [`on_db!`](crate::on_db).
    pub async fn db(&self) -> Db {
        let db = match self.backend {
            Backend::Postgres => PgPool::connect(&self.database_url).await.map(Db::Postgres),
            Backend::Sqlite => SqlitePool::connect(&self.database_url)
                .await
                .map(Db::Sqlite),
        };
        db.expect("connect to the store")
    }

    /// One integer from the store, e.g. `SELECT COUNT(*) FROM results`.
    pub async fn count(&self, sql: &str) -> i64 {
        let db = self.db().await;
        let n: i64 = crate::on_db!(&db, |pool| sqlx::query_scalar(sql).fetch_one(pool).await)
            .expect("count");
        db.close().await;
        n
    }

    /// Stops the server now (as a crash would).
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Kills the server (as a crash would) and starts it again on the same store and port.
    pub async fn crash_and_restart(self) -> TestServer {
        self.restart_with(&[]).await
    }

    /// Kills the server and starts it again on the same store and port, with `flags` added.
    pub async fn restart_with(mut self, flags: &[&str]) -> TestServer {
        self.kill().await;
        // The same address, so that clients of the first process find the second.
        let address = self.address().to_owned();
        let mut command = self.same_server_on(&address);
        command.args(flags);
        let schema = self.schema.take();
        let database_url = self.database_url.clone();
        Self::launch(
            command,
            self.backend,
            Arc::clone(&self.dir),
            database_url,
            schema,
        )
        .await
    }

    /// This server's command line and environment, listening on `address`.
    fn same_server_on(&self, address: &str) -> Command {
        let mut args = self.args.clone();
        if let Some(at) = args.iter().position(|arg| arg == "--listen") {
            args[at + 1] = address.into();
        }
        let mut command = Command::new(&self.program);
        command
            .args(&args)
            .envs(self.envs.clone())
            .current_dir(self.dir.path());
        command
    }

    /// Another replica on the same store: the same flags, its own port.
    pub async fn replica(&self) -> TestServer {
        let command = self.same_server_on("127.0.0.1:0");
        let database_url = self.database_url.clone();
        Self::launch(
            command,
            self.backend,
            Arc::clone(&self.dir),
            database_url,
            None,
        )
        .await
    }

    /// Sends SIGTERM, as Kubernetes does, and waits for the process to exit.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        self.send_sigterm();
        self.wait_exit().await
    }

    /// Sends SIGTERM, as Kubernetes does, and returns at once.
    pub fn send_sigterm(&self) {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(sent.success());
    }

    /// Waits for the process to exit.
    pub async fn wait_exit(&mut self) -> std::process::ExitStatus {
        self.child.wait().await.expect("exit status")
    }
}

/// Lines of a server's log a failing test prints.
const LOG_TAIL_LINES: usize = 40;

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        // A failed assertion unwinds through here: show what the server said last. (The
        // harness prints a test's output only when it fails.)
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
            eprintln!(
                "--- the last {} lines of the log of the server at {}:\n{}",
                tail.len(),
                self.url,
                tail.join("\n")
            );
        }
        let Some(schema) = self.schema.take() else {
            return;
        };
        // Drop runs outside any async context we may block, so the schema goes on a thread.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(runtime) = runtime {
                runtime.block_on(async {
                    if let Ok(admin) = PgPool::connect(&postgres_url()).await {
                        let drop = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
                        let _ = sqlx::query(&drop).execute(&admin).await;
                        admin.close().await;
                    }
                });
            }
        })
        .join();
    }
}

/// What a wait on the server expected, and the server's log when it did not happen.
struct WithLog<'a>(&'a str, &'a TestServer);

impl std::fmt::Display for WithLog<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; the server's log:\n{}", self.0, self.1.log())
    }
}

/// A raw answer: status, headers and body as JSON (or `null` when not JSON).
#[derive(Debug)]
pub struct Raw {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
    pub json: serde_json::Value,
}

impl Raw {
    pub async fn read(response: reqwest::Response) -> Raw {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("body");
        let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        Raw {
            status,
            headers,
            text,
            json,
        }
    }
}

/// A client that opens a connection for each request, as a pod does, built once: building
/// one loads the system's roots, which costs more than the request, and a test that starts
/// many requests in one task would leave the first ones silent on their connections until
/// the last was built (the server closes a silent connection after 3 s).
fn fresh_connections() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .expect("client")
    })
}

impl TestServer {
    /// Sends exactly what a test wants, for bodies and headers the typed client never sends.
    pub async fn raw(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        content_type: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> Raw {
        let mut request = fresh_connections().request(method, format!("{}{path}", self.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(content_type) = content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        Raw::read(request.body(body).send().await.expect("send")).await
    }

    /// Waits until `/readyz` answers 200 (keys loaded).
    pub async fn wait_ready(&self) {
        let what = WithLog("the server becomes ready", self);
        eventually(what, Duration::from_secs(30), async || {
            (self.get("/readyz", None).await.status == 200).then_some(())
        })
        .await;
    }

    /// Waits until `n` feed requests are waiting inside the server (its `feed_watchers`).
    pub async fn wait_for_watchers(&self, n: u32) {
        let line = format!("argo_results_feed_watchers {n}\n");
        let what = WithLog(&format!("{n} feed requests wait in the server"), self);
        eventually(what, Duration::from_secs(30), async || {
            self.get("/metrics", None)
                .await
                .text
                .contains(&line)
                .then_some(())
        })
        .await;
    }

    /// `PUT path` of the JSON `body` with `token`.
    pub async fn put_json(&self, path: &str, token: &str, body: String) -> Raw {
        self.raw(
            reqwest::Method::PUT,
            path,
            Some(token),
            Some("application/json"),
            body,
        )
        .await
    }

    /// `GET path` with `token`.
    /// `/readyz`'s answer once it is `status`: the server keeps the store's part of it for
    /// a second, so a change shows within that.
    pub async fn readyz_until(&self, status: u16) -> Raw {
        crate::eventually(
            format!("/readyz {status}"),
            Duration::from_secs(10),
            async || {
                let answer = self.get("/readyz", None).await;
                (answer.status == status).then_some(answer)
            },
        )
        .await
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Raw {
        self.raw(reqwest::Method::GET, path, token, None, Vec::new())
            .await
    }
}

/// Runs the server binary to its end on a loopback port and a scratch data directory,
/// with `args` after those: for start-up failures and `--help`. Its output, and its stderr
/// as text.
pub fn run_to_exit(args: &[&str]) -> (std::process::Output, String) {
    let dir = tempfile::tempdir().expect("scratch directory");
    let out = std::process::Command::new(binary("argo-results-server"))
        .args(["--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path())
        .args(args)
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run argo-results-server");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

/// A loopback port that nothing listens on (until a test starts something there). It is
/// taken below the kernel's ephemeral range, where the servers of other tests (started
/// on port 0) cannot land on it in the meantime.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, RandomState};
    loop {
        let offset = RandomState::new().hash_one(std::time::Instant::now()) % 10_000;
        let port = 20_000 + u16::try_from(offset).expect("below 10000");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The current time in Unix milliseconds, as the store keeps times.
pub fn now_millis() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    i64::try_from(since.as_millis()).expect("millis")
}

/// utime + stime of process `pid`, in clock ticks, from /proc/PID/stat.
pub fn cpu_ticks(pid: u32) -> std::io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let unreadable = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    // The command's name, in parentheses, may hold spaces and parentheses: count the
    // fields after its end, where field 3 (the state) comes first; utime and stime are
    // fields 14 and 15.
    let (_, after_name) = stat
        .rsplit_once(')')
        .ok_or_else(|| unreadable(format!("/proc/{pid}/stat: no command name")))?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |number: usize| -> std::io::Result<u64> {
        fields
            .get(number - 3)
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| unreadable(format!("/proc/{pid}/stat: no field {number}")))
    };
    Ok(field(14)? + field(15)?)
}
