//! The body of a gRPC request as the server reads it: hyper's, with a note of how the call
//! went that the call's outcome is counted by. Below both the routing (`grpc.rs`) and
//! the echo service (`grpc_echo.rs`), which share it.

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::task::{Context, Poll};

/// What a call's request side tells the counting of its outcome.
#[derive(Debug, Default)]
pub(super) struct CallNote {
    /// The request failed (the client reset the stream, or the connection broke): the call
    /// is counted as cancelled whatever status it then ended with.
    pub(super) broke: AtomicBool,
    /// A request message did not fit in the buffer budget: the call's RESOURCE_EXHAUSTED
    /// is counted as [`super::stats::Reject::OverBudgetGrpc`].
    pub(super) over_budget: AtomicBool,
}

/// The body of a gRPC request: hyper's, noting when it failed (the client reset the
/// stream, or the connection broke), so that the call is counted as cancelled whatever
/// status is then made of the error.
pub(super) struct RequestBody {
    pub(super) inner: Incoming,
    pub(super) note: Arc<CallNote>,
}

impl RequestBody {
    /// Notes that a message of this call did not fit in the buffer budget.
    pub(super) fn over_budget(&self) {
        self.note.over_budget.store(true, Relaxed);
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Err(_))) = &frame {
            this.note.broke.store(true, Relaxed);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
