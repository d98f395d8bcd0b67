//! The lines the server prints besides its log: where it listens and, for the embedded
//! default, how to get in (stdout), and why it could not start (stderr). Text, or with
//! `--log-format json` one JSON object a line shaped like the log's (`timestamp`, `level`,
//! `fields`, `target`), so that a JSON log pipeline never meets a line it cannot read.

use crate::config::LogFormat;

/// `text` as a line of `format`: as it is, or as a JSON object whose message is its first
/// line and whose fields are `fields`.
pub fn line(format: LogFormat, level: &str, text: &str, fields: &[(&str, &str)]) -> String {
    match format {
        LogFormat::Text => text.to_owned(),
        LogFormat::Json => {
            let mut values = serde_json::Map::new();
            let message = text.lines().next().unwrap_or_default();
            values.insert("message".into(), message.into());
            for (name, value) in fields {
                values.insert((*name).into(), (*value).into());
            }
            serde_json::json!({
                "timestamp": jiff::Timestamp::now().to_string(),
                "level": level,
                "fields": values,
                "target": "argo_results_server",
            })
            .to_string()
        }
    }
}

/// Prints `text` on stdout as a line of `format`.
pub fn say(format: LogFormat, text: &str, fields: &[(&str, &str)]) {
    println!("{}", line(format, "INFO", text, fields));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_carry_the_first_line_and_the_fields() {
        let text = "argo-results-server listening on http://127.0.0.1:8080";
        assert_eq!(line(LogFormat::Text, "INFO", text, &[("url", "x")]), text);
        let json: serde_json::Value = serde_json::from_str(&line(
            LogFormat::Json,
            "INFO",
            "first\nsecond",
            &[("url", "http://127.0.0.1:8080")],
        ))
        .expect("JSON");
        assert_eq!(json["fields"]["message"], "first");
        assert_eq!(json["fields"]["url"], "http://127.0.0.1:8080");
        assert_eq!(json["level"], "INFO");
        assert!(json["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
    }
}
