//! Captured guest stdout/stderr, bounded (R25).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// Bytes of each of stdout and stderr kept per call: enough for a panic
/// message and diagnostics, bounded against a guest that prints forever.
pub const MAX_CAPTURED_BYTES: usize = 64 << 10;

/// A bounded sink for one guest stream. Writes past the bound are counted
/// and dropped, never refused, so a chatty guest does not fail its writes.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogBuffer {
    inner: Arc<Mutex<Buffered>>,
}

#[derive(Debug, Default)]
struct Buffered {
    data: Vec<u8>,
    dropped: u64,
}

impl LogBuffer {
    /// What was captured so far (lossy UTF-8), left in place.
    pub(crate) fn text(&self) -> String {
        let c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&c.data).into_owned()
    }

    /// What was captured (lossy UTF-8) and how many bytes were dropped.
    pub(crate) fn take(&self) -> (String, u64) {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&c.data).into_owned();
        c.data.clear();
        (text, std::mem::take(&mut c.dropped))
    }

    fn write(&self, buf: &[u8]) {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = MAX_CAPTURED_BYTES.saturating_sub(c.data.len());
        let kept = room.min(buf.len());
        c.data.extend_from_slice(&buf[..kept]);
        c.dropped += (buf.len() - kept) as u64;
    }
}

impl IsTerminal for LogBuffer {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogBuffer {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl AsyncWrite for LogBuffer {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
