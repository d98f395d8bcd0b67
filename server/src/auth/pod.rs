//! A pod may write only its own node's result (API section 8).

use argo_results_proto::ReportRequest;

use super::{AuthError, Authenticator, Caller};
use crate::http::NodePath;

/// Argo's v2 pod names cut `<workflow>-<template>` to this length before `-<hash>`.
const V2_PREFIX_MAX: usize = 242;

/// Whether `pod_name` is the pod Argo names for `node_id` of `workflow`: `v1` names the pod
/// after the node ID (the root node's pod is the workflow's name either way); `v2` names it
/// `<workflow>-<template>-<hash>`, where `<hash>` ends the node ID.
pub fn pod_belongs_to_node(pod_name: &str, workflow: &str, node_id: &str) -> bool {
    if pod_name == node_id {
        return true;
    }
    let Some((_, hash)) = node_id.rsplit_once('-') else {
        return false;
    };
    let Some(prefix) = pod_name
        .strip_suffix(hash)
        .and_then(|rest| rest.strip_suffix('-'))
    else {
        return false;
    };
    match prefix
        .strip_prefix(workflow)
        .and_then(|rest| rest.strip_prefix('-'))
    {
        Some(template) => !template.is_empty(),
        // A long prefix is cut inside the workflow name.
        None => prefix.len() == V2_PREFIX_MAX && workflow.starts_with(prefix),
    }
}

/// Checks that the caller is the pod the report says it comes from, in the URL's
/// namespace, running the URL's node. A service-account token bound to no pod may write
/// only where `--allow-unbound-executor-tokens` and RBAC let it; the store then binds the
/// result to the body's pod UID.
pub async fn authorize_report(
    auth: &Authenticator,
    caller: &Caller,
    path: &NodePath,
    body: &ReportRequest,
) -> Result<(), AuthError> {
    if caller.unrestricted {
        return Ok(());
    }
    let forbidden = |detail: String| Err(AuthError::Forbidden(detail));
    let Some(token_namespace) = caller.namespace.as_deref() else {
        return forbidden(format!(
            "{} may not report a result: only a step's pod may, with its projected service-account token",
            caller.subject
        ));
    };
    if token_namespace != path.namespace {
        return forbidden(format!(
            "{} is in namespace {token_namespace}, not {}",
            caller.subject, path.namespace
        ));
    }
    match &caller.pod {
        Some(pod) if pod.uid != body.pod_uid => {
            return forbidden(format!(
                "the token's pod UID {} is not the body's podUid {}",
                pod.uid, body.pod_uid
            ));
        }
        Some(pod) if pod.name != body.pod_name => {
            return forbidden(format!(
                "the token's pod {} is not the body's podName {}",
                pod.name, body.pod_name
            ));
        }
        Some(_) => {}
        None => auth.allow_unbound_write(caller, &path.namespace).await?,
    }
    if !pod_belongs_to_node(&body.pod_name, &path.workflow, &path.node_id) {
        return forbidden(format!(
            "pod {} does not run node {} of workflow {}",
            body.pod_name, path.node_id, path.workflow
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::pod_belongs_to_node;

    #[test]
    fn v1_v2_and_root_pod_names() {
        assert!(pod_belongs_to_node(
            "etl-x7k2p-1529417052",
            "etl-x7k2p",
            "etl-x7k2p-1529417052"
        ));
        assert!(pod_belongs_to_node(
            "etl-x7k2p-extract-1529417052",
            "etl-x7k2p",
            "etl-x7k2p-1529417052"
        ));
        assert!(pod_belongs_to_node("etl-x7k2p", "etl-x7k2p", "etl-x7k2p"));
        assert!(!pod_belongs_to_node(
            "etl-x7k2p-extract-999",
            "etl-x7k2p",
            "etl-x7k2p-1529417052"
        ));
        assert!(!pod_belongs_to_node(
            "other-extract-1529417052",
            "etl-x7k2p",
            "etl-x7k2p-1529417052"
        ));
        assert!(!pod_belongs_to_node(
            "etl-x7k2p-1529417052",
            "etl-x7k2p",
            "etl-x7k2p-1529417053"
        ));
        assert!(!pod_belongs_to_node(
            "etl-x7k2p--1529417052",
            "etl-x7k2p",
            "etl-x7k2p-1529417052"
        ));
    }

    #[test]
    fn a_cut_v2_prefix_still_belongs() {
        let workflow = "w".repeat(250);
        let pod = format!("{}-123", &workflow[..242]);
        assert!(pod_belongs_to_node(
            &pod,
            &workflow,
            &format!("{workflow}-123")
        ));
    }
}
