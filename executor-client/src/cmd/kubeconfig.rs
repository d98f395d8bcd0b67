//! The namespace of the current kubeconfig context, the default of `-n/--namespace` as in
//! kubectl: the files of `KUBECONFIG` (a list, merged: the first file that sets
//! `current-context` decides it, the first file that defines a context name defines it;
//! files that do not exist are skipped), else `~/.kube/config`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The part of a kubeconfig file the namespace needs; everything else is ignored.
#[derive(Debug, Default, Deserialize)]
struct File {
    #[serde(rename = "current-context", default)]
    current_context: Option<String>,
    #[serde(default)]
    contexts: Option<Vec<NamedContext>>,
}

#[derive(Debug, Deserialize)]
struct NamedContext {
    name: String,
    #[serde(default)]
    context: Option<Context>,
}

#[derive(Debug, Deserialize)]
struct Context {
    #[serde(default)]
    namespace: Option<String>,
}

/// A kubeconfig file that exists but cannot be read or parsed.
#[derive(Debug)]
pub struct Unreadable {
    pub path: PathBuf,
    pub detail: String,
}

/// The files to read, in precedence order: `KUBECONFIG`'s list, else `~/.kube/config`.
fn files(kubeconfig: Option<&str>, home: Option<&Path>) -> Vec<PathBuf> {
    match kubeconfig.filter(|list| !list.trim().is_empty()) {
        Some(list) => std::env::split_paths(list)
            .filter(|path| !path.as_os_str().is_empty())
            .collect(),
        None => home
            .map(|home| home.join(".kube").join("config"))
            .into_iter()
            .collect(),
    }
}

/// One file, or `None` when it does not exist.
fn read(path: &Path) -> Result<Option<File>, Unreadable> {
    let unreadable = |detail: String| Unreadable {
        path: path.to_owned(),
        detail,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    // kubectl takes an empty file as an empty configuration.
    if text.trim().is_empty() {
        return Ok(Some(File::default()));
    }
    serde_saphyr::from_str::<Option<File>>(&text)
        .map(|file| Some(file.unwrap_or_default()))
        .map_err(|e| {
            // The parser draws the offending line under its message: keep the message.
            let message = e.to_string();
            unreadable(message.lines().next().unwrap_or_default().trim().to_owned())
        })
}

/// The current context's namespace in `paths`, merged as kubectl merges them.
fn namespace_in(paths: &[PathBuf]) -> Result<Option<String>, Unreadable> {
    let mut current: Option<String> = None;
    let mut namespaces: HashMap<String, Option<String>> = HashMap::new();
    for path in paths {
        let Some(file) = read(path)? else {
            continue;
        };
        if current.is_none() {
            current = file.current_context.filter(|name| !name.is_empty());
        }
        for named in file.contexts.unwrap_or_default() {
            namespaces
                .entry(named.name)
                .or_insert_with(|| named.context.and_then(|context| context.namespace));
        }
    }
    Ok(current
        .and_then(|name| namespaces.remove(&name).flatten())
        .filter(|namespace| !namespace.is_empty()))
}

/// The namespace of the current context, `None` when no file, no current context or no
/// namespace names one.
pub fn current_namespace() -> Result<Option<String>, Unreadable> {
    let kubeconfig = std::env::var("KUBECONFIG").ok();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    namespace_in(&files(kubeconfig.as_deref(), home.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "argo-results-kubeconfig-{name}-{}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).expect("scratch dir");
            Scratch(dir)
        }

        fn file(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).expect("write");
            path
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const TWO_CONTEXTS: &str = "apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: https://127.0.0.1:6443}
contexts:
- name: dev
  context:
    cluster: dev
    namespace: argo
- name: bare
  context:
    cluster: dev
current-context: dev
";

    #[test]
    fn the_current_contexts_namespace() {
        let scratch = Scratch::new("current");
        let path = scratch.file("config", TWO_CONTEXTS);
        assert_eq!(
            namespace_in(&[path]).expect("read"),
            Some("argo".to_owned())
        );
    }

    #[test]
    fn no_namespace_no_context_or_no_file_is_none() {
        let scratch = Scratch::new("none");
        let bare = scratch.file(
            "bare",
            &TWO_CONTEXTS.replace("current-context: dev", "current-context: bare"),
        );
        let dangling = scratch.file(
            "dangling",
            &TWO_CONTEXTS.replace("current-context: dev", "current-context: gone"),
        );
        let empty = scratch.file("empty", "\n");
        let missing = scratch.0.join("missing");
        for path in [bare, dangling, empty, missing] {
            assert_eq!(
                namespace_in(std::slice::from_ref(&path)).expect("read"),
                None,
                "{path:?}"
            );
        }
    }

    /// kubectl's merge: the first file to set current-context decides it, the first to
    /// define a context defines it, and a missing file is skipped.
    #[test]
    fn a_list_merges_first_wins() {
        let scratch = Scratch::new("merge");
        let first = scratch.file(
            "first",
            "contexts:\n- name: dev\n  context: {namespace: first-ns}\n",
        );
        let second = scratch.file("second", TWO_CONTEXTS);
        let missing = scratch.0.join("missing");
        assert_eq!(
            namespace_in(&[missing, first, second]).expect("read"),
            Some("first-ns".to_owned())
        );
    }

    #[test]
    fn a_malformed_file_is_named() {
        let scratch = Scratch::new("malformed");
        let good = scratch.file("good", TWO_CONTEXTS);
        let bad = scratch.file("bad", "contexts: [name: dev\n  - : :\n");
        let error = namespace_in(&[good.clone(), bad.clone()]).expect_err("malformed");
        assert_eq!(error.path, bad);
        assert!(!error.detail.is_empty());
        let wrong_type = scratch.file("wrong-type", "contexts: 7\n");
        let error = namespace_in(&[good, wrong_type.clone()]).expect_err("malformed");
        assert_eq!(error.path, wrong_type);
    }

    #[test]
    fn kubeconfig_is_a_list_and_home_the_fallback() {
        let home = Path::new("/home/someone");
        assert_eq!(files(None, Some(home)), [home.join(".kube").join("config")]);
        assert_eq!(files(Some(""), Some(home)), [home.join(".kube/config")]);
        assert_eq!(
            files(Some("/a::/b"), Some(home)),
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert!(files(None, None).is_empty());
    }
}
