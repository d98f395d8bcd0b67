//! The contract suite: every rule of docs/api.md, against the real server binary. A case
//! whose outcome the store decides runs on Postgres and on SQLite
//! (`<module>::postgres::<case>` and `<module>::sqlite::<case>`). The others are plain
//! tests (`<module>::<case>`) on one store: Postgres for replicas and its own faults,
//! SQLite (the embedded default) for the rest, among them every case answered before any
//! store access (tokens, roles, refused input).

/// Runs each listed `async fn case(Backend)` of the enclosing module on both backends.
macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(argo_results_tests::Backend::Postgres).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(argo_results_tests::Backend::Sqlite).await
                }
            )*
        }
    };
}

mod auth;
mod bad_input;
mod binding;
mod cli;
mod cluster;
mod concurrency;
mod controller;
mod cron;
mod cron_cli;
mod embedded;
mod epoch;
mod faults;
mod feed;
mod group_commit;
mod hostile;
mod lifecycle;
mod merge;
mod names;
mod openapi;
mod outage;
mod postgres_tls;
mod reads;
mod reconciler;
mod replicas;
mod report;
mod restore;
mod retention;
mod security;
mod seed_fault;
mod startup;
