//! Schemas of the OpenAPI document alone: the formats of names and fields that the server
//! checks (`server/src/validate.rs`; API.md, its names and section 2), declared once so that
//! generated clients check what the server checks. No value of these types is ever made.

use utoipa::ToSchema;

/// A namespace: a DNS-1123 label.
#[derive(Debug, ToSchema)]
#[schema(pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63)]
pub struct Namespace(pub String);

/// A Kubernetes object name (DNS-1123 subdomain): a workflow, node ID, pod or cron
/// workflow. At most 253 in all, with no cap on the parts between dots (Argo's node IDs
/// reach 74 characters and its v2 pod names 203).
#[derive(Debug, ToSchema)]
#[schema(
    pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    max_length = 253
)]
pub struct ObjectName(pub String);

/// A Kubernetes UID: 1 to 128 visible ASCII characters.
#[derive(Debug, ToSchema)]
#[schema(pattern = "^[!-~]+$", min_length = 1, max_length = 128)]
pub struct Uid(pub String);

/// Argo's controller instance ID, as a Kubernetes label value.
#[derive(Debug, ToSchema)]
#[schema(
    pattern = "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
    max_length = 63
)]
pub struct InstanceId(pub String);

/// `N/M` steps done, with `0 <= N <= M` and `M > 0`.
#[derive(Debug, ToSchema)]
#[schema(pattern = "^[0-9]+/[0-9]+$")]
pub struct Progress(pub String);

/// Free text of at most 16 KiB (counted in UTF-8 bytes), without NUL.
#[derive(Debug, ToSchema)]
#[schema(pattern = "^[^\\u0000]*$", max_length = 16384)]
pub struct Message(pub String);

/// Why a node was abandoned or a tick skipped: not blank, at most 1024 bytes of UTF-8,
/// without NUL.
#[derive(Debug, ToSchema)]
#[schema(
    pattern = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$",
    min_length = 1,
    max_length = 1024
)]
pub struct Reason(pub String);

/// How a step ended, as Argo names it (`NodePhase`).
#[derive(Debug, ToSchema)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Skipped,
    Failed,
    Error,
    Omitted,
}

/// Argo's `Outputs`, applied as an RFC 7386 merge patch onto the stored outputs: a key
/// present replaces that key's value, `null` removes it. Fields not listed here are stored
/// and returned as sent.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct Outputs {
    pub parameters: Option<Vec<OutputParameter>>,
    pub artifacts: Option<Vec<OutputArtifact>>,
    /// The script's result: at most 256 KiB of UTF-8 unless `--max-result-bytes` raises it.
    #[schema(max_length = 262144)]
    pub result: Option<String>,
    /// The main container's exit code.
    pub exit_code: Option<String>,
}

/// An output parameter; its other fields are Argo's.
#[derive(Debug, ToSchema)]
pub struct OutputParameter {
    #[schema(pattern = "^[-a-zA-Z0-9_]+$")]
    pub name: String,
}

/// An output artifact; its other fields are Argo's.
#[derive(Debug, ToSchema)]
pub struct OutputArtifact {
    #[schema(pattern = "^[-a-zA-Z0-9_{}.]+$")]
    pub name: String,
}
