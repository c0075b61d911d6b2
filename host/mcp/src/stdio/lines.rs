//! Stdin as the MCP transport reads it, with every line bounded: a line
//! longer than [`super::MAX_STDIO_MESSAGE_BYTES`] is cut there and ended so
//! that it cannot parse (the transport skips it), the rest of it is read
//! past in constant memory, and what it was (its id, if a request) is
//! reported so the client can be answered.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

use super::head::{Head, HeadScanner};

/// Bytes read from stdin at a time.
const CHUNK: usize = 64 << 10;

/// What ends a cut line: no JSON text can end in `x`, so the line the
/// transport sees is never a valid message.
const SPOILER: &[u8] = b"x\n";

/// A line that was too long: what it was and how long.
#[derive(Debug)]
pub(super) struct Oversized {
    pub(super) head: Head,
    pub(super) bytes: u64,
}

/// An [`AsyncRead`] that passes lines of at most `max` bytes (plus their
/// newline) through unchanged and cuts longer ones.
pub(super) struct BoundedLines<R> {
    inner: R,
    max: usize,
    buf: Box<[u8]>,
    /// Read but not yet handled: `buf[start..end]`.
    start: usize,
    end: usize,
    /// Bytes of the current line so far (passed or skipped).
    line: u64,
    /// The current line was cut: its rest is skipped.
    skipping: bool,
    /// Bytes of [`SPOILER`] still to pass on.
    spoiler: usize,
    head: HeadScanner,
    oversized: mpsc::UnboundedSender<Oversized>,
}

impl<R> BoundedLines<R> {
    pub(super) fn new(
        inner: R,
        max: usize,
        oversized: mpsc::UnboundedSender<Oversized>,
    ) -> BoundedLines<R> {
        BoundedLines {
            inner,
            max,
            buf: vec![0; CHUNK].into_boxed_slice(),
            start: 0,
            end: 0,
            line: 0,
            skipping: false,
            spoiler: 0,
            head: HeadScanner::default(),
            oversized,
        }
    }

    /// Moves what it can of `buf[start..end]` to `out`: up to the end of
    /// the line, or the bound, or the room in `out`.
    fn handle(&mut self, out: &mut ReadBuf<'_>) {
        let pending = &self.buf[self.start..self.end];
        let newline = memchr::memchr(b'\n', pending);
        let through = newline.map_or(pending.len(), |i| i + 1);
        let content = newline.unwrap_or(pending.len()) as u64;
        if self.skipping {
            self.head.feed(&pending[..through]);
            self.line += through as u64;
            self.start += through;
            if newline.is_some() {
                self.end_line();
            }
            return;
        }
        let room = self.max as u64 - self.line.min(self.max as u64);
        if content > room {
            let kept = room as usize;
            let take = kept.min(out.remaining());
            self.pass(take, out, true);
            if take == kept {
                self.skipping = true;
                self.spoiler = SPOILER.len();
            }
            return;
        }
        // A line that ends here fits, so what it was is never asked: only
        // the bytes of a line that may yet grow too long are scanned.
        let take = through.min(out.remaining());
        self.pass(take, out, newline.is_none());
        if newline.is_some() && take == through {
            self.line = 0;
            self.head.reset();
        }
    }

    /// Passes the next `n` pending bytes on, scanning them if `scan`.
    fn pass(&mut self, n: usize, out: &mut ReadBuf<'_>, scan: bool) {
        let bytes = &self.buf[self.start..self.start + n];
        if scan {
            self.head.feed(bytes);
        }
        out.put_slice(bytes);
        self.line += n as u64;
        self.start += n;
    }

    fn end_line(&mut self) {
        let bytes = std::mem::take(&mut self.line);
        self.skipping = false;
        let head = self.head.finish();
        // The receiver lives as long as the transport reading this.
        let _ = self.oversized.send(Oversized { head, bytes });
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = out.filled().len();
        // Bounded: each turn either fills `out` or consumes pending bytes,
        // and reading stops at the first `Pending` or end of input.
        loop {
            if this.spoiler > 0 {
                let from = SPOILER.len() - this.spoiler;
                let n = this.spoiler.min(out.remaining());
                out.put_slice(&SPOILER[from..from + n]);
                this.spoiler -= n;
            }
            if out.filled().len() > before || out.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            if this.start < this.end {
                this.handle(out);
                continue;
            }
            let mut read = ReadBuf::new(&mut this.buf);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let n = read.filled().len();
            if n == 0 {
                return Poll::Ready(Ok(()));
            }
            (this.start, this.end) = (0, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    async fn through(input: Vec<u8>, max: usize) -> (Vec<u8>, Vec<Oversized>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut lines = BoundedLines::new(&input[..], max, tx);
        let mut out = Vec::new();
        lines.read_to_end(&mut out).await.unwrap();
        drop(lines);
        let mut reports = Vec::new();
        while let Ok(r) = rx.try_recv() {
            reports.push(r);
        }
        (out, reports)
    }

    #[tokio::test]
    async fn lines_within_the_bound_pass_unchanged() {
        let input = b"{\"id\":1}\n12345\n\n{}".to_vec();
        let (out, reports) = through(input.clone(), 8).await;
        assert_eq!(out, input);
        assert!(reports.is_empty());
    }

    #[tokio::test]
    async fn a_longer_line_is_cut_spoiled_and_reported_with_its_id() {
        let long = format!(
            "{{\"method\":\"m\",\"params\":\"{}\",\"id\":9}}",
            "p".repeat(CHUNK * 3)
        );
        let input = format!("{{\"id\":1}}\n{long}\n{{\"id\":2}}\n").into_bytes();
        let (out, reports) = through(input, 100).await;
        let expected = format!("{{\"id\":1}}\n{}x\n{{\"id\":2}}\n", &long[..100]);
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        assert_eq!(reports.len(), 1);
        assert_eq!(
            reports[0].head,
            Head::Request(rmcp::model::NumberOrString::Number(9))
        );
        assert_eq!(reports[0].bytes, long.len() as u64 + 1);
    }

    #[tokio::test]
    async fn a_line_that_fits_across_reads_leaves_the_next_line_scanned_afresh() {
        let fits = format!(
            "{{\"id\":1,\"method\":\"m\",\"p\":\"{}\"}}",
            "f".repeat(CHUNK)
        );
        let long = format!(
            "{{\"method\":\"m\",\"p\":\"{}\",\"id\":9}}",
            "p".repeat(CHUNK * 3)
        );
        let input = format!("{fits}\n{long}\n").into_bytes();
        let (out, reports) = through(input, CHUNK * 2).await;
        assert!(out.starts_with(format!("{fits}\n").as_bytes()));
        assert_eq!(reports.len(), 1);
        assert_eq!(
            reports[0].head,
            Head::Request(rmcp::model::NumberOrString::Number(9))
        );
    }
}
