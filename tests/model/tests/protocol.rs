//! The protocol holds in every world `cargo test` checks: one line per property with the
//! states explored, and the counterexample of any that fails.

use argo_results_model::check::report;
use argo_results_model::{cron, results};

/// Every world is checked before any failure is reported: one that fails must not hide
/// what the others say.
#[test]
fn the_results_protocol_holds_in_every_world() {
    let failed: Vec<String> = results::Config::ci()
        .into_iter()
        .flat_map(|(title, config)| {
            report(
                title,
                results::Results::new(config, results::Hooks::product()),
            )
            .into_iter()
            .map(move |property| format!("{title}: {property}"))
        })
        .collect();
    assert!(failed.is_empty(), "{failed:?} do not hold");
}

#[test]
fn cron_ticks_run_once_each() {
    let failed: Vec<String> = cron::Config::ci_worlds()
        .into_iter()
        .flat_map(|(title, config)| {
            report(title, cron::Cron::new(config, cron::Hooks::product()))
                .into_iter()
                .map(move |property| format!("{title}: {property}"))
        })
        .collect();
    assert!(failed.is_empty(), "{failed:?} do not hold");
}
