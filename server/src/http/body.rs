//! Request bodies: received whole within a deadline and the size and memory limits
//! ([`super::admission::receive`], at admission), then read as JSON only, with every problem named
//! precisely.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;

use argo_results_proto::{
    AbandonRequest, ClaimRequest, ExpectationRequest, ProblemCode, ReportRequest, SettleRequest,
};
use axum::extract::{FromRequest, Request};
use axum::http::header;
use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::error::ApiError;
use super::state::AppState;

/// A body type's required top-level fields, so that missing ones are reported by name
/// before the type is read (its known fields are serde's own: [`fields`]).
pub trait RequestBody: DeserializeOwned {
    const REQUIRED: &'static [&'static str];
}

impl RequestBody for ReportRequest {
    const REQUIRED: &'static [&'static str] =
        &["protocolVersion", "workflowUid", "podName", "podUid"];
}

impl RequestBody for ExpectationRequest {
    const REQUIRED: &'static [&'static str] = &["workflowUid", "podName"];
}

impl RequestBody for AbandonRequest {
    const REQUIRED: &'static [&'static str] = &["workflowUid", "reason"];
}

impl RequestBody for ClaimRequest {
    const REQUIRED: &'static [&'static str] = &["cronWorkflowUid", "scheduledTime", "workflowName"];
}

impl RequestBody for SettleRequest {
    const REQUIRED: &'static [&'static str] =
        &["cronWorkflowUid", "scheduledTime", "claimId", "outcome"];
}

/// The field names serde's derive gives `T`, asked of `T` itself: the derive hands them
/// to `deserialize_struct`, which this deserializer only records.
fn fields<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut probe = FieldProbe(&[]);
    let _ = T::deserialize(&mut probe);
    probe.0
}

struct FieldProbe(&'static [&'static str]);

/// The probe's only answer: it reads nothing (no allocation, unlike serde's value errors).
#[derive(Debug)]
struct Probed;

impl std::fmt::Display for Probed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names only")
    }
}

impl std::error::Error for Probed {}

impl de::Error for Probed {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Probed
    }
}

impl<'de> de::Deserializer<'de> for &mut FieldProbe {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        self.0 = fields;
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// A JSON request body of type `T`.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

fn is_json(content_type: Option<&str>) -> bool {
    let Some(mime) = content_type.and_then(|value| value.split(';').next()) else {
        return false;
    };
    let mime = mime.trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Where a value sits in a body, spelled out (`outputs.parameters[0].value`) only when a
/// key is found twice there.
#[derive(Clone, Copy)]
enum Place<'p> {
    Top,
    Member(&'p Place<'p>, &'p str),
    Item(&'p Place<'p>, usize),
}

impl Place<'_> {
    fn path(&self) -> String {
        match self {
            Place::Top => String::new(),
            Place::Member(Place::Top, key) => (*key).to_owned(),
            Place::Member(parent, key) => format!("{}.{key}", parent.path()),
            Place::Item(parent, i) => format!("{}[{i}]", parent.path()),
        }
    }
}

/// What walking a body found: the path of a key it holds twice, and the top-level keys
/// in their order when it is an object.
#[derive(Default)]
struct Walked {
    duplicate: RefCell<Option<String>>,
    top_keys: RefCell<Option<Vec<String>>>,
}

/// The keys of one object seen so far. Argo's objects have a handful, compared in a
/// list; a body's object with thousands is indexed, so that none costs quadratic time.
enum Seen<'de> {
    Few(Vec<Cow<'de, str>>),
    Many(HashSet<Cow<'de, str>>),
}

/// Keys compared in a list before they are indexed.
const FEW_KEYS: usize = 16;

impl<'de> Seen<'de> {
    fn holds(&self, key: &str) -> bool {
        match self {
            Seen::Few(keys) => keys.iter().any(|seen| seen == key),
            Seen::Many(keys) => keys.contains(key),
        }
    }

    fn insert(&mut self, key: Cow<'de, str>) {
        match self {
            Seen::Few(keys) if keys.len() < FEW_KEYS => keys.push(key),
            Seen::Few(keys) => {
                let mut index: HashSet<_> = keys.drain(..).collect();
                index.insert(key);
                *self = Seen::Many(index);
            }
            Seen::Many(keys) => {
                keys.insert(key);
            }
        }
    }
}

/// One value of a body, walked to find an object with a key twice. JSON parsers keep the
/// first or the last of them, so a body that validates on one could be stored with the
/// other: such a body is refused wherever the duplicate is.
struct UniqueKeys<'a> {
    place: Place<'a>,
    walked: &'a Walked,
}

impl<'de> DeserializeSeed<'de> for UniqueKeys<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            let item = UniqueKeys {
                place: Place::Item(&self.place, i),
                walked: self.walked,
            };
            if items.next_element_seed(item)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        let mut seen = Seen::Few(Vec::new());
        let mut top_keys = Vec::new();
        while let Some(key) = members.next_key::<Cow<'de, str>>()? {
            let place = Place::Member(&self.place, &key);
            if seen.holds(&key) {
                let path = place.path();
                let error = de::Error::custom(format!("the key {path} appears twice"));
                *self.walked.duplicate.borrow_mut() = Some(path);
                return Err(error);
            }
            members.next_value_seed(UniqueKeys {
                place,
                walked: self.walked,
            })?;
            if matches!(self.place, Place::Top) {
                top_keys.push(key.to_string());
            }
            seen.insert(key);
        }
        if matches!(self.place, Place::Top) {
            *self.walked.top_keys.borrow_mut() = Some(top_keys);
        }
        Ok(())
    }
}

/// Refuses a body that is not JSON or that has a key twice in one object, anywhere;
/// returns its top-level keys, or `None` when it is not an object.
fn unique_keys(bytes: &[u8]) -> Result<Option<Vec<String>>, ApiError> {
    let walked = Walked::default();
    let seed = UniqueKeys {
        place: Place::Top,
        walked: &walked,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let result = seed
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end());
    match result {
        Ok(()) => Ok(walked.top_keys.into_inner()),
        Err(e) => {
            let error = ApiError::new(
                ProblemCode::InvalidJson,
                format!("the body is not valid JSON: {e}"),
            );
            Err(match walked.duplicate.into_inner() {
                Some(path) => error.with_field(path),
                None => error,
            })
        }
    }
}

/// Reads `T` from JSON text: `invalid_json` when it is not a JSON object, `unknown_field`
/// for a field `T` does not have, `invalid_field` for a missing or mistyped one.
pub fn parse<T: RequestBody>(bytes: &[u8]) -> Result<T, ApiError> {
    let Some(top_keys) = unique_keys(bytes)? else {
        return Err(ApiError::new(
            ProblemCode::InvalidJson,
            "the body is not a JSON object",
        ));
    };
    let known = fields::<T>();
    if let Some(unknown) = top_keys.iter().find(|key| !known.contains(&key.as_str())) {
        return Err(ApiError::new(
            ProblemCode::UnknownField,
            format!(
                "unknown field {unknown:?}; known fields: {}",
                known.join(", ")
            ),
        )
        .with_field(unknown.as_str()));
    }
    if let Some(missing) = T::REQUIRED
        .iter()
        .find(|field| !top_keys.iter().any(|key| key == *field))
    {
        return Err(
            ApiError::new(ProblemCode::InvalidField, format!("{missing} is required"))
                .with_field(*missing),
        );
    }
    // Read again, tracking the path, only to say where a value is wrong.
    serde_json::from_slice(bytes).or_else(|_| {
        let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
        serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let field = e.path().to_string();
            ApiError::new(ProblemCode::InvalidField, e.into_inner().to_string()).with_field(field)
        })
    })
}

impl<T: RequestBody> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    /// Reads the body [`super::admission::receive`] took in at admission.
    async fn from_request(request: Request, _: &AppState) -> Result<Self, ApiError> {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok());
        if !is_json(content_type) {
            return Err(ApiError::new(
                ProblemCode::UnsupportedMediaType,
                format!(
                    "the body must be application/json, not {}",
                    content_type.unwrap_or("untyped")
                ),
            ));
        }
        let bytes = axum::body::to_bytes(request.into_body(), usize::MAX)
            .await
            .map_err(|e| {
                ApiError::new(
                    ProblemCode::InvalidJson,
                    format!("the body could not be read: {e}"),
                )
            })?;
        parse(&bytes).map(JsonBody)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The field lists must name exactly what the type serializes.
    fn fields_of(value: serde_json::Value) -> Vec<String> {
        let mut keys: Vec<String> = value.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        keys
    }

    fn sorted(fields: &[&str]) -> Vec<String> {
        let mut fields: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        fields.sort();
        fields
    }

    #[test]
    fn field_lists_match_the_types() {
        let report: ReportRequest = serde_json::from_str(
            r#"{"protocolVersion":1,"workflowUid":"u","podName":"p","podUid":"q","instanceId":"i",
                "sequence":1,"final":true,"outputs":{},"progress":"1/1","phase":"Running","message":"m"}"#,
        )
        .expect("report");
        let report = serde_json::to_value(&report).expect("json");
        assert_eq!(fields_of(report), sorted(fields::<ReportRequest>()));
        let expectation = ExpectationRequest {
            workflow_uid: "u".into(),
            pod_name: "p".into(),
            pod_uid: Some("q".into()),
        };
        let expectation = serde_json::to_value(expectation).expect("json");
        assert_eq!(
            fields_of(expectation),
            sorted(fields::<ExpectationRequest>())
        );
        let abandon = serde_json::to_value(AbandonRequest {
            workflow_uid: "u".into(),
            reason: "r".into(),
        })
        .expect("json");
        assert_eq!(fields_of(abandon), sorted(fields::<AbandonRequest>()));
        let claim = serde_json::to_value(ClaimRequest {
            cron_workflow_uid: "u".into(),
            scheduled_time: "t".into(),
            workflow_name: "w".into(),
            lease_seconds: Some(60),
        })
        .expect("json");
        assert_eq!(fields_of(claim), sorted(fields::<ClaimRequest>()));
        let settle = serde_json::to_value(SettleRequest {
            cron_workflow_uid: "u".into(),
            scheduled_time: "t".into(),
            claim_id: "c".into(),
            outcome: argo_results_proto::SettleOutcome::Submitted,
            workflow_uid: Some("w".into()),
            reason: Some("r".into()),
        })
        .expect("json");
        assert_eq!(fields_of(settle), sorted(fields::<SettleRequest>()));
    }

    /// The required lists are the OpenAPI document's (generated from the same types): for
    /// a body of several shapes, what every shape requires.
    #[test]
    fn required_lists_match_the_document() {
        let document: serde_json::Value =
            serde_json::from_str(&crate::http::openapi_json()).expect("the document");
        let schemas = &document["components"]["schemas"];
        let required = |name: &str| -> Vec<String> {
            let mut fields: Vec<String> = schemas[name]["required"]
                .as_array()
                .unwrap_or_else(|| panic!("{name} has a required list"))
                .iter()
                .map(|field| field.as_str().expect("a name").to_owned())
                .collect();
            fields.sort();
            fields
        };
        assert_eq!(required("ReportRequest"), sorted(ReportRequest::REQUIRED));
        assert_eq!(
            required("ExpectationRequest"),
            sorted(ExpectationRequest::REQUIRED)
        );
        assert_eq!(required("AbandonRequest"), sorted(AbandonRequest::REQUIRED));
        assert_eq!(required("ClaimRequest"), sorted(ClaimRequest::REQUIRED));
        let skipped = required("SettleSkipped");
        let in_both: Vec<String> = required("SettleSubmitted")
            .into_iter()
            .filter(|field| skipped.contains(field))
            .collect();
        assert_eq!(in_both, sorted(SettleRequest::REQUIRED));
    }

    #[test]
    fn parse_names_the_problem() {
        let code = |body: &str| {
            parse::<AbandonRequest>(body.as_bytes())
                .err()
                .map(|e| e.status())
        };
        assert_eq!(code("[1]"), Some(axum::http::StatusCode::BAD_REQUEST));
        assert_eq!(
            code(r#"{"workflowUid":"u","reason":"r","x":1}"#),
            Some(axum::http::StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            code(r#"{"workflowUid":"u"}"#),
            Some(axum::http::StatusCode::UNPROCESSABLE_ENTITY)
        );
        assert_eq!(
            code(r#"{"workflowUid":1,"reason":"r"}"#),
            Some(axum::http::StatusCode::UNPROCESSABLE_ENTITY)
        );
        assert_eq!(code(r#"{"workflowUid":"u","reason":"r"}"#), None);
    }

    #[test]
    fn a_key_twice_anywhere_is_invalid_json_naming_where() {
        let field = |body: &str| {
            let error = parse::<ReportRequest>(body.as_bytes()).expect_err("refused");
            assert_eq!(
                error.status(),
                axum::http::StatusCode::BAD_REQUEST,
                "{error:?}"
            );
            format!("{error:?}")
        };
        let twice =
            r#"{"protocolVersion":1,"workflowUid":"u","podName":"p","podUid":"q","podUid":"r"}"#;
        assert!(field(twice).contains(r#"field: Some("podUid")"#));
        let inside = r#"{"protocolVersion":1,"workflowUid":"u","podName":"p","podUid":"q",
            "outputs":{"parameters":[{"name":"a","value":"1","value":"2"}]}}"#;
        assert!(field(inside).contains(r#"field: Some("outputs.parameters[0].value")"#));
        let ok = r#"{"protocolVersion":1,"workflowUid":"u","podName":"p","podUid":"q",
            "outputs":{"parameters":[{"name":"a"},{"name":"a"}]}}"#;
        assert!(parse::<ReportRequest>(ok.as_bytes()).is_ok());
    }

    #[test]
    fn a_key_twice_among_many_is_found() {
        let members = |keys: &[usize]| {
            let members: Vec<String> = keys.iter().map(|k| format!("\"k{k}\":{k}")).collect();
            format!(r#"{{"outputs":{{{}}}}}"#, members.join(","))
        };
        let distinct: Vec<usize> = (0..40).collect();
        assert_eq!(
            unique_keys(members(&distinct).as_bytes()).ok(),
            Some(Some(vec!["outputs".to_owned()]))
        );
        // Past the keys compared in a list, against the indexed ones.
        for (at, again) in [(30, 3), (30, 20), (10, 3)] {
            let mut keys = distinct.clone();
            keys.insert(at, again);
            let error = unique_keys(members(&keys).as_bytes()).expect_err("refused");
            let described = format!("{error:?}");
            let named = format!(r#"field: Some("outputs.k{again}")"#);
            assert!(described.contains(&named), "{described}");
        }
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<i32>().prop_map(serde_json::Value::from),
            "[a-b\"\\\\]{0,3}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 20, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(serde_json::Value::from),
                prop::collection::btree_map("[a-c]", inner, 1..3)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn keys_twice_are_found_wherever_they_are(value in json_value(), key in "[a-c]") {
            let text = value.to_string();
            prop_assert!(unique_keys(text.as_bytes()).is_ok());
            // The same member written twice into the first object of the text.
            if let Some(at) = text.find('{') {
                let member = format!("\"{key}\":1,\"{key}\":2");
                let rest = &text[at + 1..];
                let joined = if rest.starts_with('}') { member } else { format!("{member},") };
                let twice = format!("{}{{{joined}{rest}", &text[..at]);
                let error = unique_keys(twice.as_bytes()).expect_err("refused");
                prop_assert_eq!(error.status(), axum::http::StatusCode::BAD_REQUEST);
                let described = format!("{error:?}");
                let named = described.contains(&format!("{key}\")"));
                prop_assert!(named, "{}", described);
            }
        }
    }
}
