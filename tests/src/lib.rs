//! End-to-end tests of argo-results: the real server binary, over real HTTP, against a real
//! Postgres and a real SQLite file, and a real Kubernetes API server and etcd
//! ([`cluster`]).
//!
//! The binaries are those that `cargo test --workspace` builds beside the test executables.
//! Postgres is `postgres://postgres@127.0.0.1:5432/test` unless `ARGO_RESULTS_TEST_POSTGRES`
//! names another; each server gets a schema of its own.

pub mod cluster;
pub mod eventually;
pub mod fake_kube;
pub mod fixtures;
pub mod private_postgres;
pub mod server;
pub mod tls;
pub mod tokens;

pub use eventually::eventually;
pub use server::{Auth, Backend, TestServer};
