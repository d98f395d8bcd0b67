//! The memory of answers, held against one budget (`--max-answer-memory`) until the last
//! byte is handed to the connection: an answer its client does not read stays in memory
//! after its handler returned and gave its slot back, so without it a hundred clients that
//! ask for 8 MiB pages and read nothing hold 800 MiB.
//!
//! A page (a list or the feed) holds each item as the store takes it, and ends where the
//! memory takes no more (its next page follows); every other answer is held once built.
//! An answer the memory cannot take is `429 overloaded`.
//!
//! The budget is shared as [`super::places`] shares waiting: an eighth is kept for callers
//! who may act as the controller, and a caller that holds more than one answer holds at
//! most an eighth (one answer it may always have, however large, if the budget takes
//! it), so a client that reads nothing of its answers loses its share, not everyone's.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use http_body_util::BodyExt;

use super::error::ApiError;

/// An answer is handed to the connection in pieces at most this large, so that the
/// connection takes more only as it sends: the rest stays with the answer, under its
/// budget.
const PIECE: usize = 64 << 10;

/// The memory of answers and who holds what of it.
#[derive(Debug)]
pub struct AnswerMemory {
    budget: usize,
    ledger: Mutex<Ledger>,
}

#[derive(Debug, Default)]
struct Ledger {
    total: usize,
    by_caller: HashMap<String, Mine>,
}

/// What one caller holds: its answers, and their bytes.
#[derive(Debug, Default, Clone, Copy)]
struct Mine {
    answers: usize,
    bytes: usize,
}

impl AnswerMemory {
    pub fn new(budget: usize) -> Self {
        AnswerMemory {
            budget,
            ledger: Mutex::default(),
        }
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An answer of `caller`'s (its [`crate::auth::Caller::holder`]), holding nothing
    /// yet; `controller` when the caller may act as the controller.
    pub fn open(self: &Arc<Self>, caller: &str, controller: bool) -> Holding {
        self.ledger()
            .by_caller
            .entry(caller.to_owned())
            .or_default()
            .answers += 1;
        Holding {
            memory: Arc::clone(self),
            caller: caller.to_owned(),
            controller,
            bytes: 0,
        }
    }
}

/// One answer's memory, given back when dropped.
#[derive(Debug)]
pub struct Holding {
    memory: Arc<AnswerMemory>,
    caller: String,
    controller: bool,
    bytes: usize,
}

impl Holding {
    /// Holds `more` bytes, or answers why not.
    pub fn grow(&mut self, more: usize) -> Result<(), ApiError> {
        let budget = self.memory.budget;
        let mut ledger = self.memory.ledger();
        let mine = ledger
            .by_caller
            .get(&self.caller)
            .copied()
            .unwrap_or_default();
        let open_to_all = budget - budget / 8;
        let total = ledger.total + more;
        if total > budget || (!self.controller && total > open_to_all) {
            return Err(ApiError::overloaded(
                "too many answers are being built or sent at once (--max-answer-memory)",
            ));
        }
        if !self.controller && mine.answers > 1 && mine.bytes + more > budget / 8 {
            return Err(ApiError::overloaded(&format!(
                "this caller holds {} bytes of {} answers not yet read, its share of \
                 --max-answer-memory",
                mine.bytes, mine.answers
            )));
        }
        ledger.total = total;
        if let Some(mine) = ledger.by_caller.get_mut(&self.caller) {
            mine.bytes += more;
        }
        self.bytes += more;
        Ok(())
    }

    /// Holds exactly `bytes`: what is no longer needed goes back at once.
    fn fit(&mut self, bytes: usize) -> Result<(), ApiError> {
        if bytes > self.bytes {
            return self.grow(bytes - self.bytes);
        }
        let less = self.bytes - bytes;
        let mut ledger = self.memory.ledger();
        ledger.total -= less;
        if let Some(mine) = ledger.by_caller.get_mut(&self.caller) {
            mine.bytes -= less;
        }
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        let mut ledger = self.memory.ledger();
        ledger.total -= self.bytes;
        if let Some(mine) = ledger.by_caller.get_mut(&self.caller) {
            mine.answers -= 1;
            mine.bytes -= self.bytes;
            if mine.answers == 0 {
                ledger.by_caller.remove(&self.caller);
            }
        }
    }
}

/// `answer` with its body held by `memory` until it is sent; `429` when the memory cannot
/// take it. `controls` tells whether the caller may act as the controller, asked only
/// when the memory open to every caller, or the caller's share of it, is taken.
pub async fn hold(
    answer: Response,
    mut memory: Holding,
    controls: impl AsyncFnOnce() -> bool,
) -> Response {
    let (mut parts, mut body) = answer.into_parts();
    // The answer's own pieces, as they are: a page is its items, never copied into one.
    let mut pieces = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return super::error::ApiError::new(
                argo_results_proto::ProblemCode::Internal,
                "the answer could not be read",
            )
            .into_response();
        };
        if let Ok(data) = frame.into_data() {
            pieces.push(data);
        }
    }
    let bytes: usize = pieces.iter().map(Bytes::len).sum();
    if let Err(refused) = memory.fit(bytes) {
        if memory.controller || !controls().await {
            return refused.into_response();
        }
        memory.controller = true;
        if let Err(refused) = memory.fit(bytes) {
            return refused.into_response();
        }
    }
    // Sent in pieces, with the length a client reads first, as one body would be.
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes));
    Response::from_parts(parts, sent_in_pieces(pieces, memory))
}

/// A body that yields `pieces`, split to at most [`PIECE`] each, and holds `memory` until
/// it is done (or its connection is gone).
fn sent_in_pieces(pieces: Vec<Bytes>, memory: Holding) -> Body {
    let mut split = Vec::with_capacity(pieces.len());
    for mut piece in pieces {
        while piece.len() > PIECE {
            split.push(piece.split_to(PIECE));
        }
        split.push(piece);
    }
    let stream = futures_util::stream::iter(split).map(move |piece| {
        let _held = &memory;
        Ok::<_, Infallible>(piece)
    });
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn detail(refused: ApiError) -> String {
        format!("{refused:?}")
    }

    #[test]
    fn a_caller_holds_one_answer_then_its_share_and_the_controller_keeps_its_eighth() {
        let memory = Arc::new(AnswerMemory::new(64 * MIB));
        // One answer of a pod's may be larger than its share of 8 MiB.
        let mut first = memory.open("pod-a", false);
        first.grow(12 * MIB).expect("one answer, however large");
        // A second one fits only within the share, which the first already took.
        let mut second = memory.open("pod-a", false);
        let refused = second.grow(1).expect_err("past its share");
        assert!(detail(refused).contains("its share of --max-answer-memory"));
        drop(first);
        second.grow(8 * MIB).expect("the share is free again");
        drop(second);
        // Others fill what is open to every caller: 56 MiB of 64.
        let others: Vec<Holding> = (0..7)
            .map(|i| {
                let mut answer = memory.open(&format!("pod-{i}"), false);
                answer.grow(8 * MIB).expect("open to all");
                answer
            })
            .collect();
        let refused = memory.open("reader", false).grow(1).expect_err("full");
        assert!(detail(refused).contains("too many answers"));
        // The controller's eighth, and no more.
        let mut controller = memory.open("controller", true);
        controller.grow(8 * MIB).expect("its reserve");
        memory
            .open("controller", true)
            .grow(1)
            .expect_err("the budget");
        // What an answer does not need goes back.
        controller.fit(MIB).expect("smaller");
        memory
            .open("controller", true)
            .grow(7 * MIB)
            .expect("given back");
        drop((others, controller));
        let ledger = memory.ledger();
        assert_eq!(ledger.total, 0);
        assert!(ledger.by_caller.is_empty(), "{:?}", ledger.by_caller);
    }
}
