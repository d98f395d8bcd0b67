//! `argo-results whoami`: who the server thinks the caller is.

use clap::Args;

use super::connect::Connection;
use super::failure::Failure;
use super::output::{self, Cell, Format, Headers};

/// Show the subject, namespace, pod and roles the server sees in your token.
///
/// Example:
///   ARGO_RESULTS_TOKEN=$(cat token) argo-results whoami
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct WhoamiArgs {
    #[arg(short, long, value_enum, default_value = "table")]
    output: Format,

    #[command(flatten)]
    headers: Headers,

    #[command(flatten)]
    connection: Connection,
}

pub async fn run(args: &WhoamiArgs) -> Result<(), Failure> {
    let me = args
        .connection
        .api()?
        .call(|client| async move { client.whoami().await })
        .await?;
    let text = match args.output {
        Format::Table => {
            let roles: Vec<String> = me
                .roles
                .iter()
                .filter_map(|role| serde_json::to_value(role).ok()?.as_str().map(str::to_owned))
                .collect();
            let pod = me
                .pod
                .as_ref()
                .map_or("-".into(), |pod| format!("{} ({})", pod.name, pod.uid));
            let rows = vec![
                vec![Cell::from("subject"), Cell::from(me.subject.clone())],
                vec![
                    Cell::from("namespace"),
                    Cell::from(me.namespace.clone().unwrap_or_else(|| "-".into())),
                ],
                vec![Cell::from("pod"), Cell::from(pod)],
                vec![
                    Cell::from("roles"),
                    Cell::from(if roles.is_empty() {
                        "none".into()
                    } else {
                        roles.join(", ")
                    }),
                ],
            ];
            output::table(&["FIELD", "VALUE"], rows, args.headers)
        }
        format => output::document(&me, format)?,
    };
    output::emit(&text)
}
