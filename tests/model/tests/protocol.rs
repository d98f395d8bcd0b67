//! The protocol holds in every world `cargo test` checks: one line per property with the
//! states explored, and the counterexample of any that fails.

use argo_results_model::check::report;
use argo_results_model::{cron, results};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[test]
fn the_results_protocol_holds_in_every_world() {
    for (title, config) in results::Config::ci() {
        let failed = report(
            title,
            results::Results::new(config, results::Hooks::product()),
        );
        assert!(failed.is_empty(), "{title}: {failed:?} do not hold");
    }
}

#[test]
fn cron_ticks_run_once_each() {
    let failed = report(
        "cron: two ticks, two claimants, one death",
        cron::Cron::new(cron::Config::ci(), cron::Hooks::product()),
    );
    assert!(failed.is_empty(), "cron: {failed:?} do not hold");
}
