//! Running the checker over a world and saying what it found, one line per property or
//! control, with a readable trace for every counterexample.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::{Duration, Instant};

use stateright::{Checker, HasDiscoveries, Model, Path};

use crate::trace::{Narrate, render};

/// The steps to a state where a property fails.
pub type Counterexample<M> = Path<<M as Model>::State, <M as Model>::Action>;

/// What one check of a world found.
struct Checked<M: Model> {
    /// Distinct states explored.
    states: usize,
    elapsed: Duration,
    /// The counterexample of each property that does not hold (an example, for none: the
    /// worlds have no `sometimes` property).
    failures: Vec<(&'static str, Counterexample<M>)>,
    /// Every property, in the model's order.
    properties: Vec<&'static str>,
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Explores every state of `model` reachable within its budgets, depth first: only the
/// path being explored is held, not a whole frontier.
fn explore<M>(model: M) -> Checked<M>
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync,
    M::Action: Clone + Debug + PartialEq,
{
    run(model, HasDiscoveries::All, false)
}

fn run<M>(model: M, finish: HasDiscoveries, shortest: bool) -> Checked<M>
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync,
    M::Action: Clone + Debug + PartialEq,
{
    let properties = model.properties().iter().map(|p| p.name).collect();
    let started = Instant::now();
    let builder = model.checker().threads(threads()).finish_when(finish);
    let (states, mut failures): (usize, Vec<_>) = if shortest {
        let checker = builder.spawn_bfs().join();
        let found = checker.discoveries().into_iter().collect();
        (checker.unique_state_count(), found)
    } else {
        let checker = builder.spawn_dfs().join();
        let found = checker.discoveries().into_iter().collect();
        (checker.unique_state_count(), found)
    };
    failures.sort_by_key(|(name, _)| *name);
    Checked {
        states,
        elapsed: started.elapsed(),
        failures,
        properties,
    }
}

/// Checks `model` and prints `property <name>: ok, <N> states` for each property that
/// holds, and the trace of each that does not; returns the names of those that do not.
pub fn report<M>(title: &str, model: M) -> Vec<&'static str>
where
    M: Model + Narrate + Clone + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync,
    M::Action: Clone + Debug + PartialEq,
{
    let checked = explore(model.clone());
    println!(
        "{title}: {} states in {:.1} s",
        checked.states,
        checked.elapsed.as_secs_f64()
    );
    for name in &checked.properties {
        match checked.failures.iter().find(|(failed, _)| failed == name) {
            None => println!("property {name}: ok, {} states", checked.states),
            Some((_, path)) => {
                println!("property {name}: FAILED, counterexample:");
                println!("{}", render(&model, path));
            }
        }
    }
    checked.failures.iter().map(|(name, _)| *name).collect()
}

/// Checks a deliberately broken `model` until `property` fails, prints
/// `control <name>: caught <property>, counterexample of <K> steps` and returns the
/// counterexample, or `None` when the property held everywhere.
pub fn control<M>(name: &str, model: M, property: &'static str) -> Option<Counterexample<M>>
where
    M: Model + Narrate + Clone + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync,
    M::Action: Clone + Debug + PartialEq,
{
    // Breadth first: the shortest counterexample.
    let checked = run(
        model,
        HasDiscoveries::AnyOf(BTreeSet::from([property])),
        true,
    );
    let (_, path) = checked
        .failures
        .into_iter()
        .find(|(failed, _)| *failed == property)?;
    println!(
        "control {name}: caught {property}, counterexample of {} steps",
        path.clone().into_actions().len()
    );
    Some(path)
}
