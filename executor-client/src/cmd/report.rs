//! `argo-results report`: the wait container's report of its node's result. It retries
//! every transient failure until the deadline, so a report survives restarts of the server,
//! of its database and of the network in between.

use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argo_results_client::proto::{PROTOCOL_VERSION, ReportRequest};
use argo_results_client::{Client, RetryPolicy, TokenSource, token_namespace};
use clap::Args;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::failure::Failure;

/// Report this pod's node result to argo-results (run by the wait container).
///
/// The pod's identity comes from the environment Argo gives its containers; each flag
/// below names its variable. Exit codes: 0 stored, 2 usage, 3 refused (the problem's code
/// and detail on stderr), 4 gave up at the deadline.
///
/// Examples:
///   argo-results report --progress 3/10
///   argo-results report --final --outputs /var/run/argo/outputs.json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ReportArgs {
    /// Complete the result: store these fields and freeze it, in one transaction.
    #[arg(long = "final")]
    is_final: bool,

    /// Argo's outputs as JSON, from a file or `-` for stdin.
    #[arg(long, value_name = "FILE|-")]
    outputs: Option<String>,

    /// Progress as N/M.
    #[arg(long)]
    progress: Option<String>,

    /// The node phase (Succeeded, Failed, ...), when the executor knows it.
    #[arg(long)]
    phase: Option<String>,

    #[arg(long)]
    message: Option<String>,

    /// Orders this pod's reports [default: Unix milliseconds, which grow between runs].
    #[arg(long)]
    sequence: Option<i64>,

    /// Give up after this long (e.g. 30s, 5m) [default: until ARGO_DEADLINE, else never].
    #[arg(long, value_parser = super::parse_duration)]
    timeout: Option<Duration>,

    /// The pod's deadline (RFC 3339), used when --timeout is not given.
    #[arg(long, env = "ARGO_DEADLINE", hide_env_values = true)]
    deadline: Option<String>,

    #[arg(long, env = "ARGO_RESULTS_URL")]
    server: Option<String>,

    /// The projected service-account token (audience argo-results), re-read before each attempt.
    #[arg(
        long,
        env = "ARGO_RESULTS_TOKEN_FILE",
        default_value = "/var/run/secrets/argo-results/token"
    )]
    token_file: PathBuf,

    #[arg(long, env = "ARGO_RESULTS_CA_FILE")]
    ca_file: Option<PathBuf>,

    /// [default: the token's kubernetes.io.namespace]
    #[arg(long, env = "ARGO_NAMESPACE")]
    namespace: Option<String>,

    #[arg(long, env = "ARGO_WORKFLOW_NAME")]
    workflow: Option<String>,

    #[arg(long, env = "ARGO_WORKFLOW_UID")]
    workflow_uid: Option<String>,

    #[arg(long, env = "ARGO_NODE_ID")]
    node_id: Option<String>,

    #[arg(long, env = "ARGO_POD_NAME")]
    pod_name: Option<String>,

    #[arg(long, env = "ARGO_POD_UID")]
    pod_uid: Option<String>,

    #[arg(long, env = "ARGO_INSTANCE_ID")]
    instance_id: Option<String>,
}

fn read_outputs(source: &str) -> Result<Box<RawValue>, Failure> {
    let mut text = String::new();
    let read = if source == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(source).map(|contents| text = contents)
    };
    read.map_err(|e| Failure::Usage(format!("cannot read --outputs {source}: {e}")))?;
    RawValue::from_string(text.trim_end().to_owned())
        .map_err(|e| Failure::Usage(format!("--outputs {source} is not JSON: {e}")))
}

/// The wait container's identity, every part of it given.
struct Identity<'a> {
    server: &'a str,
    workflow: &'a str,
    workflow_uid: &'a str,
    node_id: &'a str,
    pod_name: &'a str,
    pod_uid: &'a str,
}

impl ReportArgs {
    /// The identity, or one line naming every variable that is missing.
    fn identity(&self) -> Result<Identity<'_>, Failure> {
        let parts = [
            (&self.server, "ARGO_RESULTS_URL", "--server"),
            (&self.workflow, "ARGO_WORKFLOW_NAME", "--workflow"),
            (&self.workflow_uid, "ARGO_WORKFLOW_UID", "--workflow-uid"),
            (&self.node_id, "ARGO_NODE_ID", "--node-id"),
            (&self.pod_name, "ARGO_POD_NAME", "--pod-name"),
            (&self.pod_uid, "ARGO_POD_UID", "--pod-uid"),
        ];
        let missing: Vec<String> = parts
            .iter()
            .filter(|(value, ..)| value.is_none())
            .map(|(_, env, flag)| format!("{env} ({flag})"))
            .collect();
        if !missing.is_empty() {
            return Err(Failure::Usage(format!(
                "missing {}: the wait container's environment sets them; see --help",
                missing.join(", ")
            )));
        }
        let [server, workflow, workflow_uid, node_id, pod_name, pod_uid] =
            parts.map(|(value, ..)| value.as_deref().unwrap_or_default());
        Ok(Identity {
            server,
            workflow,
            workflow_uid,
            node_id,
            pod_name,
            pod_uid,
        })
    }

    fn deadline(&self) -> Result<Option<Instant>, Failure> {
        if let Some(timeout) = self.timeout {
            return Ok(Some(Instant::now() + timeout));
        }
        let Some(text) = &self.deadline else {
            return Ok(None);
        };
        let deadline: jiff::Timestamp = text.parse().map_err(|e| {
            Failure::Usage(format!(
                "ARGO_DEADLINE {text:?} is not an RFC 3339 time: {e}"
            ))
        })?;
        let left = jiff::Timestamp::now().duration_until(deadline);
        Ok(Some(
            Instant::now() + Duration::try_from(left).unwrap_or_default(),
        ))
    }

    fn namespace(&self) -> Result<String, Failure> {
        if let Some(namespace) = &self.namespace {
            return Ok(namespace.clone());
        }
        let token = std::fs::read_to_string(&self.token_file).unwrap_or_default();
        token_namespace(token.trim()).ok_or_else(|| {
            Failure::Usage(format!(
                "no namespace: set ARGO_NAMESPACE, or mount a service-account token at {}",
                self.token_file.display()
            ))
        })
    }

    fn body(&self, identity: &Identity<'_>) -> Result<ReportRequest, Failure> {
        let sequence = self.sequence.unwrap_or_else(|| {
            let millis = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis();
            i64::try_from(millis).unwrap_or(i64::MAX)
        });
        Ok(ReportRequest {
            protocol_version: PROTOCOL_VERSION,
            workflow_uid: identity.workflow_uid.to_owned(),
            pod_name: identity.pod_name.to_owned(),
            pod_uid: identity.pod_uid.to_owned(),
            instance_id: self.instance_id.clone(),
            sequence: Some(sequence),
            is_final: self.is_final,
            outputs: self.outputs.as_deref().map(read_outputs).transpose()?,
            progress: self.progress.clone(),
            phase: self.phase.clone(),
            message: self.message.clone(),
        })
    }
}

pub async fn run(args: &ReportArgs) -> Result<(), Failure> {
    let identity = args.identity()?;
    let body = args.body(&identity)?;
    let namespace = args.namespace()?;
    let client = Client::builder(identity.server)
        .token(TokenSource::File(args.token_file.clone()))
        .ca_file(args.ca_file.clone())
        .retry(RetryPolicy {
            deadline: args.deadline()?,
        })
        .on_retry(|error, wait| {
            eprintln!(
                "argo-results: {error}; retrying in {:.1}s",
                wait.as_secs_f64()
            );
        })
        .build()?;
    let stored = client
        .report(&namespace, identity.workflow, identity.node_id, &body)
        .await?
        .body;
    println!(
        "stored {namespace}/{} {}: {} at revision {}",
        identity.workflow,
        identity.node_id,
        stored.state.as_str(),
        stored.revision
    );
    Ok(())
}
