//! `argo-results report`: the wait container's report of its node's result. It retries
//! every transient failure until it is stored (or until `--timeout`), so a report survives
//! restarts of the server, of its database and of the network in between.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use argo_results_client::proto::{PROTOCOL_VERSION, ProblemCode, ReportRequest};
use argo_results_client::{Client, RetryPolicy, TokenSource, token_namespace};
use clap::Args;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::connect::{TlsArgs, check_server_url};
use super::failure::{Failure, explain};
use super::sequence;

/// Report this pod's node result to argo-results (run by the wait container).
///
/// The pod's identity comes from the environment Argo gives its containers; each flag
/// below names its variable. Every transient failure (nothing listening yet, a server
/// restarting or overloaded, TLS not ready) is retried until --timeout, or without end,
/// and so is pod_mismatch: the node may be bound to a deleted pod of this pod's name until
/// the controller binds this one (a pod created again).
/// Exit codes: 0 stored, 2 usage (a missing variable, a server URL without http:// or
/// https://, an outputs file that cannot be read), 3 refused (the problem's code and
/// detail on stderr), 4 gave up at --timeout. A report of progress alone (no --final,
/// --outputs, --phase, --exit-code or --message) refused because the result is already
/// completed exits 0 with a note on stderr: Argo's executor only logs a failed progress
/// update.
///
/// Examples:
///   argo-results report --progress 3/10
///   argo-results report --final --outputs /var/run/argo/outputs.json
///   argo-results report --final --phase Failed --exit-code 1 --outputs /tmp/outputs.json
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

    /// How the step ended, as Argo names it (with --final).
    #[arg(long, requires = "is_final", value_parser = ["Succeeded", "Failed", "Error"])]
    phase: Option<String>,

    /// The main container's exit code (with --final), sent as the outputs' `exitCode`, a
    /// string as in Argo's Outputs; the outputs must not already have one.
    #[arg(long, requires = "is_final", allow_negative_numbers = true)]
    exit_code: Option<i32>,

    #[arg(long)]
    message: Option<String>,

    /// Orders this pod's reports [default: taken from --sequence-file].
    #[arg(long)]
    sequence: Option<i64>,

    /// A counter shared by the pod's processes that report (main of a resource or data
    /// template, and wait), so that no two send the same sequence: under a lock, the larger
    /// of the stored value + 1 and Unix microseconds [default:
    /// /var/run/argo/argo-results-sequence when /var/run/argo exists; without it, Unix
    /// microseconds, which two processes may then share].
    #[arg(long, env = "ARGO_RESULTS_SEQUENCE_FILE")]
    sequence_file: Option<PathBuf>,

    /// Give up after this long (e.g. 30s, 5m) [default: never: ARGO_DEADLINE is when Argo
    /// kills main, and argoexec still reports the outputs after it].
    #[arg(long, value_parser = super::parse_duration)]
    timeout: Option<Duration>,

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

    #[command(flatten)]
    tls: TlsArgs,

    /// [default: the token's kubernetes.io.namespace, else the pod's service-account
    /// namespace file; Argo sets no namespace variable]
    #[arg(short, long)]
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

/// `outputs` with Argo's `exitCode` (`Outputs.ExitCode`, a decimal string) inserted as the
/// first member by editing the text, so that every other value stays byte for byte.
fn with_exit_code(outputs: Option<Box<RawValue>>, code: i32) -> Result<Box<RawValue>, Failure> {
    let member = format!(r#""exitCode":"{code}""#);
    let text = match outputs {
        None => format!("{{{member}}}"),
        Some(outputs) => {
            let text = outputs.get();
            let members: HashMap<String, IgnoredAny> =
                serde_json::from_str(text).map_err(|_| {
                    Failure::Usage("--outputs must be a JSON object to carry --exit-code".into())
                })?;
            if members.contains_key("exitCode") {
                return Err(Failure::Usage(
                    "--outputs already has an exitCode; drop it or --exit-code".into(),
                ));
            }
            let open = text.find('{').unwrap_or_default() + 1;
            let separator = if members.is_empty() { "" } else { "," };
            format!("{}{member}{separator}{}", &text[..open], &text[open..])
        }
    };
    RawValue::from_string(text).map_err(|e| Failure::Other(format!("outputs with exitCode: {e}")))
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

/// The namespace of the pod's service account, as the kubelet mounts it.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

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

    fn deadline(&self) -> Option<Instant> {
        self.timeout.map(|timeout| Instant::now() + timeout)
    }

    /// `--namespace`, else the token's, else the service account's namespace file (where
    /// argoexec finds its own: client-go's in-cluster configuration).
    fn namespace(&self) -> Result<String, Failure> {
        if let Some(namespace) = &self.namespace {
            return Ok(namespace.clone());
        }
        let token = std::fs::read_to_string(&self.token_file).unwrap_or_default();
        if let Some(namespace) = token_namespace(token.trim()) {
            return Ok(namespace);
        }
        std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
            .ok()
            .map(|text| text.trim().to_owned())
            .filter(|namespace| !namespace.is_empty())
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "no namespace: the token at {} names none and {SERVICE_ACCOUNT_NAMESPACE} \
                     is missing; pass --namespace",
                    self.token_file.display()
                ))
            })
    }

    /// The explicit `--sequence`, else the next value of the counter file, else the clock.
    fn sequence(&self) -> Result<i64, Failure> {
        if let Some(sequence) = self.sequence {
            return Ok(sequence);
        }
        if let Some(path) = &self.sequence_file {
            return sequence::take(path).map_err(|e| {
                Failure::Usage(format!(
                    "cannot use --sequence-file {}: {e}",
                    path.display()
                ))
            });
        }
        let Some(path) = sequence::argo_default_file() else {
            return Ok(sequence::clock());
        };
        sequence::take(&path).or_else(|e| {
            eprintln!(
                "argo-results: cannot use {}: {e}; the sequence is Unix microseconds",
                path.display()
            );
            Ok(sequence::clock())
        })
    }

    /// Only progress: what Argo's executor sends on its progress ticker
    /// (`executor.go`, `monitorProgress`) and only logs when refused.
    fn is_progress_only(&self) -> bool {
        !self.is_final
            && self.outputs.is_none()
            && self.phase.is_none()
            && self.exit_code.is_none()
            && self.message.is_none()
    }

    fn body(&self, identity: &Identity<'_>) -> Result<ReportRequest, Failure> {
        let outputs = self.outputs.as_deref().map(read_outputs).transpose()?;
        let outputs = match self.exit_code {
            Some(code) => Some(with_exit_code(outputs, code)?),
            None => outputs,
        };
        let sequence = self.sequence()?;
        Ok(ReportRequest {
            protocol_version: PROTOCOL_VERSION,
            workflow_uid: identity.workflow_uid.to_owned(),
            pod_name: identity.pod_name.to_owned(),
            pod_uid: identity.pod_uid.to_owned(),
            instance_id: self.instance_id.clone(),
            sequence: Some(sequence),
            is_final: self.is_final,
            outputs,
            progress: self.progress.clone(),
            phase: self.phase.clone(),
            message: self.message.clone(),
        })
    }
}

pub async fn run(args: &ReportArgs) -> Result<(), Failure> {
    let identity = args.identity()?;
    check_server_url(identity.server, "ARGO_RESULTS_URL or --server")?;
    let body = args.body(&identity)?;
    let namespace = args.namespace()?;
    let builder = Client::builder(identity.server)
        .token(TokenSource::File(args.token_file.clone()))
        .ca_file(args.ca_file.clone());
    let client = args
        .tls
        .apply(builder, identity.server)
        .retry(RetryPolicy {
            deadline: args.deadline(),
            // The node may still be bound to a pod of this name that was deleted, until
            // the controller binds this one (a pod created again).
            codes: &[ProblemCode::PodMismatch],
        })
        .on_retry(|error, wait| {
            eprintln!(
                "argo-results: {}; retrying in {:.1}s",
                explain(error),
                wait.as_secs_f64()
            );
        })
        .build()?;
    let stored = match client
        .report(&namespace, identity.workflow, identity.node_id, &body)
        .await
    {
        Ok(answer) => answer.body,
        Err(error)
            if args.is_progress_only() && error.code() == Some(ProblemCode::AlreadyCompleted) =>
        {
            eprintln!(
                "argo-results: progress not stored: {namespace}/{} {} is already completed",
                identity.workflow, identity.node_id
            );
            return Ok(());
        }
        Err(error) => return Err(error.into()),
    };
    println!(
        "stored {namespace}/{} {}: {} at revision {}",
        identity.workflow,
        identity.node_id,
        stored.state.as_str(),
        stored.revision
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outputs(text: &str) -> Option<Box<RawValue>> {
        Some(RawValue::from_string(text.to_owned()).expect("JSON"))
    }

    fn usage(result: Result<Box<RawValue>, Failure>) -> String {
        match result {
            Err(Failure::Usage(message)) => message,
            other => panic!("expected a usage failure, got {other:?}"),
        }
    }

    #[test]
    fn the_exit_code_is_inserted_and_every_other_byte_kept() {
        let text = r#"{ "parameters" : [{"value":"1.50", "name":"é\u0000"}],"result":"x" }"#;
        let merged = with_exit_code(outputs(text), 137).expect("merged");
        assert_eq!(
            merged.get(),
            r#"{"exitCode":"137", "parameters" : [{"value":"1.50", "name":"é\u0000"}],"result":"x" }"#
        );
        assert_eq!(
            with_exit_code(outputs("{ }"), 0).expect("merged").get(),
            r#"{"exitCode":"0" }"#
        );
        assert_eq!(
            with_exit_code(None, -1).expect("alone").get(),
            r#"{"exitCode":"-1"}"#
        );
    }

    #[test]
    fn outputs_with_an_exit_code_or_not_an_object_are_refused() {
        assert!(usage(with_exit_code(outputs(r#"{"exitCode":"0"}"#), 1)).contains("already"));
        assert!(
            usage(with_exit_code(outputs(r#"{"exit\u0043ode":"0"}"#), 1)).contains("already"),
            "an escaped key is the same key"
        );
        assert!(usage(with_exit_code(outputs("[]"), 1)).contains("JSON object"));
    }
}
