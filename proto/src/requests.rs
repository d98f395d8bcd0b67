//! Request bodies. Optional fields are left out when `None`: on a report, an absent field
//! keeps the stored value.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

#[cfg(feature = "openapi")]
use crate::schema::{InstanceId, Message, ObjectName, Outputs, Phase, Progress, Reason, Uid};

/// `PUT .../nodes/{nodeId}/result`, sent by the wait container.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReportRequest {
    /// The report protocol: 1, the only version this release speaks.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1))]
    pub protocol_version: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = Uid))]
    pub workflow_uid: String,
    #[cfg_attr(feature = "openapi", schema(value_type = ObjectName))]
    pub pod_name: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Uid))]
    pub pod_uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<InstanceId>))]
    pub instance_id: Option<String>,
    /// Orders one pod's reports; at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)
    )]
    pub sequence: Option<i64>,
    /// Stores the fields and completes the result in one transaction.
    #[serde(default, rename = "final")]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Outputs>))]
    pub outputs: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Progress>))]
    pub progress: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Phase>))]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Message>))]
    pub message: Option<String>,
}

/// `PUT .../nodes/{nodeId}/expectation`, sent by the controller when it creates a pod.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectationRequest {
    #[cfg_attr(feature = "openapi", schema(value_type = Uid))]
    pub workflow_uid: String,
    #[cfg_attr(feature = "openapi", schema(value_type = ObjectName))]
    pub pod_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Uid>))]
    pub pod_uid: Option<String>,
}

/// `POST .../nodes/{nodeId}/result/abandon`, sent by the controller when a pod is gone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AbandonRequest {
    #[cfg_attr(feature = "openapi", schema(value_type = Uid))]
    pub workflow_uid: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Reason))]
    pub reason: String,
}
