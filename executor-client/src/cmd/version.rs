//! `argo-results version`: the client's release, and the server's (`GET /version`), as
//! `kubectl version` prints them.

use argo_results_client::ClientError;
use argo_results_client::proto::{PROTOCOL_VERSION, Version};
use clap::{Args, ValueEnum};
use serde::Serialize;

use super::connect::Connection;
use super::failure::Failure;
use super::output::{self, Format};

/// Print the client's version, then the server's (GET /version, which needs no token).
///
/// The client's line is printed before the server is asked: a server that cannot be
/// reached still shows it, then fails as get does (exit 4). -o json and yaml print both as
/// one object (clientVersion, serverVersion), each with its release and the report
/// protocol it speaks; a server of another protocol is warned of on stderr.
///
/// Examples:
///   argo-results version
///   argo-results version --client
///   argo-results version -o json --server https://127.0.0.1:8443 --tls-server-name argo-results.argo.svc
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct VersionArgs {
    /// The client's version only; the server is not asked.
    #[arg(long)]
    client: bool,

    /// Both versions as one JSON or YAML object [default: a line each].
    #[arg(short, long, value_enum)]
    output: Option<VersionFormat>,

    #[command(flatten)]
    connection: Connection,
}

/// `-o` of `version`, as kubectl's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VersionFormat {
    Json,
    Yaml,
}

/// What `-o json` and `-o yaml` print.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Versions {
    client_version: Version,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_version: Option<Version>,
}

/// This client's release and protocol.
fn client_version() -> Version {
    Version {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        protocol_version: PROTOCOL_VERSION,
    }
}

/// The object of `-o json|yaml`.
fn document(versions: &Versions, format: VersionFormat) -> Result<(), Failure> {
    let format = match format {
        VersionFormat::Json => Format::Json,
        VersionFormat::Yaml => Format::Yaml,
    };
    output::emit(&output::document(versions, format)?)
}

/// The server's version; `None` from a server that has no `GET /version` (`404`).
async fn server_version(args: &VersionArgs) -> Result<Option<Version>, Failure> {
    args.connection
        .api()?
        .call(|client| async move {
            match client.version().await {
                Err(ClientError::Unexpected { status: 404, .. }) => Ok(None),
                Err(error) if error.problem().is_some_and(|p| p.status == 404) => Ok(None),
                other => other.map(Some),
            }
        })
        .await
}

pub async fn run(args: &VersionArgs) -> Result<(), Failure> {
    let mut versions = Versions {
        client_version: client_version(),
        server_version: None,
    };
    if args.output.is_none() {
        output::emit(&format!(
            "Client Version: {}\n",
            versions.client_version.version
        ))?;
    }
    let asked = if args.client {
        Ok(())
    } else {
        match server_version(args).await {
            Ok(Some(server)) => {
                versions.server_version = Some(server);
                Ok(())
            }
            Ok(None) => Err(Failure::Other(
                "the server has no GET /version: it is of a release before argo-results \
                 version"
                    .into(),
            )),
            Err(failure) => Err(failure),
        }
    };
    match (args.output, &versions.server_version) {
        (Some(format), _) => document(&versions, format)?,
        (None, Some(server)) => output::emit(&format!(
            "Server Version: {} (protocol {})\n",
            server.version, server.protocol_version
        ))?,
        (None, None) => {}
    }
    if let Some(server) = &versions.server_version
        && server.protocol_version != PROTOCOL_VERSION
    {
        eprintln!(
            "argo-results: warning: the server speaks report protocol {}, this client {}: \
             use a client of the server's release",
            server.protocol_version, PROTOCOL_VERSION
        );
    }
    asked
}
