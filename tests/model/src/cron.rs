//! Cron ticks: two claimants (controllers that both believe they lead, as after a
//! partition or a rolling update) run the due ticks of one schedule the safe way, claim,
//! create the workflow under the claimed name, settle, through the store's own claim and
//! settle rules (`argo_results_rules::claim`). Either may die at any point and come back
//! with no memory; leases expire as the clock moves; the API server refuses a second
//! workflow of one name (`AlreadyExists`).

use argo_results_proto::ClaimState;
use argo_results_rules::claim::{self, ClaimDecision, ClaimRow, SettleDecision};
use argo_results_rules::{NewClaim, Settled, Settlement};
use stateright::{Model, Property};

use crate::trace::Narrate;

/// The schedule's first tick, in Unix milliseconds; the others follow a minute apart.
const FIRST_TICK: i64 = 1_764_435_600_000;
const TICK_EVERY: i64 = 60_000;
/// Leases as `run_tick` asks for them by default.
const LEASE: i64 = 60_000;

#[derive(Debug, Clone)]
pub struct Config {
    pub ticks: u8,
    pub claimants: u8,
    /// Deaths across the claimants.
    pub deaths: u8,
    /// Claim and settle answers the network loses.
    pub losses: u8,
    /// Runs deleted after their creation (by a person, or their TTL once they ended): a
    /// tick's workflow created again after that is another run.
    pub deletions: u8,
    /// Times a claimant whose settle went unanswered runs the tick's step again before it
    /// settles again (`FinishTick` after a `TickError` of stage "settle"): with its run
    /// deleted meanwhile, it settles another run under the same claim.
    pub resubmits: u8,
}

impl Config {
    /// Two ticks, two claimants, one death.
    pub fn ci() -> Self {
        Config {
            ticks: 2,
            claimants: 2,
            deaths: 1,
            losses: 0,
            deletions: 0,
            resubmits: 0,
        }
    }

    /// One tick whose settle may go unanswered, whose run may be deleted, and whose
    /// claimant may run the step again before it settles again: a settle of another run.
    pub fn another_run() -> Self {
        Config {
            ticks: 1,
            losses: 1,
            deletions: 1,
            resubmits: 1,
            ..Config::ci()
        }
    }

    /// A lost answer too (`tests/model/deep.sh`).
    pub fn deep() -> Self {
        Config {
            losses: 1,
            ..Config::ci()
        }
    }

    /// The cron worlds `cargo test` checks (docs/protocol.md, "Bounds").
    pub fn ci_worlds() -> Vec<(&'static str, Config)> {
        vec![
            ("cron: two ticks, two claimants, one death", Config::ci()),
            (
                "cron: one tick, its run deleted, a settle unanswered and its step run again",
                Config::another_run(),
            ),
        ]
    }

    /// The cron worlds of `tests/model/deep.sh`.
    pub fn deep_worlds() -> Vec<(&'static str, Config)> {
        vec![(
            "cron (deep): two ticks, two claimants, one death, a lost answer",
            Config::deep(),
        )]
    }
}

/// Where the product's behaviour can be swapped for a broken one (`tests/controls.rs`).
#[derive(Clone, Copy)]
pub struct Hooks {
    /// The store's claim rule (the product: `claim::claim`).
    pub claim: fn(Option<&ClaimRow>, &NewClaim, &str, i64) -> ClaimDecision,
    /// The store's settle rule (the product: `claim::settle`).
    pub settle: fn(Option<ClaimRow>, &Settlement, i64) -> SettleDecision,
    /// A claimant told the tick is held comes back for it once the holder's lease ends.
    pub retry_held: bool,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("retry_held", &self.retry_held)
            .finish_non_exhaustive()
    }
}

impl Hooks {
    pub fn product() -> Self {
        Hooks {
            claim: claim::claim,
            settle: claim::settle,
            retry_held: true,
        }
    }
}

/// What one claimant is doing about one tick.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    /// Not started (or forgotten by a death).
    Idle,
    /// Refused: another claim holds it until `until` (the database's clock).
    Held { until: i64 },
    /// Holds the claim `claim_id`, lease until `until`.
    Holding { claim_id: String, until: i64 },
    /// Created the workflow (or found it), with this UID; settling next.
    Created {
        claim_id: String,
        until: i64,
        uid: String,
    },
    /// Settled, told so: the store records the run `uid` for the tick.
    Settled { uid: String },
    /// Told the tick was taken over or settled by another: nothing to do.
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct World {
    /// The database's clock.
    pub now: i64,
    /// `cron_claims`, by tick.
    pub claims: Vec<Option<ClaimRow>>,
    /// Workflows the API server held, by tick: the UIDs of each creation of the tick's
    /// name (more than one, but after a deletion, would be a second run).
    pub workflows: Vec<Vec<String>>,
    /// By tick: its newest run was deleted.
    pub deleted: Vec<bool>,
    /// Per claimant, per tick.
    pub work: Vec<Vec<Work>>,
    /// Per claimant, per tick: the claims it took, so that each gets a fresh `claimId`.
    pub taken: Vec<Vec<u8>>,
    pub deaths: u8,
    pub losses: u8,
    pub deletions: u8,
    pub resubmits: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// Claimant `c` claims tick `t` (`POST .../runs`); `lost`: the answer never arrives.
    Claim {
        c: usize,
        t: usize,
        lost: bool,
    },
    /// Claimant `c` creates tick `t`'s workflow under the claimed name.
    Create {
        c: usize,
        t: usize,
    },
    /// Claimant `c` settles tick `t` (`POST .../runs/settle`); `lost` as above.
    Settle {
        c: usize,
        t: usize,
        lost: bool,
    },
    Die(usize),
    /// Tick `t`'s run is deleted.
    DeleteRun(usize),
    /// Claimant `c`, its settle of tick `t` unanswered, runs the step again.
    Resubmit {
        c: usize,
        t: usize,
    },
    /// Time passes, a lease's length, while a tick is not due yet or a lease runs: every
    /// expiry can fall between any two steps, and a run ends once nothing waits for time.
    Tick,
}

#[derive(Debug, Clone)]
pub struct Cron {
    pub config: Config,
    pub hooks: Hooks,
}

pub const ONE_WORKFLOW_PER_TICK: &str = "one-workflow-per-tick";
pub const ONE_LIVE_HOLDER: &str = "one-live-holder-per-tick";
pub const SETTLED_NAMES_ITS_RUN: &str = "settled-names-its-run";
pub const EVERY_DUE_TICK_RUNS: &str = "every-due-tick-runs-once";

fn scheduled(t: usize) -> i64 {
    FIRST_TICK + TICK_EVERY * t as i64
}

fn workflow_name(t: usize) -> String {
    format!("nightly-{}", scheduled(t) / 1000)
}

fn new_claim(t: usize) -> NewClaim {
    NewClaim {
        namespace: "argo".into(),
        cron_workflow: "nightly".into(),
        cron_workflow_uid: "cron-uid".into(),
        scheduled_millis: scheduled(t),
        workflow_name: workflow_name(t),
        lease_millis: LEASE,
    }
}

impl Cron {
    pub fn new(config: Config, hooks: Hooks) -> Self {
        Cron { config, hooks }
    }

    fn due(&self, world: &World, t: usize) -> bool {
        scheduled(t) <= world.now
    }

    fn settle(&self, world: &mut World, c: usize, t: usize, lost: bool) -> bool {
        let Work::Created { claim_id, uid, .. } = world.work[c][t].clone() else {
            return false;
        };
        let settlement = Settlement {
            namespace: "argo".into(),
            cron_workflow: "nightly".into(),
            cron_workflow_uid: "cron-uid".into(),
            scheduled_millis: scheduled(t),
            claim_id,
            outcome: Settled::Submitted {
                workflow_uid: uid.clone(),
            },
        };
        let current = world.claims[t].clone();
        let told = match (self.hooks.settle)(current, &settlement, world.now) {
            SettleDecision::Update(row) => {
                world.claims[t] = Some(row);
                Work::Settled { uid }
            }
            SettleDecision::Unchanged(_) => Work::Settled { uid },
            // Taken over (the new holder creates the same name and settles), or settled
            // with another run.
            SettleDecision::Refuse(_) => Work::Done,
        };
        if !lost {
            world.work[c][t] = told;
        }
        true
    }
}

impl Model for Cron {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        let ticks = self.config.ticks as usize;
        vec![World {
            now: FIRST_TICK,
            claims: vec![None; ticks],
            workflows: vec![Vec::new(); ticks],
            deleted: vec![false; ticks],
            work: vec![vec![Work::Idle; ticks]; self.config.claimants as usize],
            taken: vec![vec![0; ticks]; self.config.claimants as usize],
            deaths: self.config.deaths,
            losses: self.config.losses,
            deletions: self.config.deletions,
            resubmits: self.config.resubmits,
        }]
    }

    fn actions(&self, world: &World, actions: &mut Vec<Action>) {
        for (c, ticks) in world.work.iter().enumerate() {
            for (t, work) in ticks.iter().enumerate() {
                let claimable = match work {
                    Work::Idle => self.due(world, t),
                    Work::Held { until } => self.hooks.retry_held && *until <= world.now,
                    _ => false,
                };
                if claimable {
                    actions.push(Action::Claim { c, t, lost: false });
                    if world.losses > 0 {
                        actions.push(Action::Claim { c, t, lost: true });
                    }
                }
                match work {
                    Work::Holding { .. } => actions.push(Action::Create { c, t }),
                    Work::Created { .. } => {
                        actions.push(Action::Settle { c, t, lost: false });
                        if world.losses > 0 {
                            actions.push(Action::Settle { c, t, lost: true });
                        }
                        if world.resubmits > 0 {
                            actions.push(Action::Resubmit { c, t });
                        }
                    }
                    _ => {}
                }
            }
            if world.deaths > 0 {
                actions.push(Action::Die(c));
            }
        }
        if world.deletions > 0 {
            for t in 0..world.workflows.len() {
                if !world.workflows[t].is_empty() && !world.deleted[t] {
                    actions.push(Action::DeleteRun(t));
                }
            }
        }
        let waiting =
            (0..world.claims.len()).any(|t| !self.due(world, t))
                || world.claims.iter().flatten().any(|row| {
                    row.state == ClaimState::Claimed && row.lease_expires_at > world.now
                });
        if waiting {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, world: &World, action: Action) -> Option<World> {
        let mut next = world.clone();
        match action {
            Action::Claim { c, t, lost } => {
                if lost {
                    next.losses -= 1;
                }
                let claim_id = format!("claim-{c}.{t}.{}", next.taken[c][t]);
                let current = next.claims[t].clone();
                match (self.hooks.claim)(current.as_ref(), &new_claim(t), &claim_id, next.now) {
                    ClaimDecision::Insert(row) | ClaimDecision::TakeOver(row) => {
                        next.taken[c][t] += 1;
                        let until = row.lease_expires_at;
                        next.claims[t] = Some(row);
                        // An answer lost leaves the claimant where it was: it claims again
                        // and hears `already_claimed`, by its own claim.
                        if !lost {
                            next.work[c][t] = Work::Holding { claim_id, until };
                        }
                    }
                    ClaimDecision::Refuse(_) => {
                        if !lost {
                            next.work[c][t] = match &next.claims[t] {
                                Some(row) if row.state == ClaimState::Claimed => Work::Held {
                                    until: row.lease_expires_at,
                                },
                                _ => Work::Done,
                            };
                        }
                    }
                }
            }
            Action::Create { c, t } => {
                let Work::Holding { claim_id, until } = next.work[c][t].clone() else {
                    return None;
                };
                // `AlreadyExists`: the workflow an earlier holder created counts, unless
                // it was deleted.
                if next.workflows[t].is_empty() || next.deleted[t] {
                    let uid = format!("wf-uid-{t}-{c}-{}", next.workflows[t].len());
                    next.workflows[t].push(uid);
                    next.deleted[t] = false;
                }
                let uid = next.workflows[t].last().expect("created").clone();
                next.work[c][t] = Work::Created {
                    claim_id,
                    until,
                    uid,
                };
            }
            Action::Settle { c, t, lost } => {
                if lost {
                    next.losses -= 1;
                }
                self.settle(&mut next, c, t, lost);
            }
            Action::Die(c) => {
                next.deaths -= 1;
                next.work[c].iter_mut().for_each(|w| *w = Work::Idle);
            }
            Action::DeleteRun(t) => {
                next.deletions -= 1;
                next.deleted[t] = true;
            }
            Action::Resubmit { c, t } => {
                let Work::Created {
                    claim_id, until, ..
                } = next.work[c][t].clone()
                else {
                    return None;
                };
                next.resubmits -= 1;
                next.work[c][t] = Work::Holding { claim_id, until };
            }
            Action::Tick => next.now += LEASE,
        }
        (next != *world).then_some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            // A tick's run deleted is created again by a claimant that did not settle yet:
            // that second run is the deletion's, not the claims'.
            Property::always(ONE_WORKFLOW_PER_TICK, |cron: &Cron, world: &World| {
                let deleted = cron.config.deletions - world.deletions;
                world
                    .workflows
                    .iter()
                    .all(|created| created.len() <= 1 + usize::from(deleted))
            }),
            Property::always(ONE_LIVE_HOLDER, |_: &Cron, world: &World| {
                (0..world.claims.len()).all(|t| {
                    let live = world
                        .work
                        .iter()
                        .filter(|ticks| match &ticks[t] {
                            Work::Holding { until, .. } | Work::Created { until, .. } => {
                                until > &world.now
                            }
                            _ => false,
                        })
                        .count();
                    live <= 1
                })
            }),
            // The run a settled tick records is one of its runs, and the one its claimant
            // was told it records.
            Property::always(SETTLED_NAMES_ITS_RUN, |_: &Cron, world: &World| {
                let recorded = |t: usize| {
                    world.claims[t]
                        .as_ref()
                        .filter(|row| row.state == ClaimState::Submitted)
                        .and_then(|row| row.workflow_uid.as_ref())
                };
                let named = (0..world.claims.len())
                    .all(|t| recorded(t).is_none_or(|uid| world.workflows[t].contains(uid)));
                let told = world.work.iter().all(|ticks| {
                    ticks.iter().enumerate().all(|(t, work)| match work {
                        Work::Settled { uid } => recorded(t) == Some(uid),
                        _ => true,
                    })
                });
                named && told
            }),
            Property::eventually(EVERY_DUE_TICK_RUNS, |_: &Cron, world: &World| {
                world
                    .claims
                    .iter()
                    .zip(&world.workflows)
                    .all(|(claim, created)| {
                        claim
                            .as_ref()
                            .is_some_and(|row| row.state == ClaimState::Submitted)
                            && !created.is_empty()
                    })
            }),
        ]
    }
}

impl Narrate for Cron {
    fn said(&self, world: &World, action: &Action) -> String {
        let lost = |lost: &bool| {
            if *lost {
                ", and the answer is lost"
            } else {
                ""
            }
        };
        match action {
            Action::Claim { c, t, lost: l } => format!(
                "claimant {c} claims tick {} at {}{}",
                workflow_name(*t),
                world.now,
                lost(l)
            ),
            Action::Create { c, t } => format!("claimant {c} creates {}", workflow_name(*t)),
            Action::Settle { c, t, lost: l } => {
                format!("claimant {c} settles {}{}", workflow_name(*t), lost(l))
            }
            Action::Die(c) => format!("claimant {c} dies and restarts with no memory"),
            Action::DeleteRun(t) => format!("{} is deleted", workflow_name(*t)),
            Action::Resubmit { c, t } => format!(
                "claimant {c}, its settle unanswered, runs the step of {} again",
                workflow_name(*t)
            ),
            Action::Tick => format!("the clock moves {} s", LEASE / 1000),
        }
    }

    fn held(&self, world: &World) -> Vec<String> {
        let claims: Vec<String> = world
            .claims
            .iter()
            .map(|claim| match claim {
                None => "-".into(),
                Some(row) => format!(
                    "{} by {} until {}",
                    row.state.as_str(),
                    row.claim_id,
                    row.lease_expires_at
                ),
            })
            .collect();
        vec![
            format!("store at {}: {}", world.now, claims.join("; ")),
            format!("workflows: {:?}", world.workflows),
            format!("claimants: {:?}", world.work),
        ]
    }
}
