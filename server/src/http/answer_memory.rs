//! The memory of answers, held against one budget (`--max-answer-memory`) until the last
//! byte is handed to the connection: an answer its client does not read stays in memory
//! after its handler returned and gave its slot back, so without it a hundred clients that
//! ask for 8 MiB pages and read nothing hold 800 MiB.
//!
//! A page (a list or the feed) reserves the most a page can be once its caller is
//! authorized and before the store is read, so that the pages being built are within the
//! budget too; every answer then keeps what it really is, and gives it back once sent. An
//! answer the budget cannot take is `429 overloaded` instead.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;

/// What a page reserves before the store is read: the store stops a page's items at
/// 8 MiB, and reading them takes about as much again (each row read, then written as
/// JSON); the page is then sent as those items, not copied into one text.
pub const PAGE_BYTES: usize = 2 * (8 << 20);

/// An answer is handed to the connection in pieces at most this large, so that the
/// connection takes more only as it sends: the rest stays with the answer, under its
/// budget.
const PIECE: usize = 64 << 10;

/// Reserves `bytes` of the budget, or answers why not.
pub fn reserve(
    budget: &Arc<Semaphore>,
    bytes: usize,
) -> Result<OwnedSemaphorePermit, super::error::ApiError> {
    u32::try_from(bytes)
        .ok()
        .and_then(|bytes| Arc::clone(budget).try_acquire_many_owned(bytes).ok())
        .ok_or_else(|| {
            ApiError::overloaded(
                "too many answers are being built or sent at once (--max-answer-memory)",
            )
        })
}

/// `answer` with its body held against `budget` until it is sent, keeping what of
/// `reserved` it needs; `429` when the budget cannot take it.
pub async fn hold(
    budget: &Arc<Semaphore>,
    answer: Response,
    reserved: Option<OwnedSemaphorePermit>,
) -> Response {
    let (parts, mut body) = answer.into_parts();
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
    let size = u32::try_from(bytes).unwrap_or(u32::MAX);
    let permit = match reserved {
        Some(mut reserved) if reserved.num_permits() >= size as usize => {
            // What the answer does not need goes back at once.
            reserved.split(size as usize)
        }
        Some(mut reserved) => {
            let more = size as usize - reserved.num_permits();
            match reserve(budget, more) {
                Ok(more) => {
                    reserved.merge(more);
                    Some(reserved)
                }
                Err(refused) => return refused.into_response(),
            }
        }
        None => match reserve(budget, size as usize) {
            Ok(permit) => Some(permit),
            Err(refused) => return refused.into_response(),
        },
    };
    let mut parts = parts;
    // Sent in pieces, with the length a client reads first, as one body would be.
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes));
    Response::from_parts(parts, sent_in_pieces(pieces, permit))
}

/// A body that yields `pieces`, split to at most [`PIECE`] each, and holds `permit` until
/// it is done (or its connection is gone).
fn sent_in_pieces(pieces: Vec<Bytes>, permit: Option<OwnedSemaphorePermit>) -> Body {
    let mut split = Vec::with_capacity(pieces.len());
    for mut piece in pieces {
        while piece.len() > PIECE {
            split.push(piece.split_to(PIECE));
        }
        split.push(piece);
    }
    let stream = futures_util::stream::iter(split).map(move |piece| {
        let _held = &permit;
        Ok::<_, Infallible>(piece)
    });
    Body::from_stream(stream)
}
