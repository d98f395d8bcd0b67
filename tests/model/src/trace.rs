//! Counterexamples as people read them: numbered steps, each saying who did what and what
//! every side held afterwards.

use stateright::{Model, Path};

/// How a world tells its steps.
pub trait Narrate: Model {
    /// Who did what, in a few words.
    fn said(&self, state: &Self::State, action: &Self::Action) -> String;
    /// What each side holds, one line each.
    fn held(&self, state: &Self::State) -> Vec<String>;
}

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
    text
}
