//! A pod may write only its own node's result (docs/api.md, "8. Authentication and roles").

use argo_results_proto::ReportRequest;

use super::{AuthError, Authenticator, Caller};
use crate::paths::NodePath;

/// Argo's v2 pod names cut `<workflow>-<template>` to this length before `-<hash>`
/// (`workflow/util/pod_name.go`, `ensurePodNamePrefixLength`: 253 - 10 - 1 - 1).
const V2_PREFIX_MAX: usize = 242;

/// The hash that ends a node ID of `workflow` (`Workflow.NodeID`: `<workflow>-<fnv32a of
/// the node name>`), `Some("")` for the root node (whose ID is the workflow's name), or
/// `None` when the node is not one of `workflow`'s.
fn node_hash<'a>(workflow: &str, node_id: &'a str) -> Option<&'a str> {
    if node_id == workflow {
        return Some("");
    }
    let hash = node_id.strip_prefix(workflow)?.strip_prefix('-')?;
    (!hash.is_empty() && hash.bytes().all(|b| b.is_ascii_digit())).then_some(hash)
}

/// Whether `pod_name` is the pod Argo names for `node_id` of `workflow`
/// (`GeneratePodName`): `v1` names a pod after its node ID; `v2` names the root node's pod
/// after the workflow, a template-less node's after its node ID, and any other
/// `<workflow>-<template>-<hash>`, with the hash that ends the node ID.
pub fn pod_belongs_to_node(pod_name: &str, workflow: &str, node_id: &str) -> bool {
    let Some(hash) = node_hash(workflow, node_id) else {
        return false;
    };
    if pod_name == node_id || hash.is_empty() {
        return pod_name == node_id;
    }
    let Some(prefix) = pod_name
        .strip_suffix(hash)
        .and_then(|rest| rest.strip_suffix('-'))
    else {
        return false;
    };
    let workflow_dash = format!("{workflow}-");
    match prefix.strip_prefix(&workflow_dash) {
        Some(template) => !template.is_empty() || prefix.len() == V2_PREFIX_MAX,
        // A long prefix is cut inside the workflow name.
        None => prefix.len() == V2_PREFIX_MAX && workflow_dash.starts_with(prefix),
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
        let (wf, node) = ("etl-x7k2p", "etl-x7k2p-1529417052");
        assert!(
            pod_belongs_to_node(node, wf, node),
            "v1, or v2 without a template"
        );
        assert!(pod_belongs_to_node(
            "etl-x7k2p-extract-1529417052",
            wf,
            node
        ));
        assert!(pod_belongs_to_node(wf, wf, wf), "the root node");
        for stranger in [
            "etl-x7k2p-extract-999",
            "other-extract-1529417052",
            "etl-x7k2p--1529417052",
            "etl-x7k2p-extract-11529417052",
            "etl-x7k2p",
        ] {
            assert!(!pod_belongs_to_node(stranger, wf, node), "{stranger}");
        }
        assert!(!pod_belongs_to_node(node, wf, "etl-x7k2p-1529417053"));
        assert!(
            !pod_belongs_to_node("etl-x7k2p-main-1", wf, wf),
            "root: no v2 hash"
        );
    }

    #[test]
    fn the_node_belongs_to_the_urls_workflow() {
        // A v1 pod of workflow foo may not write workflow victim's node of the same name.
        assert!(!pod_belongs_to_node("foo-123", "victim", "foo-123"));
        assert!(!pod_belongs_to_node(
            "victim-x-123",
            "victim",
            "victim-x123"
        ));
        assert!(!pod_belongs_to_node("victim-x-12a", "victim", "victim-12a"));
        assert!(!pod_belongs_to_node("victim2-x-1", "victim", "victim2-1"));
    }

    #[test]
    fn the_longest_names_argo_accepts() {
        // Workflow names up to 63, template names up to 128 (workflow/validate/validate.go).
        let workflow = format!("w{}", "x".repeat(62));
        let template = format!("t{}", "y".repeat(127));
        let node = format!("{workflow}-4294967295");
        let pod = format!("{workflow}-{template}-4294967295");
        assert_eq!((node.len(), pod.len()), (74, 203));
        assert!(pod_belongs_to_node(&pod, &workflow, &node));
        assert!(pod_belongs_to_node(&node, &workflow, &node));
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
        let workflow = "w".repeat(200);
        let cut = format!("{workflow}-{}", "t".repeat(41));
        assert_eq!(cut.len(), 242);
        assert!(pod_belongs_to_node(
            &format!("{cut}-7"),
            &workflow,
            &format!("{workflow}-7")
        ));
    }
}
