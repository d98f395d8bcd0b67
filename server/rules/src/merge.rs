//! Outputs merged as an RFC 7386 JSON merge patch, as Argo's executor patches its
//! `WorkflowTaskResult` (`workflow/executor/taskresult.go`, `patchTaskResult`): in a
//! resource or data template `main` reports the parameters, then `wait` the log artifact.
//!
//! A member the patch leaves alone keeps its stored text, and a value the patch sets is
//! stored as sent: only objects that both sides have are rebuilt from their members.

use std::collections::{HashMap, VecDeque};

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// An object's members in their order, each value as its exact text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// The most members one object of an `outputs` patch may have (docs/api.md, section 2).
/// Argo's objects have a few dozen at most (an artifact, its location's); the bound keeps
/// what a merge may be asked to match small whatever the body's size. How deep a patch
/// nests is bounded before: the body's JSON reader takes 127 levels at most.
pub const MAX_MEMBERS: usize = 1000;

/// The members of the largest object in a JSON text (valid JSON already), in one pass.
pub fn most_members(text: &str) -> usize {
    // Each open object's members so far; `None` for an open array.
    let mut open: Vec<Option<usize>> = Vec::new();
    let mut most = 0;
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        match byte {
            b'"' => {
                // A string, escapes and all: nothing in it is structure.
                while let Some(byte) = bytes.next() {
                    match byte {
                        b'\\' => {
                            bytes.next();
                        }
                        b'"' => break,
                        _ => {}
                    }
                }
            }
            b'{' => open.push(Some(0)),
            b'[' => open.push(None),
            b'}' | b']' => {
                open.pop();
            }
            // A member's name ends at its colon: one per member.
            b':' => {
                if let Some(Some(members)) = open.last_mut() {
                    *members += 1;
                    most = most.max(*members);
                }
            }
            _ => {}
        }
    }
    most
}

/// Whether a JSON text is an object (the text is valid JSON already).
pub fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

fn is_null(raw: &RawValue) -> bool {
    raw.get().trim() == "null"
}

fn members(raw: &RawValue) -> Result<Members<'_>, serde_json::Error> {
    serde_json::from_str(raw.get())
}

/// Whether merging `patch` into nothing would change its text: only `null` members of
/// objects are dropped.
fn has_null_member(patch: &RawValue) -> Result<bool, serde_json::Error> {
    if !is_object(patch) {
        return Ok(false);
    }
    for (_, value) in members(patch)?.0 {
        if is_null(value) || has_null_member(value)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A merged member's value: stored or patch text as it was, or a rebuilt object.
enum Merged<'a> {
    Text(&'a str),
    Built(String),
}

impl Merged<'_> {
    fn as_str(&self) -> &str {
        match self {
            Merged::Text(text) => text,
            Merged::Built(text) => text,
        }
    }
}

/// RFC 7386 `MergePatch(target, patch)` as text, in time linear in the members of both:
/// each patch member finds its stored namesake through an index, never by a search (a
/// report of 180,000 members held the writer for 32 s that way), and a removed member is
/// left out when the object is written rather than shifted out of the list.
fn merge_value<'a>(
    target: Option<&'a RawValue>,
    patch: &'a RawValue,
) -> Result<Merged<'a>, serde_json::Error> {
    if !is_object(patch) {
        return Ok(Merged::Text(patch.get()));
    }
    // Each member in its place; `None` once the patch removed it.
    let mut merged: Vec<(String, Option<Merged<'a>>)> = match target {
        Some(target) if is_object(target) => members(target)?
            .0
            .into_iter()
            .map(|(key, value)| (key, Some(Merged::Text(value.get()))))
            .collect(),
        _ => Vec::new(),
    };
    // Where each name's members are, first first: a name the text repeats is merged into
    // its first member still there, as a search from the start would find it.
    let mut index: HashMap<String, VecDeque<usize>> = HashMap::with_capacity(merged.len());
    for (at, (key, _)) in merged.iter().enumerate() {
        index.entry(key.clone()).or_default().push_back(at);
    }
    for (key, value) in members(patch)?.0 {
        let at = index.get(&key).and_then(|places| places.front().copied());
        if is_null(value) {
            if let Some(at) = at {
                merged[at].1 = None;
                if let Some(places) = index.get_mut(&key) {
                    places.pop_front();
                }
            }
            continue;
        }
        let stored = match at.and_then(|at| merged[at].1.as_ref()) {
            Some(Merged::Text(text)) => Some(serde_json::from_str::<&RawValue>(text)?),
            _ => None,
        };
        let value = merge_value(stored, value)?;
        match at {
            Some(at) => merged[at].1 = Some(value),
            None => {
                index
                    .entry(key.clone())
                    .or_default()
                    .push_back(merged.len());
                merged.push((key, Some(value)));
            }
        }
    }
    let mut text = String::from("{");
    for (key, value) in merged
        .iter()
        .filter_map(|(key, value)| Some((key, value.as_ref()?)))
    {
        if text.len() > 1 {
            text.push(',');
        }
        text.push_str(&serde_json::to_string(key)?);
        text.push(':');
        text.push_str(value.as_str());
    }
    text.push('}');
    Ok(Merged::Built(text))
}

/// The stored outputs after `patch` (a JSON object) is merged into them. A patch merged
/// into nothing is kept as sent when merging would not change it.
pub fn merge(stored: Option<&str>, patch: &str) -> Result<String, serde_json::Error> {
    let patch: &RawValue = serde_json::from_str(patch)?;
    let stored: Option<&RawValue> = stored.map(serde_json::from_str).transpose()?;
    if stored.is_none() && !has_null_member(patch)? {
        return Ok(patch.get().to_owned());
    }
    Ok(merge_value(stored, patch)?.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::merge;
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    /// RFC 7386 section 2, on parsed values: the reference the text merge must agree with.
    fn reference(target: Value, patch: Value) -> Value {
        let Value::Object(patch) = patch else {
            return patch;
        };
        let mut target = match target {
            Value::Object(target) => target,
            _ => Map::new(),
        };
        for (key, value) in patch {
            if value.is_null() {
                target.remove(&key);
            } else {
                let old = target.remove(&key).unwrap_or(Value::Null);
                target.insert(key, reference(old, value));
            }
        }
        Value::Object(target)
    }

    fn merged(stored: Option<&str>, patch: &str) -> String {
        merge(stored, patch).expect("merge")
    }

    #[test]
    fn the_log_artifact_joins_the_parameters() {
        let main = r#"{"parameters":[{"name":"id","value":"42","valueFrom":{"jsonPath":"{.metadata.uid}"}}]}"#;
        let wait = r#"{"artifacts":[{"name":"main-logs","s3":{"key":"wf/pod/main.log"}}]}"#;
        let both = merged(Some(&merged(None, main)), wait);
        assert_eq!(
            both,
            r#"{"parameters":[{"name":"id","value":"42","valueFrom":{"jsonPath":"{.metadata.uid}"}}],"artifacts":[{"name":"main-logs","s3":{"key":"wf/pod/main.log"}}]}"#
        );
    }

    #[test]
    fn arrays_are_replaced_whole_and_null_removes() {
        let stored = r#"{"parameters":[{"name":"a"}],"result":"x","exitCode":"0"}"#;
        assert_eq!(
            merged(
                Some(stored),
                r#"{"parameters":[{"name":"b"}],"result":null}"#
            ),
            r#"{"parameters":[{"name":"b"}],"exitCode":"0"}"#
        );
    }

    #[test]
    fn values_keep_their_exact_text() {
        let stored = r#"{ "result" : "caf\u00e9\u0000" , "x": {"a":1, "b" : [1,  2]} }"#;
        assert_eq!(
            merged(Some(stored), r#"{"x":{"c":true}}"#),
            r#"{"result":"caf\u00e9\u0000","x":{"a":1,"b":[1,  2],"c":true}}"#
        );
        // Into nothing, a patch without nulls is stored exactly as sent.
        assert_eq!(merged(None, stored), stored);
        assert_eq!(
            merged(None, r#"{"a":{"b":null},"c":1}"#),
            r#"{"a":{},"c":1}"#
        );
    }

    #[test]
    fn the_largest_object_is_counted_and_strings_are_not_structure() {
        use super::most_members;
        let text = r#"{"a":{"b":[{"c":1,"d":"{:}\\\":[","e":[]}]},"f":2,"g":{}}"#;
        assert_eq!(most_members(text), 3);
        assert_eq!(
            most_members(r#"{"a":1,"b":{"c":{"d":1,"e":2,"f":3,"g":4}}}"#),
            4
        );
        assert_eq!(most_members(r#"[1,"x:y"]"#), 0);
        assert_eq!(most_members("7"), 0);
    }

    #[test]
    fn a_repeated_name_merges_into_its_first_member_still_there() {
        let stored = r#"{"a":1,"b":2,"a":3}"#;
        assert_eq!(merged(Some(stored), r#"{"a":4}"#), r#"{"a":4,"b":2,"a":3}"#);
        assert_eq!(merged(Some(stored), r#"{"a":null}"#), r#"{"b":2,"a":3}"#);
        assert_eq!(
            merged(Some(stored), r#"{"a":null,"a":5}"#),
            r#"{"b":2,"a":5}"#
        );
        assert_eq!(
            merged(Some(stored), r#"{"a":null,"a":null,"a":6}"#),
            r#"{"b":2,"a":6}"#
        );
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-c\u{0}é\"\\\\]{0,3}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn json_object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-d]", json_value(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        #[test]
        fn agrees_with_rfc_7386(stored in json_object(), patch in json_object(), pretty in any::<bool>()) {
            let text = |v: &Value| if pretty {
                serde_json::to_string_pretty(v).expect("json")
            } else {
                v.to_string()
            };
            let (stored_text, patch_text) = (text(&stored), text(&patch));
            let once = merged(Some(&stored_text), &patch_text);
            let value: Value = serde_json::from_str(&once).expect("merged text is JSON");
            prop_assert_eq!(&value, &reference(stored.clone(), patch.clone()));
            // Merging the same patch again changes nothing: a retried report is a replay.
            let twice: Value = serde_json::from_str(&merged(Some(&once), &patch_text)).expect("json");
            prop_assert_eq!(twice, value);
            let fresh: Value = serde_json::from_str(&merged(None, &patch_text)).expect("json");
            prop_assert_eq!(fresh, reference(json!({}), patch));
        }

        #[test]
        fn untouched_members_keep_their_text(stored in json_object(), patch in json_object()) {
            let stored_text = serde_json::to_string_pretty(&stored).expect("json");
            let once = merged(Some(&stored_text), &patch.to_string());
            let kept: std::collections::BTreeMap<String, &serde_json::value::RawValue> =
                serde_json::from_str(&stored_text).expect("json");
            let now: std::collections::BTreeMap<String, &serde_json::value::RawValue> =
                serde_json::from_str(&once).expect("json");
            for (key, value) in kept {
                if patch.get(&key).is_none() {
                    prop_assert_eq!(now[&key].get(), value.get());
                }
            }
        }
    }

    #[test]
    fn braces_brackets_quotes_and_backslashes_in_strings_are_not_structure() {
        use super::most_members;
        assert_eq!(most_members(r#"{"a":"x:y:z"}"#), 1);
        assert_eq!(most_members(r#"{"a":"}]","b":1,"c":2}"#), 3);
        assert_eq!(most_members(r#"{"a":"{[","b":{"c":1}}"#), 2);
        assert_eq!(most_members(r#"{"a":"\":\":","b":1}"#), 2);
        assert_eq!(most_members(r#"{"a":"\\","b":1,"c":2}"#), 3);
    }

    #[test]
    fn a_closed_object_or_array_takes_no_more_members() {
        use super::most_members;
        assert_eq!(most_members(r#"{"a":{"b":1,"c":2},"d":3}"#), 2);
        assert_eq!(most_members(r#"{"a":[1],"b":2,"c":3}"#), 3);
        assert_eq!(most_members(r#"{"a":[{"b":1}],"c":2,"d":3}"#), 3);
    }
}
