//! A small YAML writer for JSON values. Every string is double-quoted with JSON escapes,
//! which YAML reads the same way, so no value can change type on the way.

use serde_json::Value;

fn scalar(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        Value::Object(o) if o.is_empty() => "{}".into(),
        _ => unreachable!("collections are written by block"),
    }
}

fn is_block(value: &Value) -> bool {
    matches!(value, Value::Array(a) if !a.is_empty())
        || matches!(value, Value::Object(o) if !o.is_empty())
}

fn key(text: &str) -> String {
    let plain = text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if plain {
        text.to_owned()
    } else {
        Value::String(text.to_owned()).to_string()
    }
}

fn write(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (name, item) in map {
                if is_block(item) {
                    out.push_str(&format!("{pad}{}:\n", key(name)));
                    write(item, indent + 2, out);
                } else {
                    out.push_str(&format!("{pad}{}: {}\n", key(name), scalar(item)));
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                if is_block(item) {
                    // The first line of the block goes on the dash's line.
                    let mut block = String::new();
                    write(item, indent + 2, &mut block);
                    out.push_str(&format!("{pad}- {}", &block[indent + 2..]));
                } else {
                    out.push_str(&format!("{pad}- {}\n", scalar(item)));
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    write(value, 0, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::to_yaml;

    #[test]
    fn nests_maps_and_lists_and_quotes_strings() {
        let value = serde_json::json!({
            "state": "completed",
            "revision": 7,
            "outputs": {"parameters": [{"name": "n", "value": "1"}, "x"], "artifacts": []},
            "odd key": null
        });
        assert_eq!(
            to_yaml(&value),
            "\"odd key\": null\noutputs:\n  artifacts: []\n  parameters:\n    - name: \"n\"\n      value: \"1\"\n    - \"x\"\nrevision: 7\nstate: \"completed\"\n"
        );
    }
}
