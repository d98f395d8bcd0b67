//! End-to-end tests of argo-results: the real server binary, real Postgres and SQLite.
