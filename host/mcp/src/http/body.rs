//! Request bodies read within their bounds (R37): a size, an idle time
//! between bytes, a total time, and the server-wide budget of bytes held,
//! which counts what holding a request really costs ([`cost`]) and never
//! refuses a cancellation for load.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt as _;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::http::cost;
use crate::http::refusal::{INVALID_PARAMS, Refused, closing, rpc_error};
use crate::results::BUSY_ERROR_CODE;

/// The largest request body accepted: room for large tool inputs, bounded
/// so a client cannot make the server buffer without end.
pub const MAX_REQUEST_BODY_BYTES: usize = 16 << 20;

/// How long a request body may pause between bytes before the request is
/// answered 408 and its connection closed.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a whole request body may take to arrive, however steadily it
/// trickles.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Request bytes the server holds at once, across every request: bodies
/// being read and the inputs of calls that have not answered yet. Beyond
/// it a request is refused (503, JSON-RPC `-32003`) until others finish.
pub const MAX_BUFFERED_REQUEST_BYTES: usize = 256 << 20;

/// The most bytes of a body read when the budget is spent, to see whether
/// it is a cancellation: far more than one takes.
pub const MAX_UNBUDGETED_BYTES: usize = 4 << 10;

/// How bodies are read, and the budget they share.
pub(crate) struct Bodies {
    pub(crate) idle: Duration,
    pub(crate) deadline: Duration,
    pub(crate) budget: Arc<Semaphore>,
    /// The budget's size, for the refusals' messages.
    pub(crate) budget_bytes: usize,
}

/// A body read, and what of the budget it holds.
#[derive(Debug)]
pub(crate) struct ReadBody {
    pub(crate) bytes: Bytes,
    pub(crate) permit: Option<OwnedSemaphorePermit>,
    /// Read beyond the budget: only a cancellation may go on.
    pub(crate) unbudgeted: bool,
}

impl Bodies {
    /// Reads the whole body within the size, the idle time, the total time
    /// and the budget of bytes held. Over the budget, a body of at most
    /// [`MAX_UNBUDGETED_BYTES`] is still read, unbudgeted, in case it is a
    /// cancellation (never refused for load); a longer one is read to its
    /// end and dropped, so the client, still sending, sees the refusal.
    pub(crate) async fn read(
        &self,
        headers: &HeaderMap,
        mut body: Body,
    ) -> Result<ReadBody, Refused> {
        if declared_length(headers).is_some_and(|n| n > MAX_REQUEST_BODY_BYTES) {
            return Err(too_large());
        }
        let deadline = Instant::now() + self.deadline;
        // The budget is charged for the buffer's capacity, not only the
        // bytes in it: a growing buffer holds up to twice what it has read.
        let mut collected: Vec<u8> = Vec::new();
        let mut permit: Option<OwnedSemaphorePermit> = None;
        let mut unbudgeted = false;
        while let Some(data) = self.next_data(&mut body, deadline).await? {
            let read = collected.len() + data.len();
            if read > MAX_REQUEST_BODY_BYTES {
                return Err(too_large());
            }
            if read > collected.capacity() {
                let capacity = grown_capacity(collected.capacity(), read);
                let more = (!unbudgeted)
                    .then(|| u32::try_from(capacity - collected.capacity()).ok())
                    .flatten()
                    .and_then(|n| self.budget.clone().try_acquire_many_owned(n).ok());
                match (more, &mut permit) {
                    (Some(more), Some(held)) => held.merge(more),
                    (Some(more), None) => permit = Some(more),
                    (None, _) if read <= MAX_UNBUDGETED_BYTES => unbudgeted = true,
                    (None, _) => {
                        drop((collected, permit));
                        self.discard(body, deadline, read).await?;
                        return Err(Box::new(over_budget(self.budget_bytes)));
                    }
                }
                collected.reserve_exact(capacity - collected.len());
            }
            collected.extend_from_slice(&data);
        }
        Ok(ReadBody {
            bytes: Bytes::from(collected),
            permit,
            unbudgeted,
        })
    }

    /// Charges the budget for what holding the body really costs (its
    /// values parsed and the call's input text, besides its buffer, which
    /// is charged already).
    pub(crate) fn charge(
        &self,
        bytes: &[u8],
        permit: &mut Option<OwnedSemaphorePermit>,
    ) -> Result<(), Refused> {
        let Some(permit) = permit else {
            return Ok(());
        };
        let cost = cost::held_bytes(bytes).unwrap_or(bytes.len());
        if cost > self.budget_bytes {
            return Err(Box::new(too_costly(cost, self.budget_bytes)));
        }
        let more = u32::try_from(cost.saturating_sub(permit.num_permits()))
            .ok()
            .and_then(|n| self.budget.clone().try_acquire_many_owned(n).ok())
            .ok_or_else(|| Box::new(over_budget(self.budget_bytes)))?;
        permit.merge(more);
        Ok(())
    }

    /// Reads the rest of a refused body without keeping it.
    async fn discard(
        &self,
        mut body: Body,
        deadline: Instant,
        mut read: usize,
    ) -> Result<(), Refused> {
        while let Some(data) = self.next_data(&mut body, deadline).await? {
            read += data.len();
            if read > MAX_REQUEST_BODY_BYTES {
                return Err(too_large());
            }
        }
        Ok(())
    }

    /// The body's next bytes, within the idle time and the deadline.
    async fn next_data(
        &self,
        body: &mut Body,
        deadline: Instant,
    ) -> Result<Option<Bytes>, Refused> {
        loop {
            let wait = deadline.min(Instant::now() + self.idle);
            match tokio::time::timeout_at(wait, body.frame()).await {
                Err(_) => return Err(Box::new(self.stalled(wait >= deadline))),
                Ok(None) => return Ok(None),
                Ok(Some(Err(e))) => {
                    let unreadable = (
                        StatusCode::BAD_REQUEST,
                        format!("cannot read the request body: {e}"),
                    );
                    return Err(Box::new(closing(unreadable.into_response())));
                }
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    fn stalled(&self, whole: bool) -> Response {
        let message = if whole {
            format!("the request body did not arrive within {:?}", self.deadline)
        } else {
            format!("the request body paused for more than {:?}", self.idle)
        };
        closing(rpc_error(
            StatusCode::REQUEST_TIMEOUT,
            Value::Null,
            INVALID_PARAMS,
            &message,
        ))
    }
}

/// A request whose parsed cost alone passes the whole budget: it can never
/// be held, so it is refused for good (413), not "retry later".
fn too_costly(cost: usize, budget: usize) -> Response {
    closing(rpc_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        Value::Null,
        INVALID_PARAMS,
        &format!(
            "this request would take {} MiB of memory once parsed, more than the {} MiB the server holds for all requests (--max-buffered); send fewer, larger values",
            cost >> 20,
            budget >> 20
        ),
    ))
}

fn too_large() -> Refused {
    Box::new(closing(rpc_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        Value::Null,
        INVALID_PARAMS,
        &format!("the request body is larger than {MAX_REQUEST_BODY_BYTES} bytes"),
    )))
}

pub(crate) fn over_budget(budget: usize) -> Response {
    let mut response = rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        Value::Null,
        BUSY_ERROR_CODE.0,
        &format!(
            "the server already holds {} MiB of requests; retry when they have been answered",
            budget >> 20
        ),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// A buffer's next capacity: at least what it must hold, doubling so a
/// body arriving in many pieces is copied a few times, not once per piece.
fn grown_capacity(capacity: usize, needed: usize) -> usize {
    needed.max(capacity * 2).min(MAX_REQUEST_BODY_BYTES)
}

fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(budget_bytes: usize) -> Bodies {
        Bodies {
            idle: Duration::from_secs(5),
            deadline: Duration::from_secs(5),
            budget: Arc::new(Semaphore::new(budget_bytes)),
            budget_bytes,
        }
    }

    #[tokio::test]
    async fn r37_with_the_budget_spent_only_a_small_body_is_read_and_marked() {
        let bodies = bodies(1000);
        let others = bodies.budget.clone().try_acquire_many_owned(990).unwrap();
        let cancel =
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
        let read = bodies
            .read(&HeaderMap::new(), Body::from(cancel.to_vec()))
            .await
            .expect("a small body is read");
        assert!(read.unbudgeted && read.permit.is_none());
        assert_eq!(&read.bytes[..], cancel);
        let large = vec![b' '; MAX_UNBUDGETED_BYTES + 1];
        let refused = bodies
            .read(&HeaderMap::new(), Body::from(large))
            .await
            .expect_err("a large one is refused");
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        drop(others);
        let read = bodies
            .read(&HeaderMap::new(), Body::from(cancel.to_vec()))
            .await
            .unwrap();
        assert!(!read.unbudgeted && read.permit.is_some());
    }

    #[tokio::test]
    async fn r37_a_body_in_pieces_is_charged_its_buffer_not_only_its_bytes() {
        let bodies = bodies(1 << 20);
        // 3 pieces of 1000 bytes: the buffer grows 1000 → 2000 → 4000.
        let pieces = (0..3).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 1000])));
        let read = bodies
            .read(
                &HeaderMap::new(),
                Body::from_stream(futures_util::stream::iter(pieces)),
            )
            .await
            .unwrap();
        assert_eq!(read.bytes.len(), 3000);
        assert_eq!(read.permit.as_ref().unwrap().num_permits(), 4000);
    }

    #[tokio::test]
    async fn r37_holding_a_body_is_charged_what_it_parses_into() {
        let bodies = bodies(1 << 20);
        let zeros = format!(r#"{{"n":[{}0]}}"#, "0,".repeat(5_000));
        let mut read = bodies
            .read(&HeaderMap::new(), Body::from(zeros.clone()))
            .await
            .unwrap();
        bodies.charge(&read.bytes, &mut read.permit).unwrap();
        let held = read.permit.as_ref().unwrap().num_permits();
        assert_eq!(held, cost::held_bytes(zeros.as_bytes()).unwrap());
        assert!(held > 10 * zeros.len(), "{held} for {} bytes", zeros.len());
        // More than the whole budget can never be held: 413, not 503.
        let dense = format!(r#"{{"n":[{}0]}}"#, "0,".repeat(20_000));
        let mut read = bodies
            .read(&HeaderMap::new(), Body::from(dense.clone()))
            .await
            .unwrap();
        let refused = bodies.charge(&read.bytes, &mut read.permit).unwrap_err();
        assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}
