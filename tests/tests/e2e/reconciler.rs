//! The reference reconciler's answers to the failure modes of ARGO.md section 4.7 that a
//! single node shows: F11 (a pod gone after its final report), F7 (a restarted pod, a
//! re-created workflow of the same name), F2 (not reported yet is not done).

use argo_results_client::controller::{Decision, PodPhase, Reconciler};
use argo_results_client::proto::ProblemCode;
use argo_results_tests::fixtures::{NS, UID, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    a_pod_gone_after_its_final_report_keeps_its_outputs,
    a_pod_gone_before_reporting_is_lost_and_stays_lost,
    a_restarted_pods_predecessor_cannot_write,
    a_recreated_workflow_sees_nothing_of_the_first,
);

async fn reconciler(server: &TestServer) -> Reconciler {
    Reconciler::new(server.controller(), NS, 0)
}

async fn a_pod_gone_after_its_final_report_keeps_its_outputs(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut controller = reconciler(&server).await;
    let s = step(1);
    controller
        .pod_created(WF, UID, &s.node_id, &s.pod_name, &s.pod_uid)
        .await
        .expect("expect");
    controller.follow(0).await.expect("feed");
    assert_eq!(
        controller.decide(UID, &s.node_id, PodPhase::Succeeded),
        Decision::Wait,
        "F2: not reported is not done"
    );
    server.complete(&s, 1).await;
    // The pod is deleted (drain, Karpenter) before the controller saw the result.
    let decision = controller
        .pod_gone(WF, UID, &s.node_id, "pod deleted")
        .await
        .expect("abandon");
    assert_eq!(
        decision,
        Decision::Succeeded {
            outputs: Some(outputs(1))
        }
    );
}

async fn a_pod_gone_before_reporting_is_lost_and_stays_lost(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut controller = reconciler(&server).await;
    let s = step(1);
    controller
        .pod_created(WF, UID, &s.node_id, &s.pod_name, &s.pod_uid)
        .await
        .expect("expect");
    let decision = controller
        .pod_gone(WF, UID, &s.node_id, "pod deleted")
        .await
        .expect("abandon");
    assert_eq!(
        decision,
        Decision::Lost {
            reason: "pod deleted".into()
        }
    );
    let late = server
        .send(&s, &s.report(Some(1), true, Some(&outputs(1))))
        .await
        .expect_err("a late final report");
    assert_eq!(late.code(), Some(ProblemCode::AlreadyCompleted));
}

async fn a_restarted_pods_predecessor_cannot_write(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut controller = reconciler(&server).await;
    let first = step(1);
    controller
        .pod_created(WF, UID, &first.node_id, &first.pod_name, &first.pod_uid)
        .await
        .expect("expect");
    let restarted = first.restarted();
    controller
        .pod_created(
            WF,
            UID,
            &restarted.node_id,
            &restarted.pod_name,
            &restarted.pod_uid,
        )
        .await
        .expect("re-expect");
    let late = server
        .send(&first, &first.report(Some(1), true, Some(&outputs(1))))
        .await
        .expect_err("the first pod's late write");
    assert_eq!(late.code(), Some(ProblemCode::PodMismatch));
    server.complete(&restarted, 2).await;
    controller.follow(0).await.expect("feed");
    assert_eq!(
        controller.decide(UID, &first.node_id, PodPhase::Succeeded),
        Decision::Succeeded {
            outputs: Some(outputs(2))
        }
    );
}

async fn a_recreated_workflow_sees_nothing_of_the_first(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut controller = reconciler(&server).await;
    let s = step(1);
    controller
        .pod_created(WF, UID, &s.node_id, &s.pod_name, &s.pod_uid)
        .await
        .expect("expect");
    server.complete(&s, 1).await;
    server
        .controller()
        .delete_results(NS, WF, UID)
        .await
        .expect("garbage collection");
    let second_uid = "second-incarnation";
    let again = s.restarted();
    controller
        .pod_created(
            WF,
            second_uid,
            &again.node_id,
            &again.pod_name,
            &again.pod_uid,
        )
        .await
        .expect("expect");
    controller.follow(0).await.expect("feed");
    assert_eq!(
        controller.decide(second_uid, &s.node_id, PodPhase::Succeeded),
        Decision::Wait
    );
    assert!(
        controller.result(UID, &s.node_id).is_none(),
        "the tombstone removed the first incarnation"
    );
    let listed = server
        .reader()
        .list_results(NS, WF, &Default::default())
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].workflow_uid, second_uid);
    assert!(listed.items[0].outputs.is_none());
}
