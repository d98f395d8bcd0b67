//! Counterexamples as people read them: numbered steps, each saying who did what and what
//! every side held afterwards.

use stateright::{Model, Path};

/// How a world tells its steps.
pub trait Narrate: Model {
    /// Who did what, in a few words.
    fn said(&self, state: &Self::State, action: &Self::Action) -> String;
    /// What each side holds, one line each.
    fn held(&self, state: &Self::State) -> Vec<String>;
    /// The trace's last state as rows of the shared decision table
    /// ([`DECISIONS_FILE`]): what the product's `decide` says of each node the trace left
    /// undecided, so that Rust and Go replay it as a regression test.
    fn rows(&self, _state: &Self::State) -> Vec<serde_json::Value> {
        Vec::new()
    }
}

/// The decision table Rust's `controller::tests` and Go's `TestReconcilerDecisions` run.
pub const DECISIONS_FILE: &str = "executor-client/testdata/reconciler-decisions.json";

/// The counterexample `path` as numbered steps.
pub fn render<M>(model: &M, path: &Path<M::State, M::Action>) -> String
where
    M: Narrate,
    M::State: Clone,
    M::Action: Clone,
{
    let steps = path.clone().into_vec();
    let mut text = String::new();
    let push_held = |text: &mut String, state: &M::State| {
        for line in model.held(state) {
            text.push_str("       ");
            text.push_str(&line);
            text.push('\n');
        }
    };
    if let Some((first, _)) = steps.first() {
        text.push_str("   0. start\n");
        push_held(&mut text, first);
    }
    for (i, pair) in steps.windows(2).enumerate() {
        let (before, action) = &pair[0];
        let (after, _) = &pair[1];
        if let Some(action) = action {
            text.push_str(&format!("{:>4}. {}\n", i + 1, model.said(before, action)));
        }
        push_held(&mut text, after);
    }
    if let Some((last, _)) = steps.last() {
        let rows = model.rows(last);
        if !rows.is_empty() {
            text.push_str(&format!("   as rows of {DECISIONS_FILE}:\n"));
        }
        for row in rows {
            text.push_str(&format!("     {row}\n"));
        }
    }
    text
}
