use std::io::IsTerminal;
use std::process::ExitCode;

use argo_results_server::{Config, LogFormat, console_line};
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// Requests are allocated on the runtime's threads and freed on the group-commit writer's:
/// glibc's allocator spent more than half of the writer's time on such frees and their
/// arena locks; mimalloc frees across threads without a lock.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only where a person reads them, never into a file or a log collector.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => {
            // Requests have one span: the list of spans would repeat it on every line.
            builder.json().with_span_list(false).init();
            // A panic's message is one more line on stderr: JSON like the rest.
            std::panic::set_hook(Box::new(|panic| {
                eprintln!(
                    "{}",
                    console_line(LogFormat::Json, "ERROR", &panic.to_string(), &[])
                );
            }));
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::parse();
    if config.openapi {
        print!("{}", argo_results_server::openapi_json());
        return ExitCode::SUCCESS;
    }
    if config.print_rbac_rules {
        print!("{}", argo_results_server::print_rbac_rules());
        return ExitCode::SUCCESS;
    }
    let format = config.log_format;
    init_logging(format);
    match argo_results_server::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let text = format!("argo-results-server: {error}");
            eprintln!("{}", console_line(format, "ERROR", &text, &[]));
            ExitCode::from(error.exit_code())
        }
    }
}
