//! Admission of API requests, in an order that keeps a slow or hostile client from holding
//! what others need:
//!
//! 1. the caller is authenticated, so a stranger's body is never read;
//! 2. its body is received whole ([`receive`]): within `--body-timeout` (else
//!    `408`), `--max-body-bytes` (`413`) and the memory all bodies being received share,
//!    `--max-body-memory` (`429`);
//! 3. only then does it take one of the `--max-in-flight` slots, or is answered at once
//!    with `429 overloaded` and `Retry-After` rather than queue behind the database. Every
//!    answer holds what it is against `--max-answer-memory` until it is sent, a page each
//!    item as the store takes it ([`super::answer_memory`]). It holds the slot while it is
//!    served, never while it waits on its client. A watch gives its slot back while it
//!    waits for a change, under a cap of its own (`--max-watches`), and a write while it
//!    waits for the writer's transaction (as many places as `--max-in-flight`): of each,
//!    one caller holds at most an eighth, and an eighth is kept for callers who may act as
//!    the controller ([`super::places`]), so a stalled writer never turns the controller's
//!    reads into `429`; the answers' memory is shared the same way.

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

use super::answer_memory::{self, AnswerMemory, Holding};
use super::error::ApiError;
use super::places::{Places, Waiting};
use super::state::AppState;
use crate::auth::{Caller, Verb};
use crate::store::PageMemory;
use crate::validate::dns_label;

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
    watches: Arc<Places>,
    writes: Arc<Places>,
    /// Bytes of bodies held in memory, one permit a byte.
    body_memory: Arc<Semaphore>,
    answer_memory: Arc<AnswerMemory>,
    body_timeout: Duration,
}

impl Admission {
    pub fn new(limits: Limits) -> Self {
        Admission {
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
            watches: Arc::new(Places::new(limits.max_watches, Waiting::Watches)),
            writes: Arc::new(Places::new(limits.max_in_flight, Waiting::Writes)),
            body_memory: Arc::new(Semaphore::new(
                limits.max_body_memory.min(Semaphore::MAX_PERMITS),
            )),
            answer_memory: Arc::new(AnswerMemory::new(limits.max_answer_memory)),
            body_timeout: limits.body_timeout,
        }
    }

    /// The places of watches waiting for a change.
    pub fn watches(&self) -> &Arc<Places> {
        &self.watches
    }

    /// The places of writes waiting for the writer.
    pub fn writes(&self) -> &Arc<Places> {
        &self.writes
    }
}

/// A request's slot among those in flight, and what its answer holds of the answers'
/// memory.
#[derive(Debug, Clone)]
pub struct Slot {
    held: Arc<Mutex<Kept>>,
    slots: Arc<Semaphore>,
    answers: Arc<AnswerMemory>,
}

#[derive(Debug, Default)]
struct Kept {
    /// Held, not read: dropping it gives the slot back.
    _slot: Option<OwnedSemaphorePermit>,
    answer: Option<Holding>,
    /// The answer is a page, of this caller (its holder) and whether it may act as the
    /// controller: its items are held as the store takes them.
    page: Option<(String, bool)>,
}

impl Slot {
    fn held(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the answer a page of `caller`'s in `namespace` (`None`: every namespace),
    /// whose items the store holds as it takes them ([`PageMemory`]). Whether the caller
    /// may act as the controller is asked here, once a page, as the store cannot wait;
    /// the answer, for the handler to use too.
    pub async fn begin_page(
        &self,
        state: &AppState,
        caller: &Caller,
        namespace: Option<&str>,
    ) -> bool {
        let controller = state
            .auth
            .authorize(caller, Verb::Create, namespace)
            .await
            .is_ok();
        let page = (caller.holder().to_owned(), controller);
        let mut held = self.held();
        held.answer = Some(self.answers.open(&page.0, controller));
        held.page = Some(page);
        controller
    }

    /// Gives the slot and what the answer held back while the request waits on neither
    /// the database nor its client.
    pub fn release(&self) {
        let mut held = self.held();
        held._slot = None;
        held.answer = None;
    }

    /// Takes a slot again, and a page's place in the answers' memory; `false` when no
    /// slot is free.
    pub fn retake(&self) -> bool {
        let mut held = self.held();
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            return false;
        };
        if let Some((caller, controller)) = &held.page {
            held.answer = Some(self.answers.open(caller, *controller));
        }
        held._slot = Some(slot);
        true
    }

    /// What the answer holds, for the answer to keep.
    fn answer(&self) -> Option<Holding> {
        self.held().answer.take()
    }
}

impl PageMemory for Slot {
    fn hold(&self, bytes: usize) -> bool {
        self.held()
            .answer
            .as_mut()
            .is_some_and(|answer| answer.grow(bytes).is_ok())
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
    let caller = match state.counted(state.auth.authenticate(&parts.headers).await) {
        Ok(caller) => caller,
        Err(error) => return ApiError::from(error).into_response(),
    };
    // Who made the request, in its log line (the span is the request's).
    tracing::Span::current().record("subject", caller.subject.as_str());
    parts.extensions.insert(caller.clone());
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
    // Kept for the rare refusal that asks whether the caller may act as the controller.
    let uri = parts.uri.clone();
    let answer = next.run(Request::from_parts(parts, body)).await;
    let memory = slot
        .answer()
        .unwrap_or_else(|| admission.answer_memory.open(caller.holder(), false));
    drop(slot);
    let controls = async || {
        let namespace = path_namespace(uri.path());
        let authorized = state.auth.authorize(&caller, Verb::Create, namespace);
        authorized.await.is_ok()
    };
    answer_memory::hold(answer, memory, controls).await
}

/// The namespace a request's path names (`/api/v1/namespaces/{namespace}/...`), where its
/// caller may act as the controller or not; `None` for the paths of every namespace.
fn path_namespace(path: &str) -> Option<&str> {
    let namespace = path
        .strip_prefix("/api/v1/namespaces/")?
        .split('/')
        .next()?;
    dns_label("namespace", namespace).ok()?;
    Some(namespace)
}
