//! `argo-results`: the command line of the wait container and of admins.

// Commands' help is written in doc comments, where `<ARG>` is usage notation, not HTML.
#![allow(rustdoc::invalid_html_tags)]

mod cmd;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// What `argo-results --help` says after the commands: where the namespace comes from, and
/// what each exit code means (`cmd::failure::Failure::report` exits with them).
const AFTER_HELP: &str = "\
Namespace (get, list, watch, runs): -n/--namespace, else ARGO_RESULTS_NAMESPACE, else the
namespace of the current kubeconfig context (KUBECONFIG, else ~/.kube/config), else
default, as kubectl. -A/--all-namespaces (list, watch): every namespace. The old form
NAMESPACE/NAME of a name is still taken, with a note on stderr giving the new one.

Output, as kubectl's: -o wide|name|json|yaml (get, list, watch, runs), -o name printing
KIND/NAME (result/NODE, workflow/NAME, run/WORKFLOW); --no-headers drops a table's header.

Connection (every command that calls the server): --server (ARGO_RESULTS_URL),
--token-file (ARGO_RESULTS_TOKEN_FILE, else ARGO_RESULTS_TOKEN), --ca-file
(ARGO_RESULTS_CA_FILE), and kubectl's --tls-server-name NAME
(ARGO_RESULTS_TLS_SERVER_NAME), to verify a certificate issued for NAME when the URL
names another host (kubectl port-forward), and --insecure-skip-tls-verify
(ARGO_RESULTS_INSECURE_SKIP_TLS_VERIFY=true), which verifies nothing and says so.

Exit codes:
  0  done. A list with nothing in it is no error: `list` of an empty namespace says
     \"No results found in namespace NS.\" on stderr and exits 0, as kubectl does.
  1  anything else (an answer that is not the API's, stdout not writable).
  2  usage: bad arguments or environment, a server URL without http:// or https://, a
     file that cannot be read (token, CA, outputs, dev key, kubeconfig); nothing is sent.
  3  refused by the server (its status, code and detail on stderr), or what get names
     does not exist: a node (404 not_found) or a workflow with no results.
  4  the server cannot be reached. get, list, runs, whoami, version and the start of
     watch say so at once when nothing listens at the URL, its host does not resolve, TLS
     meets plain HTTP (either way) or the certificate is not trusted, and retry an
     overloaded or restarting server until --timeout; report retries every such failure
     until its --timeout (none by default), and a watch that started waits out
     restarts.";

/// Talk to an argo-results server: report a step's result from its wait container, or
/// inspect results and the change feed, and list, claim and settle cron runs.
///
/// Examples:
///   argo-results list -n argo
///   argo-results get etl-x7k2p -n argo
///   argo-results get etl-x7k2p etl-x7k2p-1529417052 -n argo -o yaml
///   argo-results watch -A -o yaml
///   argo-results version --server https://127.0.0.1:8443 --tls-server-name argo-results.argo.svc
///   argo-results report --final --outputs /tmp/outputs.json
///   source <(argo-results completion bash)
#[derive(Debug, Parser)]
#[command(
    name = "argo-results",
    version,
    verbatim_doc_comment,
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Report(Box<cmd::report::ReportArgs>),
    List(cmd::list::ListArgs),
    Get(cmd::get::GetArgs),
    Watch(cmd::watch::WatchArgs),
    #[command(visible_alias = "claims")]
    Runs(Box<cmd::runs::RunsArgs>),
    Whoami(cmd::whoami::WhoamiArgs),
    Token(cmd::token::TokenArgs),
    Version(cmd::version::VersionArgs),
    Completion(cmd::completion::CompletionArgs),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let outcome = match Cli::parse().command {
        Command::Report(args) => cmd::report::run(&args).await,
        Command::List(args) => cmd::list::run(&args).await,
        Command::Get(args) => cmd::get::run(&args).await,
        Command::Watch(args) => cmd::watch::run(&args).await,
        Command::Runs(args) => cmd::runs::run(&args).await,
        Command::Whoami(args) => cmd::whoami::run(&args).await,
        Command::Token(args) => cmd::token::run(&args),
        Command::Version(args) => cmd::version::run(&args).await,
        Command::Completion(args) => cmd::completion::run(&args, Cli::command()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}
