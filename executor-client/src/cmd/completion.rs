//! `argo-results completion`: a shell's completion script, as `kubectl completion` prints.

use clap::Args;
use clap_complete::Shell;

use super::failure::Failure;
use super::output;

/// Print the completion script of a shell: the commands, flags and their values.
///
/// Examples:
///   source <(argo-results completion bash)            # in ~/.bashrc
///   source <(argo-results completion zsh)             # in ~/.zshrc, after compinit
///   argo-results completion fish > ~/.config/fish/completions/argo-results.fish
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: Shell,
}

/// Writes the script of `command`, the whole command line.
pub fn run(args: &CompletionArgs, mut command: clap::Command) -> Result<(), Failure> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "argo-results", &mut script);
    output::emit(&String::from_utf8_lossy(&script))
}
