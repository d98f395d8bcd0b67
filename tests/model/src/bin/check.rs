//! Checks the protocol's worlds: `cargo run --release -p argo-results-model --bin check --
//! [ci | deep | one NAME=VALUE...]`. `ci` are the worlds `cargo test` checks, `deep` the
//! larger ones of `tests/model/deep.sh`; `one` checks a single world, the container
//! node's with every fault unless told otherwise (`results.templates=rc`,
//! `results.attempts=3`, `cron.deaths=2`, `find=PROPERTY` for its shortest
//! counterexample, `only=cron`).

use argo_results_model::check::{control, report};
use argo_results_model::trace::render;
use argo_results_model::{cron, results};

/// The checker clones a world for every step: an allocator made for that halves its time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let size = args.next().unwrap_or_else(|| "ci".into());
    let (worlds, cron_worlds) = match size.as_str() {
        "ci" => (results::Config::ci(), cron::Config::ci_worlds()),
        "deep" => (results::Config::deep(), cron::Config::deep_worlds()),
        "one" => one(args.collect()),
        other => panic!("unknown size {other:?}: ci, deep or one"),
    };
    let mut failed = Vec::new();
    for (title, config) in worlds {
        failed.extend(report(
            title,
            results::Results::new(config, results::Hooks::product()),
        ));
    }
    for (title, config) in cron_worlds {
        failed.extend(report(
            title,
            cron::Cron::new(config, cron::Hooks::product()),
        ));
    }
    if !failed.is_empty() {
        std::process::exit(1);
    }
}

/// One world, from `NAME=VALUE` settings.
type Worlds = (
    Vec<(&'static str, results::Config)>,
    Vec<(&'static str, cron::Config)>,
);

fn one(settings: Vec<String>) -> Worlds {
    let mut config = results::Config::every_fault(results::Template::Container);
    let mut cron_config = cron::Config::ci();
    let mut only = None;
    for setting in settings {
        let (name, value) = setting.split_once('=').expect("NAME=VALUE");
        let number = || value.parse::<u8>().expect("a number");
        match name {
            "only" => only = Some(value.to_owned()),
            "find" => {
                let property: &'static str = value.to_owned().leak();
                let model = results::Results::new(config, results::Hooks::product());
                match control("product", model.clone(), property) {
                    Some(path) => println!("{}", render(&model, &path)),
                    None => println!("{property} holds"),
                }
                std::process::exit(0);
            }
            // One letter per node: c (container template), r (resource template), m (main
            // finalizes: a resource template without outputs, or a data template).
            "results.templates" => {
                config.templates = value
                    .chars()
                    .map(|c| match c {
                        'c' => results::Template::Container,
                        'r' => results::Template::Resource,
                        'm' => results::Template::MainFinalizes,
                        other => panic!("unknown template {other:?}: c, r or m"),
                    })
                    .collect();
            }
            "results.in_sequence" => config.in_sequence = number() != 0,
            "results.attempts" => config.attempts = number(),
            "results.batch_max" => config.batch_max = number().into(),
            "results.feed_limit" => config.feed_limit = number().into(),
            "results.pod_faults" => config.pod_faults = number(),
            "results.pod_gc" => config.pod_gc = number() != 0,
            "results.server_crashes" => config.server_crashes = number(),
            "results.controller_crashes" => config.controller_crashes = number(),
            "results.outages" => config.outages = number(),
            "results.crash_before_persist" => config.crash_before_persist = number() != 0,
            "results.pods_created_again" => config.pods_created_again = number() != 0,
            "results.duplicates" => config.duplicates = number(),
            "results.restores" => config.restores = number(),
            "results.prunes" => config.prunes = number(),
            "results.hostile" => config.hostile = number() != 0,
            "results.impostor" => config.impostor = number() != 0,
            "results.drop_dead_requests" => config.drop_dead_requests = number() != 0,
            "results.second_progress" => config.second_progress = number() != 0,
            "results.sequence_repeats" => config.sequence_repeats = number(),
            "results.other_finals" => config.other_finals = number(),
            "results.watcher" => config.watcher = number() != 0,
            "cron.ticks" => cron_config.ticks = number(),
            "cron.claimants" => cron_config.claimants = number(),
            "cron.deaths" => cron_config.deaths = number(),
            "cron.losses" => cron_config.losses = number(),
            "cron.deletions" => cron_config.deletions = number(),
            "cron.resubmits" => cron_config.resubmits = number(),
            other => panic!("unknown setting {other:?}"),
        }
    }
    match only.as_deref() {
        Some("cron") => {
            let model = cron::Cron::new(cron_config, cron::Hooks::product());
            let failed = report("cron", model);
            std::process::exit(i32::from(!failed.is_empty()));
        }
        _ => (vec![("results", config)], Vec::new()),
    }
}
