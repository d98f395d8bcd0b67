//! The workflow the tests play with, shaped like Argo's: node IDs `<workflow>-<hash>`,
//! v2 pod names `<workflow>-<template>-<hash>`, real-looking outputs.

use argo_results_client::{Answer, Client, ClientError};
use argo_results_proto::{ExpectationRequest, NodeResult, PROTOCOL_VERSION, ReportRequest};
use serde_json::value::RawValue;

pub const NS: &str = "argo";
pub const WF: &str = "etl-x7k2p";
pub const UID: &str = "5d0c9f5e-4a55-4c1e-9d0a-8b3c2f1e7a10";

/// One step of the workflow: its node and its pod.
#[derive(Debug, Clone)]
pub struct Step {
    pub node_id: String,
    pub pod_name: String,
    pub pod_uid: String,
}

/// Step `i` of workflow [`WF`], run by its first pod.
pub fn step(i: u32) -> Step {
    let hash = 1_529_417_052 + i;
    Step {
        node_id: format!("{WF}-{hash}"),
        pod_name: format!("{WF}-extract-{hash}"),
        pod_uid: format!("0b6f7c1e-8d3a-4f0e-9a51-{i:012}"),
    }
}

impl Step {
    /// The same node run by a restarted pod.
    pub fn restarted(&self) -> Step {
        Step {
            pod_uid: format!("{}-restarted", self.pod_uid),
            ..self.clone()
        }
    }

    /// A report of this step's pod, with `outputs` as JSON text.
    pub fn report(
        &self,
        sequence: Option<i64>,
        is_final: bool,
        outputs: Option<&str>,
    ) -> ReportRequest {
        ReportRequest {
            protocol_version: PROTOCOL_VERSION,
            workflow_uid: UID.into(),
            pod_name: self.pod_name.clone(),
            pod_uid: self.pod_uid.clone(),
            instance_id: None,
            sequence,
            is_final,
            outputs: outputs
                .map(|text| RawValue::from_string(text.to_owned()).expect("outputs JSON")),
            progress: None,
            phase: None,
            message: None,
        }
    }

    pub fn expectation(&self) -> ExpectationRequest {
        ExpectationRequest {
            workflow_uid: UID.into(),
            pod_name: self.pod_name.clone(),
            pod_uid: Some(self.pod_uid.clone()),
        }
    }
}

/// Outputs as argoexec sends them for step `i`: a parameter and an S3 artifact.
pub fn outputs(i: u32) -> String {
    format!(
        r#"{{"parameters":[{{"name":"row-count","value":"{i}","valueFrom":{{"path":"/tmp/row-count"}}}}],"artifacts":[{{"name":"report","path":"/tmp/report.csv","s3":{{"key":"{WF}/{WF}-extract-{i}/report.tgz"}}}}]}}"#
    )
}

impl crate::TestServer {
    /// The wait container of `step`'s pod.
    pub fn pod_of(&self, step: &Step) -> Client {
        self.pod(NS, &step.pod_name, &step.pod_uid)
    }

    /// `step`'s pod reports `report` for its node of [`WF`].
    pub async fn send(
        &self,
        step: &Step,
        report: &ReportRequest,
    ) -> Result<Answer<NodeResult>, ClientError> {
        self.pod_of(step)
            .report(NS, WF, &step.node_id, report)
            .await
    }

    /// `step`'s pod completes its node with [`outputs`]`(i)`.
    pub async fn complete(&self, step: &Step, i: u32) -> Answer<NodeResult> {
        let report = step.report(Some(1), true, Some(&outputs(i)));
        self.send(step, &report).await.expect("final report")
    }

    /// The controller registers `step`'s pod as the one whose result it awaits.
    pub async fn register(&self, step: &Step) -> Answer<NodeResult> {
        self.controller()
            .expect(NS, WF, &step.node_id, &step.expectation())
            .await
            .expect("expectation")
    }
}
