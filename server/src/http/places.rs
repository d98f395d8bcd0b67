//! Places for requests that wait on something other than the server's threads, holding no
//! slot in flight while they do: a watch for a change (`--max-watches`), a write for the
//! writer's transaction (as many as `--max-in-flight`). Without a slot, such requests are
//! held to places of their own, so that one caller cannot make them without end: at most
//! `cap` at once, an eighth of them kept for callers who may act as the controller, so that
//! readers and pods cannot take the controller's, and at most an eighth held by one caller
//! that may not, so that one cannot take the others'. A pod is one caller: its UID, not its
//! service account, which every pod of a namespace shares.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::admission::Slot;
use super::error::ApiError;
use super::state::AppState;
use crate::auth::{Caller, Verb};

/// What waits, for the refusals' words.
#[derive(Debug, Clone, Copy)]
pub enum Waiting {
    /// A feed request waiting for a change (`--max-watches`).
    Watches,
    /// A write waiting for the writer (`--max-in-flight`).
    Writes,
}

impl Waiting {
    fn noun(self) -> &'static str {
        match self {
            Waiting::Watches => "watches",
            Waiting::Writes => "writes",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Waiting::Watches => "--max-watches",
            Waiting::Writes => "--max-in-flight",
        }
    }
}

#[derive(Debug)]
pub struct Places {
    cap: usize,
    waiting: Waiting,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    open: usize,
    by_caller: HashMap<String, usize>,
}

impl Places {
    pub fn new(cap: usize, waiting: Waiting) -> Self {
        Places {
            cap,
            waiting,
            held: Mutex::default(),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for `caller`, held until dropped; `controller` when the caller may act as
    /// the controller.
    pub fn take(self: &Arc<Self>, caller: &str, controller: bool) -> Result<Place, ApiError> {
        let mut held = self.held();
        let share = (self.cap / 8).max(1);
        let open_to_all = self.cap - self.cap / 8;
        let mine = held.by_caller.get(caller).copied().unwrap_or(0);
        let (noun, flag) = (self.waiting.noun(), self.waiting.flag());
        if held.open >= self.cap || (!controller && held.open >= open_to_all) {
            return Err(ApiError::overloaded(&format!(
                "too many {noun} are waiting ({flag})"
            )));
        }
        if !controller && mine >= share {
            return Err(ApiError::overloaded(&format!(
                "this caller has {mine} {noun} waiting, its share of {flag}"
            )));
        }
        held.open += 1;
        *held.by_caller.entry(caller.to_owned()).or_default() += 1;
        Ok(Place {
            places: Arc::clone(self),
            caller: caller.to_owned(),
        })
    }
}

/// A place, given back when dropped.
#[derive(Debug)]
pub struct Place {
    places: Arc<Places>,
    caller: String,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut held = self.places.held();
        held.open -= 1;
        if let Some(mine) = held.by_caller.get_mut(&self.caller) {
            *mine -= 1;
            if *mine == 0 {
                held.by_caller.remove(&self.caller);
            }
        }
    }
}

/// A place among `places` for `caller`. Whether the caller may act as the controller in
/// `namespace` (which `--rbac` asks the API server) is asked only when the places open to
/// everyone, or the caller's share of them, are taken.
pub async fn take(
    places: &Arc<Places>,
    state: &AppState,
    caller: &Caller,
    namespace: Option<&str>,
) -> Result<Place, ApiError> {
    let who = caller.holder();
    let refused = match places.take(who, false) {
        Ok(place) => return Ok(place),
        Err(refused) => refused,
    };
    match state.auth.authorize(caller, Verb::Create, namespace).await {
        Ok(()) => places.take(who, true),
        Err(_) => Err(refused),
    }
}

/// A write about to wait for the writer's transaction takes a place among the waiting
/// writes and gives its slot back: a write waits on the database's locks and on the writes
/// ahead of it, not on the server's threads, and a writer held up (a long transaction, a
/// failover) must not leave every slot to writes that wait.
pub async fn wait_for_writer(
    state: &AppState,
    caller: &Caller,
    slot: &Slot,
    namespace: &str,
) -> Result<Place, ApiError> {
    let place = take(state.admission.writes(), state, caller, Some(namespace)).await?;
    slot.release();
    Ok(place)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_holds_its_share_and_the_controller_keeps_its_eighth() {
        let places = Arc::new(Places::new(16, Waiting::Writes));
        let pod: Vec<Place> = (0..2)
            .map(|_| places.take("pod-a", false).expect("its share"))
            .collect();
        let refused = places.take("pod-a", false).expect_err("past its share");
        assert!(format!("{refused:?}").contains("its share of --max-in-flight"));
        let others: Vec<Place> = (0..12)
            .map(|i| {
                places
                    .take(&format!("pod-{i}"), false)
                    .expect("open to all")
            })
            .collect();
        // 14 of 16 taken: the last two are the controller's.
        let refused = places
            .take("pod-z", false)
            .expect_err("the controller's eighth");
        assert!(format!("{refused:?}").contains("too many writes are waiting"));
        let controller: Vec<Place> = (0..2)
            .map(|_| places.take("controller", true).expect("its reserve"))
            .collect();
        places.take("controller", true).expect_err("the cap");
        drop((pod, others, controller));
        assert_eq!(places.held().open, 0);
        assert!(places.held().by_caller.is_empty());
    }
}
