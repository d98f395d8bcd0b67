//! The OpenAPI 3.1 document, generated from the handlers and the proto types.

use argo_results_proto::ResultState;
use argo_results_proto::schema::{Namespace, ObjectName, Uid};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "argo-results",
        description = "Step results of Argo Workflows, committed to a database before they are acknowledged.",
        license(name = "Apache-2.0")
    ),
    // The formats that only parameters use, which the operations do not bring in.
    components(schemas(Namespace, ObjectName, Uid, ResultState)),
    modifiers(&BearerAuth),
    tags(
        (name = "results", description = "Reports from wait containers and reads"),
        (name = "controller", description = "Expectations, abandon and garbage collection"),
        (name = "cron", description = "Cron run claims"),
        (name = "auth", description = "Who is calling"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A projected service-account token (audience argo-results) or a reader/controller token",
                    ))
                    .build(),
            ),
        );
    }
}

/// The answers that no handler gives but every operation may get, added to each one so
/// that no status the server sends is missing from the document: `401` wherever a token
/// is required, `429` from the limiter in front of every route, `503` when the database
/// or the Kubernetes API is out of reach, and, where a body is read, `408`, `413` and
/// `415` from reading it. A route's annotation lists only what is its own.
pub struct CommonResponses;

impl CommonResponses {
    fn add(operation: &mut Operation, status: &str, description: &str, retry_after: bool) {
        let problem = Content::new(Some(Ref::from_schema_name("Problem")));
        let mut response = ResponseBuilder::new()
            .description(description)
            .content("application/problem+json", problem);
        if retry_after {
            let seconds = ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0));
            let header = HeaderBuilder::new()
                .schema(Some(seconds))
                .description(Some("Seconds to wait before retrying"))
                .build();
            response = response.header("Retry-After", header);
        }
        operation
            .responses
            .responses
            .insert(status.to_owned(), response.build().into());
    }
}

impl Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                if operation.request_body.is_some() {
                    Self::add(
                        operation,
                        "408",
                        "request_timeout: the body did not arrive within --body-timeout (10 s by default)",
                        false,
                    );
                    Self::add(
                        operation,
                        "413",
                        "payload_too_large: the body is larger than --max-body-bytes (2 MiB by default)",
                        false,
                    );
                    Self::add(
                        operation,
                        "415",
                        "unsupported_media_type: the body is not application/json, or is sent with a Content-Encoding",
                        false,
                    );
                }
                if operation.security.is_some() {
                    Self::add(
                        operation,
                        "401",
                        "unauthenticated: no bearer token, or one that does not verify",
                        false,
                    );
                }
                Self::add(
                    operation,
                    "429",
                    "overloaded: too many requests in flight or bodies in memory, or (reports) this pod's writes this hour; retry after Retry-After seconds",
                    true,
                );
                Self::add(
                    operation,
                    "503",
                    "unavailable: the database or the Kubernetes API cannot be reached, or (reports) the pod's UID is not registered yet; retry after Retry-After seconds",
                    true,
                );
            }
        }
    }
}

/// The document's formats against the checks the server makes (`validate`): a client that
/// checks a value against the document must never send what the server refuses.
#[cfg(test)]
mod tests {
    use std::sync::LazyLock;

    use argo_results_proto::{AbandonRequest, ReportRequest};
    use proptest::prelude::*;
    use proptest::string::string_regex;
    use serde_json::Value;

    use crate::validate::{self, FieldError, Kind, Limits, PHASES};

    fn document() -> &'static Value {
        static DOCUMENT: LazyLock<Value> = LazyLock::new(|| {
            serde_json::from_str(&super::super::openapi_json()).expect("the document is JSON")
        });
        &DOCUMENT
    }

    /// A component's `pattern` (without its anchors, as proptest takes it) and `maxLength`.
    fn format(name: &str) -> (String, usize) {
        let schema = &document()["components"]["schemas"][name];
        let pattern = schema["pattern"].as_str().expect("a pattern");
        let pattern = pattern.strip_prefix('^').and_then(|p| p.strip_suffix('$'));
        let max = schema["maxLength"].as_u64().expect("a maxLength");
        (pattern.expect("anchored").to_owned(), max as usize)
    }

    /// Values that match the component's pattern.
    fn matching(name: &str) -> impl Strategy<Value = String> {
        string_regex(&format(name).0).expect("a pattern proptest reads")
    }

    const LIMITS: Limits = Limits {
        max_body_bytes: 1 << 20,
        max_result_bytes: 1 << 18,
    };

    /// A valid report with `change` applied, as the server checks it.
    fn report(change: impl FnOnce(&mut ReportRequest)) -> Result<(), FieldError> {
        let mut body: ReportRequest = serde_json::from_value(serde_json::json!({
            "protocolVersion": 1, "workflowUid": "uid", "podName": "wf-1", "podUid": "pod",
        }))
        .expect("a report");
        change(&mut body);
        validate::report(&body, &LIMITS)
    }

    #[test]
    fn every_reference_resolves() {
        fn refs<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
            match value {
                Value::Object(members) => {
                    if let Some(Value::String(target)) = members.get("$ref") {
                        found.push(target);
                    }
                    members.values().for_each(|v| refs(v, found));
                }
                Value::Array(items) => items.iter().for_each(|v| refs(v, found)),
                _ => {}
            }
        }
        let document = document();
        let mut found = Vec::new();
        refs(document, &mut found);
        assert!(!found.is_empty());
        for target in found {
            let name = target.strip_prefix("#/components/schemas/").expect(target);
            assert!(
                document["components"]["schemas"][name].is_object(),
                "{target} is not in the document"
            );
        }
    }

    #[test]
    fn every_operation_documents_shedding_outages_and_bodies() {
        let paths = document()["paths"].as_object().expect("paths");
        assert!(!paths.is_empty());
        for (path, item) in paths {
            for (method, operation) in item.as_object().expect("a path item") {
                let mut expected = vec!["401", "429", "503"];
                if operation.get("requestBody").is_some() {
                    expected.extend(["413", "415"]);
                }
                for status in expected {
                    let response = &operation["responses"][status];
                    assert!(response.is_object(), "{method} {path} lacks {status}");
                }
            }
        }
    }

    #[test]
    fn the_phases_are_the_servers() {
        let declared = &document()["components"]["schemas"]["Phase"]["enum"];
        assert_eq!(declared, &serde_json::json!(PHASES));
    }

    proptest! {
        #[test]
        fn namespaces_of_the_format_are_accepted(name in matching("Namespace")) {
            let fits = name.len() <= format("Namespace").1;
            prop_assert_eq!(validate::dns_label("namespace", &name).is_ok(), fits);
        }

        #[test]
        fn object_names_of_the_format_are_accepted(name in matching("ObjectName")) {
            let fits = name.len() <= format("ObjectName").1;
            prop_assert_eq!(validate::dns_subdomain("podName", &name).is_ok(), fits);
        }

        #[test]
        fn uids_of_the_format_are_accepted(uid in matching("Uid")) {
            let fits = uid.len() <= format("Uid").1;
            prop_assert_eq!(validate::uid("podUid", &uid).is_ok(), fits);
        }

        #[test]
        fn instance_ids_of_the_format_are_accepted(id in matching("InstanceId")) {
            let fits = id.len() <= format("InstanceId").1;
            prop_assert_eq!(report(|r| r.instance_id = Some(id)).is_ok(), fits);
        }

        #[test]
        fn messages_of_the_format_are_accepted(message in matching("Message")) {
            prop_assert!(report(|r| r.message = Some(message)).is_ok());
        }

        #[test]
        fn reasons_of_the_format_are_accepted(reason in matching("Reason")) {
            let body = AbandonRequest { workflow_uid: "uid".into(), reason };
            prop_assert!(validate::abandon(&body).is_ok());
        }

        #[test]
        fn progress_of_the_format_with_n_up_to_m_is_accepted(progress in matching("Progress")) {
            let (n, m) = progress.split_once('/').expect("N/M");
            let (n, m): (u64, u64) = (n.parse().expect("N"), m.parse().expect("M"));
            prop_assert_eq!(report(|r| r.progress = Some(progress)).is_ok(), n <= m);
        }
    }

    /// What the document says a member of a parameter or an artifact is, as the kind the
    /// server checks.
    fn kind_of(property: &Value) -> Option<Kind> {
        let reference = |value: &Value| {
            value["oneOf"][0]["$ref"]
                .as_str()
                .or(value["items"]["$ref"].as_str())
                .map(str::to_owned)
        };
        match (property["type"].clone(), reference(property).as_deref()) {
            (_, Some("#/components/schemas/AnyString")) if property["oneOf"].is_array() => {
                Some(Kind::AnyString)
            }
            (_, Some("#/components/schemas/AnyString")) => Some(Kind::AnyStrings),
            (_, Some("#/components/schemas/ValueFrom")) => Some(Kind::Object),
            (Value::Array(types), None) => match types[0].as_str() {
                Some("string") => Some(Kind::String),
                Some("integer") => Some(Kind::Integer),
                Some("boolean") => Some(Kind::Boolean),
                Some("object") => Some(Kind::Object),
                _ => None,
            },
            _ => None,
        }
    }

    /// The document declares exactly the members of a parameter and an artifact whose
    /// kinds the server checks, and the same kinds.
    #[test]
    fn parameters_and_artifacts_are_declared_as_checked() {
        for (schema, members) in [
            ("OutputParameter", validate::PARAMETER_MEMBERS),
            ("OutputArtifact", validate::ARTIFACT_MEMBERS),
        ] {
            let properties = document()["components"]["schemas"][schema]["properties"]
                .as_object()
                .expect("properties");
            let declared: Vec<(&str, Option<Kind>)> = properties
                .iter()
                .filter(|(name, _)| *name != "name")
                .map(|(name, property)| (name.as_str(), kind_of(property)))
                .collect();
            let mut checked: Vec<(&str, Option<Kind>)> = members
                .iter()
                .map(|(name, kind)| (*name, Some(*kind)))
                .collect();
            checked.sort_by_key(|(name, _)| *name);
            assert_eq!(declared, checked, "{schema}");
        }
    }
}
