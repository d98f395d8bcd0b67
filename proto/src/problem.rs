use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The machine-readable `code` of an error (docs/api.md section 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProblemCode {
    InvalidJson,
    UnknownField,
    UnsupportedProtocolVersion,
    InvalidParameter,
    Unauthenticated,
    Forbidden,
    NotFound,
    AlreadyCompleted,
    StaleSequence,
    PodMismatch,
    NotExpected,
    AlreadyClaimed,
    /// The claim was taken over after its lease expired: its old holder must stop.
    LeaseLost,
    Gone,
    PayloadTooLarge,
    UnsupportedMediaType,
    InvalidField,
    /// The request's body did not arrive within the server's deadline.
    RequestTimeout,
    Overloaded,
    Unavailable,
    /// A fault of the server itself; the detail is in its log.
    Internal,
}

impl std::fmt::Display for ProblemCode {
    /// The code as it appears on the wire, e.g. `already_completed`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(code)) => f.write_str(&code),
            _ => write!(f, "{self:?}"),
        }
    }
}

/// An `application/problem+json` body (RFC 9457).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Problem {
    #[serde(rename = "type")]
    pub problem_type: String,
    pub title: String,
    pub status: u16,
    pub code: ProblemCode,
    pub detail: String,
    /// The JSON path of the offending field, e.g. `outputs.parameters[0].name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The stored object that the request conflicts with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub current: Option<Box<RawValue>>,
    /// The store's current revision (on `410 gone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The store's epoch, which `revision` belongs to (on `410 gone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
}
