//! The Kubernetes RBAC that `--rbac` asks for, as one table. [`super::rbac`] builds every
//! SubjectAccessReview from [`resource_attributes`]; `--print-rbac-rules` prints the table
//! as ClusterRoles ([`print()`]), which `deploy/base` ships and `.ci/validate-deploy`
//! compares with the rendered manifests.

use k8s_openapi::api::authorization::v1::ResourceAttributes;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Verb;

/// The resource whose RBAC decides: Argo's task results, which operators already grant.
pub const GROUP: &str = "argoproj.io";
pub const RESOURCE: &str = "workflowtaskresults";

/// Who needs which verbs, and the ClusterRole that grants them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub cluster_role: &'static str,
    pub verbs: &'static [Verb],
}

/// Readers: `get` reads one result; `list` lists, follows the feed (across namespaces
/// when it names none) and lists cron claims.
pub const READER: Grant = Grant {
    cluster_role: "argo-results-reader",
    verbs: &[Verb::Get, Verb::List],
};

/// The workflow controller: a reader's verbs, `create` for expectations and cron claims,
/// `delete` for abandon and garbage collection.
pub const CONTROLLER: Grant = Grant {
    cluster_role: "argo-results-controller",
    verbs: &[Verb::Get, Verb::List, Verb::Create, Verb::Delete],
};

/// Executors whose token names no pod (`--allow-unbound-executor-tokens`): `create`,
/// which Argo's executor Role already grants. Pod-bound tokens need no RBAC.
pub const UNBOUND_EXECUTOR: Grant = Grant {
    cluster_role: "argo-results-executor",
    verbs: &[Verb::Create],
};

pub const GRANTS: [Grant; 3] = [READER, CONTROLLER, UNBOUND_EXECUTOR];

/// What a SubjectAccessReview asks for `verb` in `namespace` (`None`: all namespaces).
pub fn resource_attributes(verb: Verb, namespace: Option<&str>) -> ResourceAttributes {
    ResourceAttributes {
        group: Some(GROUP.into()),
        resource: Some(RESOURCE.into()),
        verb: Some(verb.as_str().into()),
        namespace: namespace.map(str::to_owned),
        ..ResourceAttributes::default()
    }
}

/// The ClusterRole granting exactly what `--rbac` asks of `grant`'s holders.
pub fn cluster_role(grant: &Grant) -> ClusterRole {
    let asked: Vec<ResourceAttributes> = grant
        .verbs
        .iter()
        .map(|verb| resource_attributes(*verb, None))
        .collect();
    let field = |get: fn(&ResourceAttributes) -> &Option<String>| {
        let mut values: Vec<String> = asked.iter().filter_map(|a| get(a).clone()).collect();
        values.dedup();
        values
    };
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(grant.cluster_role.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(field(|a| &a.group)),
            resources: Some(field(|a| &a.resource)),
            verbs: field(|a| &a.verb),
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    }
}

/// The ClusterRoles of `GRANTS` as a `v1` List (`kubectl apply -f -` takes it).
pub fn print() -> String {
    let items: Vec<ClusterRole> = GRANTS.iter().map(cluster_role).collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let mut text = serde_json::to_string_pretty(&list).expect("ClusterRoles serialize");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every verb a request can need. The match fails to compile when a verb is added,
    /// so the table below cannot silently miss one.
    fn all_verbs() -> Vec<Verb> {
        let all = [Verb::Get, Verb::List, Verb::Create, Verb::Delete];
        for verb in all {
            match verb {
                Verb::Get | Verb::List | Verb::Create | Verb::Delete => {}
            }
        }
        all.to_vec()
    }

    #[test]
    fn the_table_covers_what_authorization_asks() {
        // Readers get what the --reader list grants: the read verbs (Verb::is_read).
        let reads: Vec<Verb> = all_verbs().into_iter().filter(|v| v.is_read()).collect();
        assert_eq!(READER.verbs, reads.as_slice());
        // The controller may do everything a request can ask (the --controller list).
        assert_eq!(CONTROLLER.verbs, all_verbs().as_slice());
        // An unbound executor token is checked for create (Authenticator::allow_unbound_write).
        assert_eq!(UNBOUND_EXECUTOR.verbs, &[Verb::Create]);
    }

    #[test]
    fn printed_rules_are_the_ones_subject_access_reviews_ask() {
        let printed: serde_json::Value = serde_json::from_str(&print()).expect("printed JSON");
        assert_eq!(printed["kind"], "List");
        let roles: Vec<ClusterRole> =
            serde_json::from_value(printed["items"].clone()).expect("ClusterRoles");
        assert_eq!(roles.len(), GRANTS.len());
        for (role, grant) in roles.iter().zip(GRANTS) {
            assert_eq!(role.metadata.name.as_deref(), Some(grant.cluster_role));
            let rules = role.rules.as_deref().expect("rules");
            assert_eq!(rules.len(), 1, "{}", grant.cluster_role);
            // What rbac.rs sends for each verb, in all namespaces and in one.
            for verb in grant.verbs {
                for namespace in [None, Some("argo")] {
                    let asked = resource_attributes(*verb, namespace);
                    let rule = &rules[0];
                    assert_eq!(rule.api_groups, asked.group.map(|g| vec![g]));
                    assert_eq!(rule.resources, asked.resource.map(|r| vec![r]));
                    assert!(asked.verb.is_some_and(|v| rule.verbs.contains(&v)));
                    assert_eq!(asked.namespace.as_deref(), namespace);
                }
            }
            let verbs: Vec<&str> = grant.verbs.iter().map(|v| v.as_str()).collect();
            assert_eq!(
                rules[0].verbs, verbs,
                "{}: no verb beyond the table",
                grant.cluster_role
            );
            assert_eq!(rules[0].resource_names, None);
        }
    }
}
