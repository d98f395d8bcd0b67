//! `argo-results token`: mints tokens signed by the embedded default's dev key, so anyone
//! can play the wait container (or a reader) against a local server.

use std::path::PathBuf;
use std::time::Duration;

use argo_results_proto::token::{
    DEFAULT_AUDIENCE, DEV_ISSUER, DEV_KEY_FILE, DEV_KEY_ID, PodIdentity, TokenClaims, mint,
};
use clap::Args;

use super::failure::Failure;

/// Mint a token signed by the server's dev key (embedded default only).
///
/// Examples:
///   argo-results token --namespace argo --pod-name my-wf-main-1234 --pod-uid pod-uid-1
///   argo-results token --subject system:serviceaccount:argo:argo-results-admin --ttl 10m
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct TokenArgs {
    /// The dev key the server made in its data directory.
    #[arg(long, env = "ARGO_RESULTS_DEV_KEY", default_value = DEV_KEY_FILE)]
    key: PathBuf,

    /// The pod's namespace (a pod token, as the kubelet projects it).
    #[arg(long, required_unless_present = "subject")]
    namespace: Option<String>,

    /// The pod's name, e.g. `<workflow>-<template>-<hash>` or the node ID.
    #[arg(long, required_unless_present = "subject", requires = "pod_uid")]
    pod_name: Option<String>,

    /// The pod's UID; reports must carry the same `podUid`.
    #[arg(long, requires = "pod_name")]
    pod_uid: Option<String>,

    /// The pod's service account.
    #[arg(long, default_value = "default")]
    service_account: String,

    /// Mint a token for this subject instead of a pod (roles come from the server's
    /// --reader / --controller lists).
    #[arg(long, conflicts_with_all = ["namespace", "pod_name", "pod_uid"])]
    subject: Option<String>,

    /// The audience the server requires.
    #[arg(long, default_value = DEFAULT_AUDIENCE)]
    audience: String,

    /// How long the token is valid, e.g. 10m, 1h, 2h30m.
    #[arg(long, default_value = "1h", value_parser = super::parse_duration)]
    ttl: Duration,
}

pub fn run(args: &TokenArgs) -> Result<(), Failure> {
    let pem = std::fs::read(&args.key).map_err(|e| {
        Failure::Usage(format!(
            "cannot read the dev key {}: {e} (start argo-results-server without flags to make one, or pass --key)",
            args.key.display()
        ))
    })?;
    let claims = match (
        &args.subject,
        &args.namespace,
        &args.pod_name,
        &args.pod_uid,
    ) {
        (Some(subject), ..) => TokenClaims::user(DEV_ISSUER, &args.audience, subject, args.ttl),
        (None, Some(namespace), Some(pod_name), Some(pod_uid)) => TokenClaims::pod(
            DEV_ISSUER,
            &args.audience,
            &PodIdentity {
                namespace,
                service_account: &args.service_account,
                pod_name,
                pod_uid,
            },
            args.ttl,
        ),
        _ => {
            return Err(Failure::Usage(
                "give --namespace, --pod-name and --pod-uid, or --subject".into(),
            ));
        }
    };
    let token = mint(&pem, DEV_KEY_ID, &claims)
        .map_err(|e| Failure::Other(format!("{}: not a dev key ({e})", args.key.display())))?;
    println!("{token}");
    Ok(())
}
