//! The field rules of docs/api.md section 2 and Kubernetes naming, checked before anything is
//! stored. Each failure names the offending field by its JSON path.

use argo_results_proto::{
    AbandonRequest, ClaimRequest, ExpectationRequest, ReportRequest, SettleOutcome, SettleRequest,
};
use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::value::RawValue;

use crate::store::{MAX_MEMBERS, Settled, is_object, most_members};

/// A field that breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {detail}")]
pub struct FieldError {
    pub field: String,
    pub detail: String,
}

fn field_error(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        detail: detail.into(),
    }
}

fn fail(field: impl Into<String>, detail: impl Into<String>) -> Result<(), FieldError> {
    Err(field_error(field, detail))
}

/// Limits that the server's flags can raise.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_result_bytes: usize,
}

/// Node phases as Argo names them (`NodePhase`).
pub(crate) const PHASES: [&str; 7] = [
    "Pending",
    "Running",
    "Succeeded",
    "Skipped",
    "Failed",
    "Error",
    "Omitted",
];

/// A run of lowercase letters, digits and '-' that starts and ends with a letter or digit.
fn is_dns_part(part: &str) -> bool {
    let bytes = part.as_bytes();
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// A DNS-1123 label: a namespace.
pub fn dns_label(field: &str, value: &str) -> Result<(), FieldError> {
    if value.len() <= 63 && is_dns_part(value) {
        Ok(())
    } else {
        fail(
            field,
            format!(
                "{value:?} is not a DNS-1123 label (lowercase letters, digits and '-', \
                 starting and ending with a letter or digit, at most 63)"
            ),
        )
    }
}

/// A DNS-1123 subdomain, as Kubernetes checks object names (`IsDNS1123Subdomain`): at most
/// 253 in all, with no cap on the parts between dots. Workflow, node ID, pod and cron
/// workflow names: Argo's node IDs reach 74 characters and its v2 pod names 203.
pub fn dns_subdomain(field: &str, value: &str) -> Result<(), FieldError> {
    if value.len() <= 253 && value.split('.').all(is_dns_part) {
        Ok(())
    } else {
        fail(
            field,
            format!(
                "{value:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', \
                 each part between dots starting and ending with a letter or digit, at most 253)"
            ),
        )
    }
}

/// A label value, as Kubernetes checks it: Argo's controller instance ID, which it puts in
/// the `workflows.argoproj.io/controller-instanceid` label.
fn label_value(field: &str, value: &str) -> Result<(), FieldError> {
    let bytes = value.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric();
    if valid {
        Ok(())
    } else {
        fail(
            field,
            format!(
                "{value:?} is not a label value (letters, digits, '-', '_' and '.', starting \
                 and ending with a letter or digit, at most 63)"
            ),
        )
    }
}

/// Free text stored as a string column: bounded, and without NUL, which Postgres cannot
/// store in text (SQLite could, and both backends must answer alike).
fn text(field: &str, value: &str, max_bytes: usize) -> Result<(), FieldError> {
    if value.len() > max_bytes {
        return fail(
            field,
            format!("is {} bytes; the limit is {max_bytes}", value.len()),
        );
    }
    if value.contains('\0') {
        return fail(field, "must not contain NUL (\\u0000)");
    }
    Ok(())
}

/// The largest `message` of a report.
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// A Kubernetes UID: non-empty, at most 128 visible ASCII characters.
pub fn uid(field: &str, value: &str) -> Result<(), FieldError> {
    if !value.is_empty() && value.len() <= 128 && value.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        fail(field, "must be 1 to 128 visible ASCII characters")
    }
}

fn progress(value: &str) -> Result<(), FieldError> {
    let parsed = value
        .split_once('/')
        .and_then(|(n, m)| Some((n.parse::<u64>().ok()?, m.parse::<u64>().ok()?)));
    match parsed {
        Some((n, m)) if m > 0 && n <= m => Ok(()),
        _ => fail(
            "progress",
            format!("{value:?} is not N/M with 0 <= N <= M and M > 0"),
        ),
    }
}

fn name_matches(name: &str, extra: &[u8]) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || extra.contains(&b))
}

/// The members of an `outputs` patch that have rules, each as its text; `null` (which
/// removes the member when the patch is merged) reads as absent. Other members pass
/// through untouched, unread.
#[derive(serde::Deserialize)]
struct OutputsPatch<'a> {
    #[serde(borrow)]
    parameters: Option<&'a RawValue>,
    #[serde(borrow)]
    artifacts: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow, rename = "exitCode")]
    exit_code: Option<&'a RawValue>,
}

/// The JSON kinds Argo gives the members of a parameter or an artifact it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    Integer,
    Boolean,
    Object,
    /// Argo's `AnyString`: a string, a number or a boolean.
    AnyString,
    /// An array of `AnyString`.
    AnyStrings,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Integer => "an integer",
            Kind::Boolean => "a boolean",
            Kind::Object => "an object",
            Kind::AnyString => "a string, a number or a boolean",
            Kind::AnyStrings => "an array of strings, numbers or booleans",
        }
    }

    /// Whether `value` (JSON text, not `null`) is of this kind.
    fn admits(self, value: &RawValue) -> bool {
        let text = value.get();
        let scalar = |text: &str| {
            text.starts_with('"')
                || text == "true"
                || text == "false"
                || text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
        };
        match self {
            Kind::String => text.starts_with('"'),
            Kind::Integer => serde_json::from_str::<i64>(text).is_ok(),
            Kind::Boolean => text == "true" || text == "false",
            Kind::Object => text.starts_with('{'),
            Kind::AnyString => scalar(text),
            Kind::AnyStrings => serde_json::from_str::<Vec<&RawValue>>(text)
                .is_ok_and(|items| items.iter().all(|item| scalar(item.get()))),
        }
    }
}

/// The members of an output parameter that Argo knows (`Parameter`), with their kinds;
/// the OpenAPI document declares the same (`OutputParameter`).
pub const PARAMETER_MEMBERS: &[(&str, Kind)] = &[
    ("value", Kind::AnyString),
    ("default", Kind::AnyString),
    ("valueFrom", Kind::Object),
    ("globalName", Kind::String),
    ("enum", Kind::AnyStrings),
    ("description", Kind::AnyString),
];

/// The members of an output artifact that Argo knows (`Artifact`, `ArtifactLocation`),
/// with their kinds; the OpenAPI document declares the same (`OutputArtifact`).
pub const ARTIFACT_MEMBERS: &[(&str, Kind)] = &[
    ("path", Kind::String),
    ("mode", Kind::Integer),
    ("from", Kind::String),
    ("fromExpression", Kind::String),
    ("globalName", Kind::String),
    ("subPath", Kind::String),
    ("optional", Kind::Boolean),
    ("recurseMode", Kind::Boolean),
    ("deleted", Kind::Boolean),
    ("archiveLogs", Kind::Boolean),
    ("archive", Kind::Object),
    ("artifactGC", Kind::Object),
    ("s3", Kind::Object),
    ("git", Kind::Object),
    ("http", Kind::Object),
    ("artifactory", Kind::Object),
    ("hdfs", Kind::Object),
    ("raw", Kind::Object),
    ("oss", Kind::Object),
    ("gcs", Kind::Object),
    ("azure", Kind::Object),
    ("plugin", Kind::Object),
];

/// How an item of `parameters` or `artifacts` must be: its name's pattern (the bytes
/// allowed besides letters, digits, `-` and `_`), and its known members.
struct ItemRules {
    key: &'static str,
    extra: &'static [u8],
    pattern: &'static str,
    members: &'static [(&'static str, Kind)],
}

const PARAMETERS: ItemRules = ItemRules {
    key: "parameters",
    extra: b"",
    pattern: "^[-a-zA-Z0-9_]+$",
    members: PARAMETER_MEMBERS,
};

const ARTIFACTS: ItemRules = ItemRules {
    key: "artifacts",
    extra: b"{}.",
    pattern: "^[-a-zA-Z0-9_{}.]+$",
    members: ARTIFACT_MEMBERS,
};

fn named_items(items: Option<&RawValue>, rules: &ItemRules) -> Result<(), FieldError> {
    let key = rules.key;
    let Some(items) = items else {
        return Ok(());
    };
    let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(items.get()) else {
        return fail(format!("outputs.{key}"), "must be an array");
    };
    for (i, item) in items.iter().enumerate() {
        // Anything but an object has no name.
        let members = is_object(item)
            .then(|| serde_json::from_str::<HashMap<Cow<str>, &RawValue>>(item.get()).ok())
            .flatten()
            .unwrap_or_default();
        let name = members
            .get("name")
            .and_then(|value| serde_json::from_str::<Cow<str>>(value.get()).ok());
        match name {
            Some(name) if name_matches(&name, rules.extra) => {}
            Some(name) => {
                return fail(
                    format!("outputs.{key}[{i}].name"),
                    format!("{name:?} does not match {}", rules.pattern),
                );
            }
            None => return fail(format!("outputs.{key}[{i}].name"), "is required"),
        }
        for (member, kind) in rules.members {
            if let Some(value) = members.get(*member)
                && value.get() != "null"
                && !kind.admits(value)
            {
                return fail(
                    format!("outputs.{key}[{i}].{member}"),
                    format!("must be {}, as in Argo", kind.describe()),
                );
            }
        }
    }
    Ok(())
}

/// Argo's `Outputs`, as a merge patch: an object whose parameters and artifacts (when not
/// `null`, which removes them) carry valid names and whose `result` fits the limit. Other
/// fields pass through untouched.
fn outputs(raw: &RawValue, limits: &Limits) -> Result<(), FieldError> {
    // Checked first: serde would read an array as a struct's fields in order.
    if !is_object(raw) {
        return fail("outputs", "must be an object");
    }
    let Ok(patch) = serde_json::from_str::<OutputsPatch>(raw.get()) else {
        return fail("outputs", "is not valid JSON");
    };
    // Bounds what merging it into the stored outputs may ask of the writer.
    let members = most_members(raw.get());
    if members > MAX_MEMBERS {
        return fail(
            "outputs",
            format!("has an object of {members} members; the limit is {MAX_MEMBERS}"),
        );
    }
    named_items(patch.parameters, &PARAMETERS)?;
    named_items(patch.artifacts, &ARTIFACTS)?;
    if let Some(result) = patch.result {
        let Ok(result) = serde_json::from_str::<Cow<str>>(result.get()) else {
            return fail("outputs.result", "must be a string");
        };
        if result.len() > limits.max_result_bytes {
            return fail(
                "outputs.result",
                format!(
                    "is {} bytes; the limit is {} (--max-result-bytes)",
                    result.len(),
                    limits.max_result_bytes
                ),
            );
        }
    }
    match patch.exit_code {
        Some(code) if serde_json::from_str::<Cow<str>>(code.get()).is_err() => {
            fail("outputs.exitCode", "must be a string")
        }
        _ => Ok(()),
    }
}

pub fn report(body: &ReportRequest, limits: &Limits) -> Result<(), FieldError> {
    uid("workflowUid", &body.workflow_uid)?;
    dns_subdomain("podName", &body.pod_name)?;
    uid("podUid", &body.pod_uid)?;
    if let Some(instance_id) = &body.instance_id {
        label_value("instanceId", instance_id)?;
    }
    if let Some(sequence) = body.sequence
        && sequence < 1
    {
        return fail("sequence", "must be at least 1");
    }
    if let Some(value) = &body.progress {
        progress(value)?;
    }
    if let Some(phase) = &body.phase
        && !PHASES.contains(&phase.as_str())
    {
        return fail("phase", format!("{phase:?} is not one of {PHASES:?}"));
    }
    if let Some(message) = &body.message {
        text("message", message, MAX_MESSAGE_BYTES)?;
    }
    if let Some(raw) = &body.outputs {
        outputs(raw, limits)?;
    }
    Ok(())
}

pub fn expectation(body: &ExpectationRequest) -> Result<(), FieldError> {
    uid("workflowUid", &body.workflow_uid)?;
    dns_subdomain("podName", &body.pod_name)?;
    match &body.pod_uid {
        Some(pod_uid) => uid("podUid", pod_uid),
        None => Ok(()),
    }
}

pub fn abandon(body: &AbandonRequest) -> Result<(), FieldError> {
    uid("workflowUid", &body.workflow_uid)?;
    if body.reason.trim().is_empty() {
        return fail("reason", "must not be empty");
    }
    text("reason", &body.reason, 1024)
}

/// The lease of a claim that names none, and the leases a claim may ask for (seconds).
pub const DEFAULT_LEASE_SECONDS: i64 = 60;
const LEASE_SECONDS: std::ops::RangeInclusive<i64> = 5..=3600;

fn scheduled_time(text: &str) -> Result<i64, FieldError> {
    argo_results_rules::clock::parse_rfc3339_millis(text).ok_or_else(|| {
        field_error(
            "scheduledTime",
            format!("{text:?} is not an RFC 3339 time such as 2026-11-29T17:00:00Z"),
        )
    })
}

/// Checks a claim and returns its scheduled time in Unix milliseconds.
pub fn claim(body: &ClaimRequest) -> Result<i64, FieldError> {
    uid("cronWorkflowUid", &body.cron_workflow_uid)?;
    dns_subdomain("workflowName", &body.workflow_name)?;
    if let Some(lease) = body.lease_seconds
        && !LEASE_SECONDS.contains(&lease)
    {
        return Err(field_error(
            "leaseSeconds",
            format!(
                "{lease} is not between {} and {} seconds",
                LEASE_SECONDS.start(),
                LEASE_SECONDS.end()
            ),
        ));
    }
    scheduled_time(&body.scheduled_time)
}

/// Checks a settle and returns the tick's scheduled time in Unix milliseconds and the
/// outcome with its one detail: the workflow's UID, or the reason it was skipped.
pub fn settle(body: &SettleRequest) -> Result<(i64, Settled), FieldError> {
    use SettleOutcome::{Skipped, Submitted};
    uid("cronWorkflowUid", &body.cron_workflow_uid)?;
    uid("claimId", &body.claim_id)?;
    let scheduled = scheduled_time(&body.scheduled_time)?;
    let outcome = match (body.outcome, &body.workflow_uid, &body.reason) {
        (Submitted, Some(workflow_uid), None) => {
            uid("workflowUid", workflow_uid)?;
            Settled::Submitted {
                workflow_uid: workflow_uid.clone(),
            }
        }
        (Skipped, None, Some(reason)) => {
            if reason.trim().is_empty() {
                return Err(field_error("reason", "must not be empty"));
            }
            text("reason", reason, 1024)?;
            Settled::Skipped {
                reason: reason.clone(),
            }
        }
        (Submitted, _, Some(_)) => {
            return Err(field_error("reason", "goes with outcome skipped only"));
        }
        (Skipped, Some(_), _) => {
            return Err(field_error(
                "workflowUid",
                "goes with outcome submitted only",
            ));
        }
        (Submitted, None, None) => {
            return Err(field_error(
                "workflowUid",
                "is required with outcome submitted",
            ));
        }
        (Skipped, None, None) => {
            return Err(field_error("reason", "is required with outcome skipped"));
        }
    };
    Ok((scheduled, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        max_body_bytes: 1 << 20,
        max_result_bytes: 16,
    };

    fn field_of(outputs: &str) -> Option<String> {
        let raw = RawValue::from_string(outputs.to_owned()).expect("json");
        super::outputs(&raw, &LIMITS).err().map(|e| e.field)
    }

    #[test]
    fn names_follow_dns_1123() {
        assert!(dns_label("namespace", "argo-1").is_ok());
        assert!(dns_label("namespace", "Argo").is_err());
        assert!(dns_label("namespace", "-argo").is_err());
        assert!(dns_label("namespace", &"a".repeat(64)).is_err());
        assert!(dns_subdomain("workflow", "etl-x7k2p.v2").is_ok());
        assert!(dns_subdomain("workflow", "etl..x").is_err());
        assert!(dns_subdomain("workflow", "etl-.x").is_err());
        assert!(dns_subdomain("workflow", "").is_err());
        // No 63-character cap between dots: Argo's longest v2 pod names are 203.
        assert!(dns_subdomain("podName", &"a".repeat(253)).is_ok());
        assert!(dns_subdomain("podName", &"a".repeat(254)).is_err());
    }

    #[test]
    fn outputs_are_bounded_in_members() {
        let members = |n: usize| {
            let members: Vec<String> = (0..n).map(|i| format!(r#""m{i}":{i}"#)).collect();
            format!("{{{}}}", members.join(","))
        };
        assert_eq!(field_of(&members(MAX_MEMBERS)), None);
        assert_eq!(
            field_of(&members(MAX_MEMBERS + 1)).as_deref(),
            Some("outputs")
        );
        let deep_inside = format!(
            r#"{{"parameters":[{{"name":"p","valueFrom":{}}}]}}"#,
            members(MAX_MEMBERS + 1)
        );
        assert_eq!(field_of(&deep_inside).as_deref(), Some("outputs"));
    }

    #[test]
    fn progress_is_n_of_m() {
        assert!(progress("0/1").is_ok());
        assert!(progress("10/10").is_ok());
        assert!(progress("11/10").is_err());
        assert!(progress("0/0").is_err());
        assert!(progress("1/x").is_err());
        assert!(progress("-1/2").is_err());
    }

    #[test]
    fn argos_members_of_parameters_and_artifacts_have_argos_kinds() {
        assert_eq!(
            field_of(
                r#"{"parameters":[{"name":"a","value":1.5,"default":true,"enum":["x",2],
                "valueFrom":{"path":"/p"},"other":{"kept":[1]}}],
                "artifacts":[{"name":"b","mode":420,"optional":true,"s3":{"key":"k"},"path":null}]}"#
            ),
            None
        );
        for (outputs, field) in [
            (
                r#"{"parameters":[{"name":"a","value":{"x":1}}]}"#,
                "outputs.parameters[0].value",
            ),
            (
                r#"{"parameters":[{"name":"a","enum":[{}]}]}"#,
                "outputs.parameters[0].enum",
            ),
            (
                r#"{"parameters":[{"name":"a","globalName":3}]}"#,
                "outputs.parameters[0].globalName",
            ),
            (
                r#"{"artifacts":[{"name":"b","mode":"0644"}]}"#,
                "outputs.artifacts[0].mode",
            ),
            (
                r#"{"artifacts":[{"name":"b","s3":"bucket"}]}"#,
                "outputs.artifacts[0].s3",
            ),
        ] {
            assert_eq!(field_of(outputs).as_deref(), Some(field), "{outputs}");
        }
    }

    #[test]
    fn outputs_errors_name_the_json_path() {
        assert_eq!(field_of(r#"{"parameters":[{"name":"ok"}]}"#), None);
        assert_eq!(
            field_of(r#"{"parameters":[{"name":"ok"},{"name":"no way"}]}"#),
            Some("outputs.parameters[1].name".into())
        );
        assert_eq!(
            field_of(r#"{"artifacts":[{"name":"a.{b}"},{"path":"/x"}]}"#),
            Some("outputs.artifacts[1].name".into())
        );
        assert_eq!(
            field_of(r#"{"result":"this is longer than sixteen bytes"}"#),
            Some("outputs.result".into())
        );
        assert_eq!(field_of("[]"), Some("outputs".into()));
        assert_eq!(
            field_of(r#"{"exitCode":0}"#),
            Some("outputs.exitCode".into())
        );
        assert_eq!(
            field_of(r#"{"parameters":{"name":"a"}}"#),
            Some("outputs.parameters".into())
        );
        assert_eq!(
            field_of(r#"{"parameters":["a",{"name":1}]}"#),
            Some("outputs.parameters[0].name".into())
        );
        assert_eq!(
            field_of(r#"{"parameters":[{"name":"a"},{"name":1}]}"#),
            Some("outputs.parameters[1].name".into())
        );
        assert_eq!(
            field_of(r#"{"parameters":[{"name":"a\u002db"},{"value":"x"}]}"#),
            Some("outputs.parameters[1].name".into())
        );
        // The limit counts the result's characters, not its escapes: 16 bytes of text.
        assert_eq!(
            field_of(
                r#"{"result":"\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041"}"#
            ),
            None
        );
        assert_eq!(
            field_of(r#"{"result":["x"]}"#),
            Some("outputs.result".into())
        );
        // Members without rules are not read.
        assert_eq!(field_of(r#"{"other":[1,{"name":"no way"}]}"#), None);
        // A merge patch may remove any of them.
        assert_eq!(
            field_of(r#"{"parameters":null,"artifacts":null,"result":null,"exitCode":null}"#),
            None
        );
    }

    fn body(message: &str, instance_id: &str) -> ReportRequest {
        ReportRequest {
            protocol_version: 1,
            workflow_uid: "u".into(),
            pod_name: "wf-1".into(),
            pod_uid: "p".into(),
            instance_id: Some(instance_id.into()),
            sequence: None,
            is_final: false,
            outputs: None,
            progress: None,
            phase: None,
            message: Some(message.into()),
        }
    }

    fn field(result: Result<(), FieldError>) -> Option<String> {
        result.err().map(|e| e.field)
    }

    #[test]
    fn messages_and_instance_ids_as_stored_and_labelled() {
        assert_eq!(field(report(&body("done", "Ctl_1.a",), &LIMITS)), None);
        assert_eq!(
            field(report(&body("a\0b", "ctl"), &LIMITS)),
            Some("message".into())
        );
        let long = "x".repeat(MAX_MESSAGE_BYTES + 1);
        assert_eq!(
            field(report(&body(&long, "ctl"), &LIMITS)),
            Some("message".into())
        );
        for bad in ["", "-ctl", "ctl_", &"c".repeat(64), "a b"] {
            assert_eq!(
                field(report(&body("m", bad), &LIMITS)),
                Some("instanceId".into()),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_claims_lease_is_5_to_3600_seconds() {
        let claim = |lease_seconds| ClaimRequest {
            cron_workflow_uid: "u".into(),
            scheduled_time: "2026-11-29T17:00:00Z".into(),
            workflow_name: "nightly-1764435600".into(),
            lease_seconds,
        };
        for lease in [None, Some(5), Some(3600)] {
            assert!(super::claim(&claim(lease)).is_ok(), "{lease:?}");
        }
        for lease in [Some(4), Some(3601), Some(-1)] {
            assert_eq!(
                super::claim(&claim(lease)).err().map(|e| e.field),
                Some("leaseSeconds".into())
            );
        }
    }

    #[test]
    fn a_settle_carries_exactly_its_outcomes_detail() {
        let settle = |outcome, workflow_uid: Option<&str>, reason: Option<&str>| {
            let body = SettleRequest {
                cron_workflow_uid: "u".into(),
                scheduled_time: "2026-11-29T17:00:00Z".into(),
                claim_id: "c".into(),
                outcome,
                workflow_uid: workflow_uid.map(Into::into),
                reason: reason.map(Into::into),
            };
            super::settle(&body)
                .map(|(_, settled)| settled)
                .map_err(|e| e.field)
        };
        use SettleOutcome::{Skipped, Submitted};
        assert_eq!(
            settle(Submitted, Some("wf"), None),
            Ok(Settled::Submitted {
                workflow_uid: "wf".into()
            })
        );
        assert_eq!(
            settle(Skipped, None, Some("Forbid")),
            Ok(Settled::Skipped {
                reason: "Forbid".into()
            })
        );
        assert_eq!(settle(Submitted, None, None), Err("workflowUid".into()));
        assert_eq!(
            settle(Submitted, Some("wf"), Some("x")),
            Err("reason".into())
        );
        assert_eq!(settle(Skipped, None, None), Err("reason".into()));
        assert_eq!(
            settle(Skipped, Some("wf"), Some("x")),
            Err("workflowUid".into())
        );
        assert_eq!(settle(Skipped, None, Some(" ")), Err("reason".into()));
        assert_eq!(settle(Skipped, None, Some("a\0b")), Err("reason".into()));
    }

    /// A name as Kubernetes builds one: parts of `[a-z0-9]([-a-z0-9]*[a-z0-9])?` joined by dots.
    fn object_name() -> impl Strategy<Value = String> {
        let part = "[a-z0-9]([-a-z0-9]{0,70}[a-z0-9])?";
        prop::collection::vec(part, 1..4).prop_map(|parts| parts.join("."))
    }

    proptest! {
        #[test]
        fn every_kubernetes_object_name_is_accepted(name in object_name()) {
            prop_assert_eq!(dns_subdomain("podName", &name).is_ok(), name.len() <= 253);
        }

        #[test]
        fn no_name_outside_the_grammar_is_accepted(name in "[a-z0-9.-]{0,8}[^a-z0-9.-][a-z0-9.-]{0,8}") {
            prop_assert!(dns_subdomain("podName", &name).is_err());
            prop_assert!(dns_label("namespace", &name).is_err());
        }

        #[test]
        fn a_message_is_refused_exactly_when_it_has_nul_or_is_too_long(
            message in "[a\u{0}é]{0,40}",
            repeat in 0usize..500,
        ) {
            let message = message.repeat(repeat);
            let refused = message.contains('\0') || message.len() > MAX_MESSAGE_BYTES;
            let answer = field(report(&body(&message, "ctl"), &LIMITS));
            prop_assert_eq!(answer, refused.then(|| "message".to_owned()));
        }
    }
}
