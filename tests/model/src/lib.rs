//! The argo-results protocol, model-checked (docs/protocol.md).
//!
//! Two worlds, each explored by stateright in every order its actors can act: [`results`]
//! (pods reporting, the server committing or crashing or being restored, the controller
//! following, crashing and deciding) and [`cron`] (two claimants of a schedule's ticks,
//! dying, their leases expiring, taking over). Neither holds a copy of a rule: the store's
//! decisions are `argo_results_rules`, the controller's are `decide` and `Known` of the
//! reference reconciler, as the server and the client run them.

pub mod check;
pub mod cron;
pub mod results;
pub mod trace;
