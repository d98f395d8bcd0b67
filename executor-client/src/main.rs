//! `argo-results`: the command line of the wait container and of admins.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Talk to an argo-results server.
#[derive(Debug, Parser)]
#[command(name = "argo-results", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Token(cmd::token::TokenArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Token(args) => cmd::token::run(&args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("argo-results: {error}");
            ExitCode::FAILURE
        }
    }
}
