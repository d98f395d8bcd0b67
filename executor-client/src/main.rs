//! `argo-results`: the command line of the wait container and of admins.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Talk to an argo-results server: report a step's result from its wait container, or
/// inspect results and the change feed, and list, claim and settle cron runs.
///
/// Examples:
///   argo-results report --final --outputs /tmp/outputs.json
///   argo-results get argo/etl-x7k2p
///   argo-results watch -o json
#[derive(Debug, Parser)]
#[command(name = "argo-results", version, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Report(Box<cmd::report::ReportArgs>),
    Get(cmd::get::GetArgs),
    Watch(cmd::watch::WatchArgs),
    #[command(visible_alias = "claims")]
    Runs(Box<cmd::runs::RunsArgs>),
    Whoami(cmd::whoami::WhoamiArgs),
    Token(cmd::token::TokenArgs),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let outcome = match Cli::parse().command {
        Command::Report(args) => cmd::report::run(&args).await,
        Command::Get(args) => cmd::get::run(&args).await,
        Command::Watch(args) => cmd::watch::run(&args).await,
        Command::Runs(args) => cmd::runs::run(&args).await,
        Command::Whoami(args) => cmd::whoami::run(&args).await,
        Command::Token(args) => cmd::token::run(&args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}
