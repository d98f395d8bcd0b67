//! The import rules of docs/architecture.md ("Layering rules"), checked on the sources:
//! each top-level module of the server names, through `crate::<module>`, only the modules
//! its rule allows; the rules crate depends on the wire types alone and does no I/O; the
//! wire types depend on nothing of ours; every write of the store begins at its one door.
//! Paths that climb with `super::` are not followed: they stay inside their module today,
//! and another module is named with `crate::`.

use std::path::{Path, PathBuf};

/// (rule, module, the modules it may name). Change a row here and in the page together.
const RULES: &[(&str, &str, &[&str])] = &[
    (
        "L1",
        "http",
        &[
            "auth", "store", "validate", "metrics", "paths", "rate", "listener",
        ],
    ),
    ("L2", "store", &["metrics"]),
    ("L3", "auth", &["paths", "rate"]),
    ("L4", "validate", &["store"]),
    ("L5", "metrics", &["auth"]),
    ("L6", "retention", &["store", "metrics"]),
    ("L7", "listener", &["metrics", "rate"]),
    (
        "L8",
        "config",
        &["store", "listener", "auth", "retention", "http", "validate"],
    ),
    ("L9", "console", &["config"]),
    ("L9", "banner", &["auth", "config", "console"]),
    ("L10", "paths", &[]),
    ("L10", "rate", &[]),
    ("L10", "tls", &[]),
];

/// What the rules crate may not depend on (L12): the server, the client, I/O.
const NOT_IN_RULES: &[&str] = &[
    "argo-results-server",
    "argo-results-client",
    "tokio",
    "sqlx",
    "reqwest",
    "hyper",
    "axum",
];

/// What the rules crate's code may not name (L12): the standard library's I/O.
const NO_IO: &[&str] = &[
    "std::fs",
    "std::net",
    "std::io",
    "std::process",
    "std::thread",
    "std::env",
];

/// What begins a write, or writes outside a transaction, anywhere but the store's door
/// (L14): a writing transaction on a pool connection, an autocommitted statement.
const PAST_THE_DOOR: &[&str] = &["This::BEGIN_WRITE", ".execute(&self.pool)"];

/// The store's door, where [`PAST_THE_DOOR`] belongs.
const THE_DOOR: &str = "store/sql/transaction.rs";

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// Each line's code, without what follows `//` (comments, doc comments).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split("//").next().unwrap_or("")))
}

/// The top-level modules `code` names through `crate::`.
fn named_modules(code: &str) -> Vec<&str> {
    code.match_indices("crate::")
        .filter(|(at, _)| {
            // Not `argo_results_crate::` or the like.
            !code[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
        })
        .map(|(at, prefix)| {
            let rest = &code[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

/// The breaches of [`RULES`] in one file of module `module`.
fn breaches(file: &str, module: &str, text: &str) -> Vec<String> {
    let Some((rule, _, allowed)) = RULES.iter().find(|(_, name, _)| *name == module) else {
        return vec![format!(
            "{file}: the module `{module}` has no row in docs/architecture.md's layering rules"
        )];
    };
    code_lines(text)
        .flat_map(|(line, code)| {
            named_modules(code)
                .into_iter()
                .filter(|named| *named != module && !allowed.contains(named))
                .map(move |named| {
                    format!(
                        "{file}:{line}: `{module}` names `crate::{named}`; rule {rule} allows {allowed:?}"
                    )
                })
        })
        .collect()
}

/// The writes of one file that do not begin at the store's door (L14).
fn writes_past_the_door(file: &str, text: &str) -> Vec<String> {
    if file == THE_DOOR {
        return Vec::new();
    }
    code_lines(text)
        .flat_map(|(line, code)| {
            PAST_THE_DOOR
                .iter()
                .filter(|pattern| code.contains(*pattern))
                .map(move |pattern| {
                    format!(
                        "{file}:{line}: `{pattern}`: rule L14, every write begins at {THE_DOOR}"
                    )
                })
        })
        .collect()
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `[dependencies]` of a manifest, by name.
fn dependencies(manifest: &str) -> Vec<&str> {
    let Some((_, rest)) = manifest.split_once("[dependencies]") else {
        return Vec::new();
    };
    let section = rest.split("\n[").next().unwrap_or("");
    section
        .lines()
        .filter_map(|line| line.split(['=', '.']).next())
        .map(str::trim)
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect()
}

#[test]
fn each_server_module_names_only_what_its_rule_allows() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for path in &files {
        let relative = path.strip_prefix(&src).expect("under src");
        let first = relative.components().next().expect("a component");
        let module = first
            .as_os_str()
            .to_str()
            .expect("UTF-8")
            .trim_end_matches(".rs");
        if matches!(module, "lib" | "main") {
            continue; // the roots wire every module together
        }
        found.extend(breaches(
            &relative.display().to_string(),
            module,
            &read(path),
        ));
    }
    assert!(files.len() > 40, "the server's sources were not found");
    assert!(
        found.is_empty(),
        "imports against docs/architecture.md, \"Layering rules\":\n{}",
        found.join("\n")
    );
}

#[test]
fn every_write_of_the_store_begins_at_its_door() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src.join("store"), &mut files);
    let found: Vec<String> = files
        .iter()
        .flat_map(|path| {
            let relative = path.strip_prefix(&src).expect("under src");
            writes_past_the_door(&relative.display().to_string(), &read(path))
        })
        .collect();
    assert!(
        files.iter().any(|path| path.ends_with(THE_DOOR)),
        "the store's door was not found"
    );
    assert!(
        found.is_empty(),
        "writes past the door:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_rules_crate_knows_only_the_wire_types_and_does_no_io() {
    let rules = root().join("rules");
    for name in dependencies(&read(&rules.join("Cargo.toml"))) {
        assert!(
            !NOT_IN_RULES.contains(&name),
            "rule L12: argo-results-rules depends on {name}"
        );
    }
    let mut files = Vec::new();
    rust_files(&rules.join("src"), &mut files);
    for path in files {
        for (line, code) in code_lines(&read(&path)) {
            for io in NO_IO {
                assert!(
                    !code.contains(io),
                    "rule L12: {}:{line} names {io}",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn the_wire_types_depend_on_nothing_of_ours() {
    let manifest = read(&root().join("../proto/Cargo.toml"));
    for name in dependencies(&manifest) {
        assert!(
            !name.starts_with("argo-results"),
            "rule L13: argo-results-proto depends on {name}"
        );
    }
}

#[test]
fn a_breach_is_named_with_its_file_line_and_rule() {
    let text = "use crate::metrics::Metrics;\n// crate::http in a comment\n\
                fn f() { crate::http::router(); }\n";
    assert_eq!(
        breaches("store/x.rs", "store", text),
        vec!["store/x.rs:3: `store` names `crate::http`; rule L2 allows [\"metrics\"]".to_owned()]
    );
    assert_eq!(
        breaches("newmod.rs", "newmod", "")[0],
        "newmod.rs: the module `newmod` has no row in docs/architecture.md's layering rules"
    );
    assert_eq!(
        writes_past_the_door(
            "store/sql/claims.rs",
            "let tx = self.pool.begin_with(This::BEGIN_WRITE).await?;\n"
        ),
        vec![
            "store/sql/claims.rs:1: `This::BEGIN_WRITE`: rule L14, every write begins at \
             store/sql/transaction.rs"
                .to_owned()
        ]
    );
    assert!(writes_past_the_door(THE_DOOR, ".execute(&self.pool)").is_empty());
    assert_eq!(
        named_modules("argo_results_crate::x; crate::auth::Caller"),
        ["auth"]
    );
    assert_eq!(
        dependencies(
            "[package]\nname = \"x\"\n[dependencies]\nserde.workspace = true\nfoo = \"1\"\n[dev-dependencies]\nbar = \"1\"\n"
        ),
        ["serde", "foo"]
    );
}
