//! Admission of API requests, in an order that keeps a slow or hostile client from holding
//! what others need:
//!
//! 1. the caller is authenticated, so a stranger's body is never read;
//! 2. its body is received whole ([`receive`]): within `--body-timeout` (else
//!    `408`), `--max-body-bytes` (`413`) and the memory all bodies being received share,
//!    `--max-body-memory` (`429`);
//! 3. only then does it take one of the `--max-in-flight` slots, or is answered at once
//!    with `429 overloaded` and `Retry-After` rather than queue behind the database. Every
//!    answer holds what it is against `--max-answer-memory` until it is sent, and a page
//!    reserves its most before the store is read ([`super::answer_memory`]). It
//!    holds the slot while it is served, never while it waits on its client. A watch
//!    gives its slot back while it waits for a change, under a cap of its own
//!    (`--max-watches`), of which one subject holds at most an eighth, and an eighth is
//!    kept for callers who may act as the controller ([`Watches`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argo_results_proto::ProblemCode;
use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::answer_memory;
use super::error::ApiError;
use super::state::AppState;

/// What admission holds requests to (`--max-in-flight`, `--max-watches`,
/// `--max-body-memory`, `--max-answer-memory`, `--body-timeout`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_in_flight: usize,
    pub max_watches: usize,
    pub max_body_memory: usize,
    pub max_answer_memory: usize,
    pub body_timeout: Duration,
}

/// The shared bounds of admission.
#[derive(Debug)]
pub struct Admission {
    in_flight: Arc<Semaphore>,
    watches: Arc<Watches>,
    /// Bytes of bodies held in memory, one permit a byte.
    body_memory: Arc<Semaphore>,
    /// Bytes of answers being built or sent, one permit a byte.
    answer_memory: Arc<Semaphore>,
    body_timeout: Duration,
}

impl Admission {
    pub fn new(limits: Limits) -> Self {
        Admission {
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
            watches: Arc::new(Watches {
                cap: limits.max_watches,
                held: Mutex::default(),
            }),
            body_memory: Arc::new(Semaphore::new(
                limits.max_body_memory.min(Semaphore::MAX_PERMITS),
            )),
            answer_memory: Arc::new(Semaphore::new(
                limits.max_answer_memory.min(Semaphore::MAX_PERMITS),
            )),
            body_timeout: limits.body_timeout,
        }
    }

    /// A place among the watches waiting for a change for `subject`, held until dropped;
    /// `controller` when the caller may act as the controller.
    pub fn watch(&self, subject: &str, controller: bool) -> Result<WatchPlace, ApiError> {
        let watches = &self.watches;
        let mut held = watches.held();
        let share = (watches.cap / 8).max(1);
        let open_to_all = watches.cap - watches.cap / 8;
        let mine = held.by_subject.get(subject).copied().unwrap_or(0);
        if held.open >= watches.cap || (!controller && held.open >= open_to_all) {
            return Err(ApiError::overloaded(
                "too many watches are waiting (--max-watches)",
            ));
        }
        if !controller && mine >= share {
            return Err(ApiError::overloaded(&format!(
                "this subject has {mine} watches waiting, its share of --max-watches"
            )));
        }
        held.open += 1;
        *held.by_subject.entry(subject.to_owned()).or_default() += 1;
        Ok(WatchPlace {
            watches: Arc::clone(watches),
            subject: subject.to_owned(),
        })
    }
}

/// Watches waiting for a change: at most `cap`; an eighth of them kept for callers who may
/// act as the controller, so that readers cannot take the controller's; and at most an
/// eighth held by one subject that may not, so that one reader cannot take the others'.
#[derive(Debug)]
struct Watches {
    cap: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    open: usize,
    by_subject: HashMap<String, usize>,
}

impl Watches {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A watch's place, given back when dropped.
#[derive(Debug)]
pub struct WatchPlace {
    watches: Arc<Watches>,
    subject: String,
}

impl Drop for WatchPlace {
    fn drop(&mut self) {
        let mut held = self.watches.held();
        held.open -= 1;
        if let Some(mine) = held.by_subject.get_mut(&self.subject) {
            *mine -= 1;
            if *mine == 0 {
                held.by_subject.remove(&self.subject);
            }
        }
    }
}

/// A request's slot among those in flight, and what its answer reserved.
#[derive(Debug, Clone)]
pub struct Slot {
    held: Arc<Mutex<Kept>>,
    slots: Arc<Semaphore>,
    answers: Arc<Semaphore>,
}

#[derive(Debug, Default)]
struct Kept {
    /// Held, not read: dropping it gives the slot back.
    _slot: Option<OwnedSemaphorePermit>,
    answer: Option<OwnedSemaphorePermit>,
    /// The answer is a page, which reserves its most while it is built.
    page: bool,
}

impl Slot {
    fn held(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves, before the store is read, what a page can be; `429` when the budget
    /// cannot take it.
    pub fn reserve_page(&self) -> Result<(), ApiError> {
        let mut held = self.held();
        if held.answer.is_none() {
            held.answer = Some(answer_memory::reserve(
                &self.answers,
                answer_memory::PAGE_BYTES,
            )?);
        }
        held.page = true;
        Ok(())
    }

    /// Gives the slot and the answer's reservation back while the request waits on
    /// neither the database nor its client.
    pub fn release(&self) {
        let mut held = self.held();
        held._slot = None;
        held.answer = None;
    }

    /// Takes a slot and the answer's reservation again; `false` when either is not free.
    pub fn retake(&self) -> bool {
        let mut held = self.held();
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            return false;
        };
        if held.page {
            match answer_memory::reserve(&self.answers, answer_memory::PAGE_BYTES) {
                Ok(answer) => held.answer = Some(answer),
                Err(_) => return false,
            }
        }
        held._slot = Some(slot);
        true
    }

    /// What the answer reserved, for the answer to keep.
    fn answer(&self) -> Option<OwnedSemaphorePermit> {
        self.held().answer.take()
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ProblemCode::PayloadTooLarge,
        format!("the body is larger than {limit} bytes (--max-body-bytes)"),
    )
}

/// Receives a request's whole body, so that no one waits on a slow client while holding
/// a slot. Each byte held takes a permit of the bodies' shared memory budget, returned
/// when the request is answered (the permits come back with the body).
pub async fn receive(
    headers: &HeaderMap,
    body: Body,
    state: &AppState,
) -> Result<(Body, Option<OwnedSemaphorePermit>), ApiError> {
    if body.size_hint().exact() == Some(0) {
        return Ok((body, None));
    }
    if let Some(encoding) = headers.get(header::CONTENT_ENCODING) {
        let encoding = encoding.to_str().unwrap_or("?").trim();
        if !encoding.eq_ignore_ascii_case("identity") {
            return Err(ApiError::new(
                ProblemCode::UnsupportedMediaType,
                format!("the body must be sent as it is, not with Content-Encoding {encoding:?}"),
            ));
        }
    }
    let limit = state.limits.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limit) {
        return Err(too_large(limit));
    }
    let admission = &state.admission;
    let collected = collect(body, declared.unwrap_or(0), limit, &admission.body_memory);
    tokio::time::timeout(admission.body_timeout, collected)
        .await
        .unwrap_or_else(|_| {
            Err(ApiError::new(
                ProblemCode::RequestTimeout,
                format!(
                    "the body did not arrive within {:?} (--body-timeout)",
                    admission.body_timeout
                ),
            ))
        })
}

/// The body, copied out of each piece as it arrives into one buffer whose whole capacity
/// takes permits of the bodies' memory: a piece as received pins the read buffer it was
/// cut from (hyper's, 128 KiB), so a body sent a byte per `send()`, per chunk or per
/// HTTP/2 DATA frame held hundreds of times its size while only its bytes were counted.
/// The copy costs a memcpy of at most `--max-body-bytes`. `declared` is the
/// Content-Length (0 when absent), already within `limit`.
async fn collect(
    mut body: Body,
    declared: usize,
    limit: usize,
    memory: &Arc<Semaphore>,
) -> Result<(Body, Option<OwnedSemaphorePermit>), ApiError> {
    let mut held: Option<OwnedSemaphorePermit> = None;
    let mut take = |bytes: usize| -> Result<(), ApiError> {
        let more = u32::try_from(bytes)
            .ok()
            .and_then(|n| Arc::clone(memory).try_acquire_many_owned(n).ok())
            .ok_or_else(|| {
                ApiError::overloaded("request bodies fill their memory (--max-body-memory)")
            })?;
        match &mut held {
            Some(held) => held.merge(more),
            None => held = Some(more),
        }
        Ok(())
    };
    take(declared)?;
    let mut received: Vec<u8> = Vec::with_capacity(declared);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            ApiError::new(
                ProblemCode::InvalidJson,
                format!("the body could not be read: {e}"),
            )
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let length = received.len() + data.len();
        if length > limit {
            return Err(too_large(limit));
        }
        let capacity = received.capacity();
        if length > capacity {
            // Doubling, as a Vec grows, but within the limit and counted first.
            let grown = length.max(capacity * 2).min(limit);
            take(grown - capacity)?;
            received.reserve_exact(grown - received.len());
        }
        received.extend_from_slice(&data);
    }
    Ok((Body::from(received), held))
}

pub async fn admit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match state.counted(state.auth.authenticate(&parts.headers).await) {
        Ok(caller) => {
            // Who made the request, in its log line (the span is the request's).
            tracing::Span::current().record("subject", caller.subject.as_str());
            parts.extensions.insert(caller)
        }
        Err(error) => return ApiError::from(error).into_response(),
    };
    // Held until the request is answered: the body stays in memory that long.
    let (body, _body_memory) = match receive(&parts.headers, body, &state).await {
        Ok(received) => received,
        Err(error) => return error.into_response(),
    };
    let admission = &state.admission;
    let Ok(permit) = Arc::clone(&admission.in_flight).try_acquire_owned() else {
        return ApiError::overloaded("too many requests in flight (--max-in-flight)")
            .into_response();
    };
    // Kept here too: extractors drop the request's extensions before the handler runs.
    let slot = Slot {
        held: Arc::new(Mutex::new(Kept {
            _slot: Some(permit),
            ..Kept::default()
        })),
        slots: Arc::clone(&admission.in_flight),
        answers: Arc::clone(&admission.answer_memory),
    };
    parts.extensions.insert(slot.clone());
    let answer = next.run(Request::from_parts(parts, body)).await;
    let reserved = slot.answer();
    drop(slot);
    answer_memory::hold(&admission.answer_memory, answer, reserved).await
}
