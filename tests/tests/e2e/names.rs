//! Names as Argo makes them and Kubernetes checks them (API sections 1 and 8): workflow
//! names up to 63 and template names up to 128 (`workflow/validate/validate.go`), so node
//! IDs of 74 characters (`Workflow.NodeID`) and v2 pod names of 203
//! (`workflow/util/pod_name.go`, `GeneratePodName`); the root node, whose node ID and pod
//! are the workflow's name; a template-less node, whose v2 pod is named after its node ID.

use argo_results_client::proto::{ExpectationRequest, PROTOCOL_VERSION, ReportRequest};
use argo_results_tests::fixtures::{NS, UID};
use argo_results_tests::{Backend, TestServer};
use serde_json::value::RawValue;

on_both_backends!(
    the_longest_names_argo_accepts_report_and_read_back,
    the_root_node_and_a_template_less_node_report,
    a_node_of_another_workflow_is_forbidden,
);

/// One node of an Argo workflow, as the controller and its pod would name it.
struct Node {
    workflow: String,
    node_id: String,
    pod_name: String,
}

fn longest() -> Node {
    let workflow = format!("w{}", "x".repeat(62));
    let template = format!("t{}", "y".repeat(127));
    Node {
        node_id: format!("{workflow}-4294967295"),
        pod_name: format!("{workflow}-{template}-4294967295"),
        workflow,
    }
}

/// The controller registers `node`'s pod, which then reports; the result reads back by
/// node and in the workflow's list.
async fn register_report_and_read(server: &TestServer, node: &Node, pod_uid: &str) {
    let expectation = ExpectationRequest {
        workflow_uid: UID.into(),
        pod_name: node.pod_name.clone(),
        pod_uid: Some(pod_uid.into()),
    };
    let registered = server
        .controller()
        .expect(NS, &node.workflow, &node.node_id, &expectation)
        .await
        .expect("expectation");
    assert_eq!(registered.status, 201);
    let outputs = r#"{"parameters":[{"name":"out","value":"ok"}]}"#;
    let report = ReportRequest {
        protocol_version: PROTOCOL_VERSION,
        workflow_uid: UID.into(),
        pod_name: node.pod_name.clone(),
        pod_uid: pod_uid.into(),
        instance_id: None,
        sequence: Some(1),
        is_final: true,
        outputs: Some(RawValue::from_string(outputs.into()).expect("json")),
        progress: None,
        phase: Some("Succeeded".into()),
        message: None,
    };
    let stored = server
        .pod(NS, &node.pod_name, pod_uid)
        .report(NS, &node.workflow, &node.node_id, &report)
        .await
        .expect("report");
    assert_eq!(stored.body.state.as_str(), "completed");
    let read = server
        .reader()
        .get_result(NS, &node.workflow, &node.node_id, None)
        .await
        .expect("read");
    assert_eq!(read.pod_name.as_deref(), Some(node.pod_name.as_str()));
    assert_eq!(
        read.outputs.map(|o| o.get().to_owned()).as_deref(),
        Some(outputs)
    );
    let listed = server
        .reader()
        .list_results(NS, &node.workflow, &Default::default())
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.summary.completed, 1);
}

async fn the_longest_names_argo_accepts_report_and_read_back(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--require-expectation"])
        .start()
        .await;
    let node = longest();
    assert_eq!(
        (node.workflow.len(), node.node_id.len(), node.pod_name.len()),
        (63, 74, 203)
    );
    register_report_and_read(&server, &node, "pod-uid-longest").await;
}

async fn the_root_node_and_a_template_less_node_report(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--require-expectation"])
        .start()
        .await;
    let root = Node {
        workflow: "hello-root".into(),
        node_id: "hello-root".into(),
        pod_name: "hello-root".into(),
    };
    register_report_and_read(&server, &root, "pod-uid-root").await;
    let template_less = Node {
        workflow: "hello-bare".into(),
        node_id: "hello-bare-3216089112".into(),
        pod_name: "hello-bare-3216089112".into(),
    };
    register_report_and_read(&server, &template_less, "pod-uid-bare").await;
}

async fn a_node_of_another_workflow_is_forbidden(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    // A v1 pod of workflow foo, named after its node ID, writing workflow victim's node of
    // the same name: the node ID does not belong to victim.
    let report = ReportRequest {
        protocol_version: PROTOCOL_VERSION,
        workflow_uid: UID.into(),
        pod_name: "foo-123".into(),
        pod_uid: "foo-uid".into(),
        instance_id: None,
        sequence: None,
        is_final: true,
        outputs: None,
        progress: None,
        phase: None,
        message: None,
    };
    let pod = server.pod(NS, "foo-123", "foo-uid");
    let refused = pod
        .report(NS, "victim", "foo-123", &report)
        .await
        .expect_err("not victim's node");
    assert_eq!(refused.problem().map(|p| p.status), Some(403));
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 0);
    // Its own workflow's node is fine.
    pod.report(NS, "foo", "foo-123", &report)
        .await
        .expect("its own node");
}
