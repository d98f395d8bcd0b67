//! Schemas of the OpenAPI document alone: the formats of names and fields that the server
//! checks (`server/src/validate.rs`; API.md, its names and section 2), declared once so that
//! generated clients check what the server checks. No value of these types is ever made.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    Discriminator, ObjectBuilder, OneOfBuilder, Ref, Schema, SchemaType, Type,
};
use utoipa::{PartialSchema, ToSchema};

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

/// `N/M` steps done, with `0 <= N <= M` and `M > 0` (the pattern says all of it but
/// `N <= M`), each at most 19 digits.
#[derive(Debug, ToSchema)]
#[schema(pattern = "^[0-9]{1,19}/0*[1-9][0-9]{0,18}$", max_length = 39)]
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

/// Argo's `AnyString` (`pkg/apis/workflow/v1alpha1/anystring.go`): a string, or a number
/// or boolean that Argo reads as its text.
#[derive(Debug)]
pub struct AnyString;

impl utoipa::PartialSchema for AnyString {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([
                Type::String,
                Type::Number,
                Type::Boolean,
            ]))
            .description(Some(
                "Argo's AnyString: a string, or a number or boolean that Argo reads as its text.",
            ))
            .into()
    }
}

impl ToSchema for AnyString {}

/// Where Argo took a parameter's value from (`ValueFrom`); other members are stored as
/// sent.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct ValueFrom {
    pub path: Option<String>,
    pub json_path: Option<String>,
    pub jq_filter: Option<String>,
    pub event: Option<String>,
    pub parameter: Option<String>,
    pub expression: Option<String>,
    pub default: Option<AnyString>,
    #[schema(value_type = Option<Object>)]
    pub supplied: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub config_map_key_ref: Option<()>,
}

/// An output parameter: Argo's `Parameter`, its known members typed as Argo's are; others
/// are stored as sent.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct OutputParameter {
    #[schema(pattern = "^[-a-zA-Z0-9_]+$")]
    pub name: String,
    pub value: Option<AnyString>,
    pub default: Option<AnyString>,
    pub value_from: Option<ValueFrom>,
    pub global_name: Option<String>,
    #[schema(value_type = Option<Vec<AnyString>>)]
    pub r#enum: Option<()>,
    pub description: Option<AnyString>,
}

/// An output artifact: Argo's `Artifact` and the storage it names (`ArtifactLocation`),
/// its known members typed as Argo's are; others are stored as sent.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct OutputArtifact {
    #[schema(pattern = "^[-a-zA-Z0-9_{}.]+$")]
    pub name: String,
    pub path: Option<String>,
    /// File mode bits.
    pub mode: Option<i32>,
    pub from: Option<String>,
    pub from_expression: Option<String>,
    pub global_name: Option<String>,
    pub sub_path: Option<String>,
    pub optional: Option<bool>,
    pub recurse_mode: Option<bool>,
    pub deleted: Option<bool>,
    pub archive_logs: Option<bool>,
    #[schema(value_type = Option<Object>)]
    pub archive: Option<()>,
    #[schema(value_type = Option<Object>, rename = "artifactGC")]
    pub artifact_gc: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub s3: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub git: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub http: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub artifactory: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub hdfs: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub raw: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub oss: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub gcs: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub azure: Option<()>,
    #[schema(value_type = Option<Object>)]
    pub plugin: Option<()>,
}

/// The `type` of a [`FeedUpserted`].
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum UpsertedType {
    Upserted,
}

/// The `type` of a [`FeedDeleted`].
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum DeletedType {
    Deleted,
}

/// A change of the feed of `type` `upserted`: a result was created or changed; `result`
/// is its state at `revision`.
#[derive(Debug, ToSchema)]
pub struct FeedUpserted {
    pub r#type: UpsertedType,
    pub revision: i64,
    pub result: crate::NodeResult,
}

/// A change of the feed of `type` `deleted`: a result was deleted (the tombstone of a
/// workflow's garbage collection).
#[derive(Debug, ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct FeedDeleted {
    pub r#type: DeletedType,
    pub revision: i64,
    pub namespace: String,
    pub workflow: String,
    pub workflow_uid: String,
    pub node_id: String,
}

/// One change of the feed: its variants by name, told apart by `type`, so that generated
/// clients get one type for each.
impl PartialSchema for crate::FeedItem {
    fn schema() -> RefOr<Schema> {
        one_of_by(
            "type",
            &[
                ("upserted", FeedUpserted::name()),
                ("deleted", FeedDeleted::name()),
            ],
            "One change of the feed, in revision order; `type` says which.",
        )
    }
}

impl ToSchema for crate::FeedItem {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        variants::<FeedUpserted, FeedDeleted>(schemas);
    }
}

/// The `outcome` of a [`SettleSubmitted`].
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum SubmittedOutcome {
    Submitted,
}

/// The `outcome` of a [`SettleSkipped`].
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum SkippedOutcome {
    Skipped,
}

/// A settle whose holder created the tick's workflow (`outcome` `submitted`).
#[derive(Debug, ToSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettleSubmitted {
    #[schema(value_type = Uid)]
    pub cron_workflow_uid: String,
    #[schema(format = DateTime)]
    pub scheduled_time: String,
    /// The `claimId` of the holder's `201`.
    #[schema(value_type = Uid)]
    pub claim_id: String,
    #[schema(value_type = SubmittedOutcome)]
    pub outcome: String,
    /// The UID of the workflow created for the tick.
    #[schema(value_type = Uid)]
    pub workflow_uid: String,
}

/// A settle whose holder skipped the tick (`outcome` `skipped`), and why.
#[derive(Debug, ToSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettleSkipped {
    #[schema(value_type = Uid)]
    pub cron_workflow_uid: String,
    #[schema(format = DateTime)]
    pub scheduled_time: String,
    /// The `claimId` of the holder's `201`.
    #[schema(value_type = Uid)]
    pub claim_id: String,
    #[schema(value_type = SkippedOutcome)]
    pub outcome: String,
    #[schema(value_type = Reason)]
    pub reason: String,
}

/// `POST .../runs/settle`'s body: one shape per outcome, told apart by `outcome`, so that
/// a client generated from the document sends what the server takes.
impl PartialSchema for crate::SettleRequest {
    fn schema() -> RefOr<Schema> {
        one_of_by(
            "outcome",
            &[
                ("submitted", SettleSubmitted::name()),
                ("skipped", SettleSkipped::name()),
            ],
            "What the holder of a claim did with its tick; `outcome` says which.",
        )
    }
}

impl ToSchema for crate::SettleRequest {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        variants::<SettleSubmitted, SettleSkipped>(schemas);
    }
}

/// The schemas of a [`one_of_by`]'s two variants, and those they refer to.
fn variants<A: ToSchema, B: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((A::name().into(), A::schema()));
    schemas.push((B::name().into(), B::schema()));
    A::schemas(schemas);
    B::schemas(schemas);
}

/// One of the schemas `variants` names, told apart by the value of `property`.
fn one_of_by(
    property: &str,
    variants: &[(&str, std::borrow::Cow<'static, str>)],
    description: &str,
) -> RefOr<Schema> {
    let mut one_of = OneOfBuilder::new().description(Some(description));
    let mut discriminator = Discriminator::new(property);
    for (tag, name) in variants {
        let reference = format!("#/components/schemas/{name}");
        one_of = one_of.item(Ref::new(reference.clone()));
        discriminator.mapping.insert((*tag).to_owned(), reference);
    }
    one_of.discriminator(Some(discriminator)).into()
}
