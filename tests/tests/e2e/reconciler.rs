//! The reference reconciler against the real server: the failure modes of ARGO.md section
//! 4.7 that single nodes show (F2 not reported is not done, F7 restarted pods and re-created
//! workflows, F11 a vanished pod), every namespace on one feed, failed nodes that keep
//! their outputs, and a restart with empty memory that reaches the same decisions.

use argo_results_client::controller::{Decision, PodPhase, Reconciler, WorkflowRef};
use argo_results_client::proto::{ProblemCode, ReportRequest};
use argo_results_tests::fixtures::{NS, Step, UID, WF, outputs, step};
use argo_results_tests::{Backend, TestServer, eventually};

use crate::retention::PRUNED_WITHIN;

on_both_backends!(
    not_reported_is_not_done,
    a_vanished_pods_node_takes_its_phase_from_the_stored_result,
    a_pod_gone_before_reporting_is_lost_and_stays_lost,
    a_failed_pod_keeps_the_outputs_its_final_report_sent,
    a_pod_that_ended_without_a_completed_result_is_settled,
    a_settle_that_finds_nothing_stored_loses_the_node,
    every_namespace_is_followed_on_one_feed,
    a_restarted_pods_predecessor_cannot_write,
    a_recreated_workflow_sees_nothing_of_the_first,
    an_older_tombstone_replayed_after_a_listing_keeps_the_newer_row,
    a_reconciler_restarted_with_empty_memory_reaches_the_same_decisions,
    a_reconciler_resumed_with_nothing_in_flight_starts_at_the_head,
    long_names_the_root_node_and_a_template_less_node_are_decided,
);

fn reconciler(server: &TestServer) -> Reconciler {
    Reconciler::new(server.controller(), 0)
}

/// The fixtures' workflow.
fn etl() -> WorkflowRef {
    WorkflowRef {
        namespace: NS.into(),
        name: WF.into(),
        uid: UID.into(),
    }
}

/// Node `i` of `workflow`, run by its first pod (v2 pod names).
fn node(workflow: &WorkflowRef, i: u32) -> Step {
    let hash = 1_529_417_052 + i;
    Step {
        node_id: format!("{}-{hash}", workflow.name),
        pod_name: format!("{}-main-{hash}", workflow.name),
        pod_uid: format!("{}-pod-{i}", workflow.uid),
    }
}

/// A report of `s`'s pod for its node of `workflow`.
fn report_of(
    workflow: &WorkflowRef,
    s: &Step,
    is_final: bool,
    outputs: Option<&str>,
) -> ReportRequest {
    let mut report = s.report(None, is_final, outputs);
    report.workflow_uid = workflow.uid.clone();
    report
}

/// `s`'s final report: how the step ended (`phase`, `outputs` perhaps with an exitCode).
fn final_report(
    workflow: &WorkflowRef,
    s: &Step,
    phase: Option<&str>,
    outputs: Option<&str>,
) -> ReportRequest {
    let mut report = report_of(workflow, s, true, outputs);
    report.phase = phase.map(Into::into);
    report
}

fn progress_report(workflow: &WorkflowRef, s: &Step) -> ReportRequest {
    let mut report = report_of(workflow, s, false, None);
    report.progress = Some("1/2".into());
    report
}

/// `s`'s pod sends `report` for its node of `workflow`.
async fn send(server: &TestServer, workflow: &WorkflowRef, s: &Step, report: &ReportRequest) {
    server
        .pod(&workflow.namespace, &s.pod_name, &s.pod_uid)
        .report(&workflow.namespace, &workflow.name, &s.node_id, report)
        .await
        .expect("report");
}

async fn created(controller: &mut Reconciler, workflow: &WorkflowRef, s: &Step) {
    controller
        .pod_created(
            &workflow.namespace,
            &workflow.name,
            &workflow.uid,
            &s.node_id,
            &s.pod_name,
            &s.pod_uid,
        )
        .await
        .expect("expectation");
}

/// `Reconciler::settle` of `s`'s node, whose pod the informer shows as `pod`.
async fn settle(
    controller: &mut Reconciler,
    workflow: &WorkflowRef,
    s: &Step,
    pod: PodPhase,
) -> Decision {
    controller
        .settle(workflow, &s.node_id, pod)
        .await
        .expect("settle")
}

/// The reason a settle abandons the result of a pod that ended as `pod`.
fn abandoned(pod: PodPhase) -> String {
    match pod {
        PodPhase::Gone => {
            "the pod is gone (deleted, evicted or its node drained) without a completed result"
                .into()
        }
        phase => format!("the pod ended {phase:?} without a completed result"),
    }
}

/// The outputs of a step that archives its logs, with its exit code.
fn logs(exit_code: u32) -> String {
    format!(
        r#"{{"exitCode":"{exit_code}","artifacts":[{{"name":"main-logs","s3":{{"key":"{WF}/pod/main.log"}}}}]}}"#
    )
}

async fn not_reported_is_not_done(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let s = step(1);
    created(&mut controller, &etl(), &s).await;
    controller.follow(0).await.expect("feed");
    // Not seen is not done: a running pod waits, an ended one is settled by the server.
    assert_eq!(
        controller.decide(UID, &s.node_id, PodPhase::Running),
        Decision::Wait
    );
    for pod in [PodPhase::Succeeded, PodPhase::Failed, PodPhase::Gone] {
        assert_eq!(
            controller.decide(UID, &s.node_id, pod),
            Decision::Settle {
                reason: abandoned(pod)
            },
            "{pod:?}"
        );
    }
    server.complete(&s, 1).await;
    controller.follow(0).await.expect("feed");
    assert_eq!(
        controller.decide(UID, &s.node_id, PodPhase::Succeeded),
        Decision::Succeeded {
            outputs: Some(outputs(1))
        }
    );
}

/// F11: a pod deleted (drain, Karpenter) after its final report; the controller never saw
/// its status, so the result says how the step ended, and its outputs come along.
async fn a_vanished_pods_node_takes_its_phase_from_the_stored_result(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let wf = etl();
    let params = r#"{"parameters":[{"name":"row-count","value":"1"}]}"#;
    let (exit_0, exit_137) = (r#"{"exitCode":"0"}"#, r#"{"exitCode":"137"}"#);
    let failed_logs = logs(2);
    let cases: [(Option<&str>, Option<&str>, Decision); 6] = [
        (
            Some("Succeeded"),
            Some(params),
            Decision::Succeeded {
                outputs: Some(params.into()),
            },
        ),
        (
            Some("Failed"),
            Some(failed_logs.as_str()),
            Decision::Failed {
                outputs: Some(logs(2)),
                message: Some("the main container exited with code 2".into()),
            },
        ),
        (
            Some("Error"),
            None,
            Decision::Error {
                outputs: None,
                message: "the step reported that it ended in Error".into(),
            },
        ),
        (
            None,
            Some(exit_0),
            Decision::Succeeded {
                outputs: Some(exit_0.into()),
            },
        ),
        (
            None,
            Some(exit_137),
            Decision::Failed {
                outputs: Some(exit_137.into()),
                message: Some("the main container exited with code 137".into()),
            },
        ),
        (None, Some(params), Decision::Error {
            outputs: Some(params.into()),
            message: "the pod is gone and its final report said nothing of how the step ended (no phase Succeeded, Failed or Error, no exitCode)".into(),
        }),
    ];
    for (i, (phase, outputs, expected)) in (1..).zip(cases) {
        let s = node(&wf, i);
        created(&mut controller, &wf, &s).await;
        send(&server, &wf, &s, &final_report(&wf, &s, phase, outputs)).await;
        // The controller has not followed the feed: the abandon's answer carries the result.
        assert_eq!(
            settle(&mut controller, &wf, &s, PodPhase::Gone).await,
            expected,
            "{phase:?} {outputs:?}"
        );
    }
}

async fn a_pod_gone_before_reporting_is_lost_and_stays_lost(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let s = step(1);
    created(&mut controller, &etl(), &s).await;
    let lost = Decision::Lost {
        reason: abandoned(PodPhase::Gone),
    };
    assert_eq!(
        settle(&mut controller, &etl(), &s, PodPhase::Gone).await,
        lost
    );
    let late = server
        .send(&s, &s.report(Some(1), true, Some(&outputs(1))))
        .await
        .expect_err("a late final report");
    assert_eq!(late.code(), Some(ProblemCode::AlreadyCompleted));
    assert_eq!(
        settle(&mut controller, &etl(), &s, PodPhase::Failed).await,
        lost,
        "the stored reason, however often asked"
    );
}

/// While `wait` uploads the logs of a `main` that failed, the pod runs; once it ended, the
/// node fails with the outputs its final report sent.
async fn a_failed_pod_keeps_the_outputs_its_final_report_sent(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let (wf, s) = (etl(), step(1));
    created(&mut controller, &wf, &s).await;
    send(&server, &wf, &s, &progress_report(&wf, &s)).await;
    controller.follow(0).await.expect("feed");
    assert_eq!(
        controller.decide(UID, &s.node_id, PodPhase::Running),
        Decision::Wait
    );
    send(
        &server,
        &wf,
        &s,
        &final_report(&wf, &s, Some("Failed"), Some(&logs(1))),
    )
    .await;
    controller.follow(0).await.expect("feed");
    let failed = Decision::Failed {
        outputs: Some(logs(1)),
        message: Some("the main container exited with code 1".into()),
    };
    assert_eq!(controller.decide(UID, &s.node_id, PodPhase::Failed), failed);
    assert_eq!(
        settle(&mut controller, &wf, &s, PodPhase::Failed).await,
        failed,
        "a settle of a completed node is its decision, and calls nothing"
    );
}

/// A pod is terminal only once its wait container exited, and that gets its 2xx only after
/// the commit: what is committed is all there will be, and the settle answers with it.
/// Every way a pod ends without a completed result seen is settled at once, never left to
/// a timer.
async fn a_pod_that_ended_without_a_completed_result_is_settled(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let wf = etl();
    // The wait container was OOM-killed after a progress report (argoproj/argo-workflows#13373); an init
    // container failed, or the pod failed while Pending, before anything reported; wait
    // exited 0 after its final report was refused, so the pod Succeeded.
    let endings = [
        (step(1), true, PodPhase::Failed),
        (step(2), false, PodPhase::Failed),
        (step(3), true, PodPhase::Succeeded),
    ];
    for (s, progressed, pod) in &endings {
        created(&mut controller, &wf, s).await;
        if *progressed {
            send(&server, &wf, s, &progress_report(&wf, s)).await;
        }
        controller.follow(0).await.expect("feed");
        let reason = abandoned(*pod);
        assert_eq!(
            controller.decide(UID, &s.node_id, *pod),
            Decision::Settle {
                reason: reason.clone()
            }
        );
        assert_eq!(
            settle(&mut controller, &wf, s, *pod).await,
            Decision::Lost { reason },
            "{pod:?}, progressed: {progressed}"
        );
    }
    // The final report committed, but the feed has not shown it yet.
    let reported = step(4);
    created(&mut controller, &wf, &reported).await;
    controller.follow(0).await.expect("feed");
    send(
        &server,
        &wf,
        &reported,
        &final_report(&wf, &reported, Some("Failed"), Some(&logs(3))),
    )
    .await;
    assert!(matches!(
        controller.decide(UID, &reported.node_id, PodPhase::Failed),
        Decision::Settle { .. }
    ));
    let settled = settle(&mut controller, &wf, &reported, PodPhase::Failed).await;
    controller.follow(0).await.expect("feed");
    assert_eq!(
        controller.decide(UID, &reported.node_id, PodPhase::Failed),
        settled,
        "the abandon's answer is what the feed shows"
    );
    assert_eq!(
        settled,
        Decision::Failed {
            outputs: Some(logs(3)),
            message: Some("the main container exited with code 3".into()),
        }
    );
}

/// A node whose row is gone (deleted, or lost when the database was restored from a
/// backup) and whose pod ended: the settle's `404` loses it, and nothing waits.
async fn a_settle_that_finds_nothing_stored_loses_the_node(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let wf = etl();
    let s = step(1);
    created(&mut controller, &wf, &s).await;
    server
        .controller()
        .delete_results(&wf.namespace, &wf.name, &wf.uid)
        .await
        .expect("delete");
    match settle(&mut controller, &wf, &s, PodPhase::Failed).await {
        Decision::Lost { reason } => assert!(reason.contains("no result is stored"), "{reason}"),
        other => panic!("expected the node lost, got {other:?}"),
    }
}

async fn every_namespace_is_followed_on_one_feed(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let workflows = [
        etl(),
        WorkflowRef {
            namespace: "team-b".into(),
            name: "report-b9x2q".into(),
            uid: "7e1d2c3b-0000-4000-8000-00000000000b".into(),
        },
    ];
    for (i, wf) in (1..).zip(&workflows) {
        let s = node(wf, i);
        created(&mut controller, wf, &s).await;
        send(
            &server,
            wf,
            &s,
            &final_report(wf, &s, Some("Succeeded"), Some(&outputs(i))),
        )
        .await;
    }
    while controller.follow(0).await.expect("feed") > 0 {}
    for (i, wf) in (1..).zip(&workflows) {
        assert_eq!(
            controller.decide(&wf.uid, &node(wf, i).node_id, PodPhase::Succeeded),
            Decision::Succeeded {
                outputs: Some(outputs(i))
            },
            "{}",
            wf.namespace
        );
    }
}

async fn a_restarted_pods_predecessor_cannot_write(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let first = step(1);
    created(&mut controller, &etl(), &first).await;
    let restarted = first.restarted();
    created(&mut controller, &etl(), &restarted).await;
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
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let s = step(1);
    created(&mut controller, &etl(), &s).await;
    server.complete(&s, 1).await;
    server
        .controller()
        .delete_results(NS, WF, UID)
        .await
        .expect("garbage collection");
    let second = WorkflowRef {
        uid: "second-incarnation".into(),
        ..etl()
    };
    created(&mut controller, &second, &s.restarted()).await;
    controller.follow(0).await.expect("feed");
    assert_eq!(
        controller.decide(&second.uid, &s.node_id, PodPhase::Running),
        Decision::Wait
    );
    assert_eq!(
        controller.decide(&second.uid, &s.node_id, PodPhase::Succeeded),
        Decision::Settle {
            reason: abandoned(PodPhase::Succeeded)
        },
        "the first incarnation's completed result is not the second's"
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
    assert_eq!(listed.items[0].workflow_uid, second.uid);
    assert!(listed.items[0].outputs.is_none());
}

/// A node's result deleted and registered again (same workflow UID), then listed; the feed,
/// read from before the deletion, replays the tombstone in one page and the re-creation
/// only in the next (a page holds 500 changes by default): the listed row must stay.
async fn an_older_tombstone_replayed_after_a_listing_keeps_the_newer_row(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    server.register(&s).await;
    server.complete(&s, 1).await;
    let admin = server.controller();
    admin.delete_results(NS, WF, UID).await.expect("delete");
    let filler = WorkflowRef {
        name: "filler".into(),
        uid: "filler-uid".into(),
        ..etl()
    };
    for i in 0..500 {
        let other = node(&filler, i);
        let mut expectation = other.expectation();
        expectation.workflow_uid = filler.uid.clone();
        admin
            .expect(NS, &filler.name, &other.node_id, &expectation)
            .await
            .expect("filler");
    }
    server.register(&s).await;
    server.complete(&s, 2).await;

    let mut controller = reconciler(&server);
    controller.track(etl()).await.expect("list");
    let first_page = controller.follow(0).await.expect("feed");
    assert_eq!(first_page, 500, "the re-creation is not in this page");
    assert_eq!(
        controller.decide(UID, &s.node_id, PodPhase::Succeeded),
        Decision::Succeeded {
            outputs: Some(outputs(2))
        },
        "the listed row outlived the older tombstone"
    );
    while controller.follow(0).await.expect("feed") > 0 {}
    assert_eq!(
        controller.decide(UID, &s.node_id, PodPhase::Succeeded),
        Decision::Succeeded {
            outputs: Some(outputs(2))
        }
    );
}

/// Two reconcilers see the same events; one is dropped midway, the feed history it had not
/// read is pruned, and it is resumed with empty memory from the workflows in flight (as the
/// controller's Workflow informer knows them). Both decide every node alike.
async fn a_reconciler_restarted_with_empty_memory_reaches_the_same_decisions(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--feed-retention", "1s", "--retention-every", "100ms"])
        .start()
        .await;
    let workflows = [
        etl(),
        WorkflowRef {
            namespace: "team-b".into(),
            name: "report-b9x2q".into(),
            uid: "7e1d2c3b-0000-4000-8000-00000000000b".into(),
        },
    ];
    // Node i runs in workflow i % 2; each gets its pod's phase at the end and a script.
    let nodes: Vec<(WorkflowRef, Step)> = (1..=9)
        .map(|i| {
            let wf = workflows[i as usize % 2].clone();
            let s = node(&wf, i);
            (wf, s)
        })
        .collect();
    let mut live = reconciler(&server);
    let mut dropped = reconciler(&server);
    for (wf, s) in &nodes {
        created(&mut live, wf, s).await;
        created(&mut dropped, wf, s).await;
    }
    let at = |i: usize| (&nodes[i - 1].0, &nodes[i - 1].1);

    // Before the drop: 1 succeeds, 2 fails with its logs, 3 and 8 report progress.
    let (wf, s) = at(1);
    send(&server, wf, s, &progress_report(wf, s)).await;
    send(
        &server,
        wf,
        s,
        &final_report(wf, s, Some("Succeeded"), Some(&outputs(1))),
    )
    .await;
    let (wf, s) = at(2);
    send(
        &server,
        wf,
        s,
        &final_report(wf, s, Some("Failed"), Some(&logs(2))),
    )
    .await;
    for i in [3, 8] {
        let (wf, s) = at(i);
        send(&server, wf, s, &progress_report(wf, s)).await;
    }
    for controller in [&mut live, &mut dropped] {
        while controller.follow(0).await.expect("feed") > 0 {}
    }
    let dropped_at = server
        .reader()
        .list_results(NS, WF, &Default::default())
        .await
        .expect("the head revision")
        .revision;
    drop(dropped);

    // After: 3 succeeds; 4, 5 and 6 end saying less and less; 7 and 9 never report.
    let (wf, s) = at(3);
    send(
        &server,
        wf,
        s,
        &final_report(wf, s, Some("Succeeded"), Some(&outputs(3))),
    )
    .await;
    for (i, outputs) in [
        (4, r#"{"exitCode":"0"}"#),
        (5, r#"{"exitCode":"137"}"#),
        (6, r#"{"result":"x"}"#),
    ] {
        let (wf, s) = at(i);
        send(&server, wf, s, &final_report(wf, s, None, Some(outputs))).await;
    }
    while live.follow(0).await.expect("feed") > 0 {}
    eventually(
        "the history the dropped reconciler had not read is pruned",
        PRUNED_WITHIN,
        async || (server.count("SELECT COUNT(*) FROM changes").await == 0).then_some(()),
    )
    .await;
    let pruned = server
        .reader()
        .feed(&argo_results_client::FeedOptions {
            since: dropped_at,
            ..Default::default()
        })
        .await
        .expect_err("410");
    assert_eq!(pruned.code(), Some(ProblemCode::Gone));

    let mut resumed = Reconciler::resume(server.controller(), workflows.clone())
        .await
        .expect("resume");
    while resumed.follow(0).await.expect("feed") > 0 {}
    while live.follow(0).await.expect("feed") > 0 {}

    let pods = [
        PodPhase::Succeeded,
        PodPhase::Failed,
        PodPhase::Succeeded,
        PodPhase::Gone,
        PodPhase::Gone,
        PodPhase::Gone,
        PodPhase::Gone,
        PodPhase::Failed,
        PodPhase::Pending,
    ];
    let mut decisions = Vec::new();
    for (i, pod) in (1..).zip(pods) {
        let (wf, s) = at(i);
        let before = live.decide(&wf.uid, &s.node_id, pod);
        assert_eq!(
            resumed.decide(&wf.uid, &s.node_id, pod),
            before,
            "node {i} from memory"
        );
        // A pod that ended without a completed result seen is settled: the live
        // reconciler first, and the resumed one hears the result it abandoned.
        let live_says = settle(&mut live, wf, s, pod).await;
        let resumed_says = settle(&mut resumed, wf, s, pod).await;
        assert_eq!(resumed_says, live_says, "node {i} settled");
        decisions.push(live_says);
    }
    let lost = |pod| Decision::Lost {
        reason: abandoned(pod),
    };
    let expected = [
        Decision::Succeeded {
            outputs: Some(outputs(1)),
        },
        Decision::Failed {
            outputs: Some(logs(2)),
            message: Some("the main container exited with code 2".into()),
        },
        Decision::Succeeded {
            outputs: Some(outputs(3)),
        },
        Decision::Succeeded {
            outputs: Some(r#"{"exitCode":"0"}"#.into()),
        },
        Decision::Failed {
            outputs: Some(r#"{"exitCode":"137"}"#.into()),
            message: Some("the main container exited with code 137".into()),
        },
        Decision::Error {
            outputs: Some(r#"{"result":"x"}"#.into()),
            message: "the pod is gone and its final report said nothing of how the step ended (no phase Succeeded, Failed or Error, no exitCode)".into(),
        },
        lost(PodPhase::Gone),
        lost(PodPhase::Failed),
        Decision::Wait,
    ];
    assert_eq!(decisions, expected);
}

/// A restarted controller with no workflow in flight reads on from the head: the history
/// behind it holds nothing it follows.
async fn a_reconciler_resumed_with_nothing_in_flight_starts_at_the_head(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    for i in 1..=3 {
        server.register(&step(i)).await;
    }
    let mut resumed = Reconciler::resume(server.controller(), Vec::new())
        .await
        .expect("resume");
    assert_eq!(
        resumed.follow(0).await.expect("feed"),
        0,
        "nothing replayed"
    );
    server.register(&step(4)).await;
    assert_eq!(
        resumed.follow(0).await.expect("feed"),
        1,
        "what comes after"
    );
}

async fn long_names_the_root_node_and_a_template_less_node_are_decided(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let mut controller = reconciler(&server);
    let (name, steps) = crate::cli::long_named_steps();
    let wf = WorkflowRef { name, ..etl() };
    for (i, s) in (1..).zip(&steps) {
        created(&mut controller, &wf, s).await;
        send(
            &server,
            &wf,
            s,
            &final_report(&wf, s, Some("Succeeded"), Some(&outputs(i))),
        )
        .await;
    }
    controller.follow(0).await.expect("feed");
    for (i, s) in (1..).zip(&steps) {
        let succeeded = Decision::Succeeded {
            outputs: Some(outputs(i)),
        };
        assert_eq!(
            controller.decide(UID, &s.node_id, PodPhase::Succeeded),
            succeeded,
            "{}",
            s.pod_name
        );
        assert_eq!(
            settle(&mut controller, &wf, s, PodPhase::Gone).await,
            succeeded
        );
    }
}
