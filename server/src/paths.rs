//! The names in request paths, shared by the HTTP handlers that read them and the pod
//! authorization that matches them against a token.

use argo_results_proto::schema::{Namespace, ObjectName};
use serde::Deserialize;
use utoipa::IntoParams;

/// `/namespaces/{namespace}/workflows/{workflow}`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct WorkflowPath {
    #[param(value_type = Namespace)]
    pub namespace: String,
    #[param(value_type = ObjectName)]
    pub workflow: String,
}

/// `/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct NodePath {
    #[param(value_type = Namespace)]
    pub namespace: String,
    #[param(value_type = ObjectName)]
    pub workflow: String,
    #[serde(rename = "nodeId")]
    #[param(value_type = ObjectName)]
    pub node_id: String,
}

/// `/namespaces/{namespace}/cronworkflows/{name}`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CronPath {
    #[param(value_type = Namespace)]
    pub namespace: String,
    #[param(value_type = ObjectName)]
    pub name: String,
}
