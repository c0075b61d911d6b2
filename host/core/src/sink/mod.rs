//! The durable event log: every event as one JSON line in a file, written by
//! a background writer with group commit (R19), kept whole under every
//! failure and rotated at a size (R37).

mod line;
mod segments;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::{mpsc, oneshot};

use crate::model::event::{EventSink, ProgressEvent, RequestEvent, SinkError, SinkFuture};
use crate::model::outcome::Settlement;

use line::{LoggedSettlement, line};
use segments::{Layout, Segments};

/// Events waiting for the writer beyond which progress updates are dropped
/// (and counted), so a chatty guest cannot grow the queue without bound.
/// Outcomes and audited requests are never dropped: there are at most a
/// few per call in flight.
const PROGRESS_BACKLOG: usize = 4096;

/// Size at which the event log moves to a new segment: large enough for
/// hundreds of thousands of outcomes, small enough to read, copy and ship.
pub const EVENT_LOG_ROTATE_BYTES: u64 = 64 << 20;

/// Rotated segments kept beside the current one (`FILE.1` newest to
/// `FILE.4` oldest), so the log never holds much more than five segments.
pub const EVENT_LOG_SEGMENTS: usize = 4;

/// Writes every event as one JSON line to a file.
///
/// A background thread does the writing, so settling tasks never block on
/// the disk. Outcomes are durable: [`EventSink::outcome`] resolves only after
/// the writer has synced them, and the writer syncs once for every outcome
/// that arrived while it was busy (group commit). Progress updates are
/// written but not synced: each is superseded by the next.
///
/// Every line in the file is complete: a write that fails (a full disk) or
/// lands only partly is cut back to the last complete line before anything
/// else is written, and the outcomes it carried fail; a crash mid-write
/// leaves at most an incomplete last line, which opening the log removes.
///
/// An outcome line holds the content as bounded, the retained references,
/// usage, warnings and logs; the machine output and media bytes appear
/// only as their sizes (`output_bytes`, a media part's `bytes`).
///
/// Before a write would take the file past [`EVENT_LOG_ROTATE_BYTES`] it
/// becomes `FILE.1` (older segments move up, the one past
/// [`EVENT_LOG_SEGMENTS`] is deleted) and a new `FILE` starts; a line never
/// spans segments. [`JsonLinesSink::builder`] changes both.
///
/// Dropping the sink lets the writer finish what is queued and waits for it.
#[derive(Debug)]
pub struct JsonLinesSink {
    queue: Option<mpsc::UnboundedSender<Entry>>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// Entries queued and not yet written.
    backlog: Arc<AtomicUsize>,
    dropped_progress: AtomicU64,
}

/// Where and how a [`JsonLinesSink`] writes.
#[derive(Debug, Clone)]
pub struct JsonLinesBuilder {
    layout: Layout,
}

impl JsonLinesBuilder {
    /// The size before which the log rotates. Default:
    /// [`EVENT_LOG_ROTATE_BYTES`]. A batch of lines larger than this goes
    /// whole into a segment of its own.
    pub fn rotate_bytes(mut self, bytes: u64) -> Self {
        self.layout.rotate_bytes = bytes;
        self
    }

    /// Rotated segments kept. Default: [`EVENT_LOG_SEGMENTS`]; 0 empties the
    /// file instead of keeping old lines.
    pub fn segments(mut self, n: usize) -> Self {
        self.layout.segments = n;
        self
    }

    /// Opens (creating) the log for appending, first cutting off an
    /// incomplete last line left by a crash, and starts its writer thread.
    pub fn open(self) -> io::Result<JsonLinesSink> {
        let path = self.layout.path.clone();
        let segments = Segments::open(self.layout)?;
        let (queue, pending) = mpsc::unbounded_channel();
        let backlog = Arc::new(AtomicUsize::new(0));
        let written = backlog.clone();
        let writer = std::thread::Builder::new()
            .name("toolhost-events".into())
            .spawn(move || write_batches(segments, &path, pending, &written))?;
        Ok(JsonLinesSink {
            queue: Some(queue),
            writer: Some(writer),
            backlog,
            dropped_progress: AtomicU64::new(0),
        })
    }
}

/// One serialized line, and who waits for it to be durable.
struct Entry {
    line: Vec<u8>,
    durable: Option<oneshot::Sender<Result<(), SinkError>>>,
}

impl JsonLinesSink {
    /// Opens `path` with the default rotation; see [`JsonLinesBuilder::open`].
    pub fn open(path: impl AsRef<Path>) -> io::Result<JsonLinesSink> {
        JsonLinesSink::builder(path).open()
    }

    /// A builder for a log at `path`, with the default rotation.
    pub fn builder(path: impl AsRef<Path>) -> JsonLinesBuilder {
        JsonLinesBuilder {
            layout: Layout {
                path: path.as_ref().to_owned(),
                rotate_bytes: EVENT_LOG_ROTATE_BYTES,
                segments: EVENT_LOG_SEGMENTS,
            },
        }
    }

    /// Queues an entry for the writer; false if the writer has stopped.
    fn enqueue(&self, entry: Entry) -> bool {
        let Some(queue) = &self.queue else {
            return false;
        };
        self.backlog.fetch_add(1, Ordering::Relaxed);
        queue.send(entry).is_ok()
    }

    /// Progress updates dropped because the writer fell behind.
    pub fn dropped_progress(&self) -> u64 {
        self.dropped_progress.load(Ordering::Relaxed)
    }
}

impl EventSink for JsonLinesSink {
    fn progress(&self, event: &ProgressEvent) {
        let Ok(line) = line("progress", event) else {
            return;
        };
        if self.backlog.load(Ordering::Relaxed) >= PROGRESS_BACKLOG
            || !self.enqueue(Entry {
                line,
                durable: None,
            })
        {
            self.dropped_progress.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Written ahead of the call's outcome, so it is durable when the
    /// outcome is.
    fn request(&self, event: &RequestEvent) {
        if let Ok(line) = line("request", event) {
            self.enqueue(Entry {
                line,
                durable: None,
            });
        }
    }

    fn outcome<'a>(&'a self, settlement: &'a Settlement) -> SinkFuture<'a> {
        Box::pin(async move {
            let (done, durable) = oneshot::channel();
            let entry = Entry {
                line: line("outcome", &LoggedSettlement::new(settlement))?,
                durable: Some(done),
            };
            let stopped = || SinkError("the event writer has stopped".into());
            if !self.enqueue(entry) {
                return Err(stopped());
            }
            durable.await.map_err(|_| stopped())?
        })
    }
}

impl Drop for JsonLinesSink {
    fn drop(&mut self) {
        // Closing the queue ends the writer once it has written the rest.
        drop(self.queue.take());
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The writer thread: takes everything queued, writes it in one go, syncs
/// once if any of it is an outcome, then tells each outcome's waiter.
fn write_batches(
    mut segments: Segments,
    path: &Path,
    mut pending: mpsc::UnboundedReceiver<Entry>,
    backlog: &AtomicUsize,
) {
    let mut batch = Vec::new();
    while let Some(first) = pending.blocking_recv() {
        batch.push(first);
        while let Ok(more) = pending.try_recv() {
            batch.push(more);
        }
        backlog.fetch_sub(batch.len(), Ordering::Relaxed);
        let mut bytes = Vec::new();
        let mut waiters = Vec::new();
        for entry in batch.drain(..) {
            bytes.extend_from_slice(&entry.line);
            waiters.extend(entry.durable);
        }
        let written = segments.append(&bytes, !waiters.is_empty());
        if let Err(e) = &written {
            tracing::warn!(
                "event log {}: cannot write {} bytes: {e}",
                path.display(),
                bytes.len()
            );
        }
        for waiter in waiters {
            let _ = waiter.send(written.as_ref().map(|_| ()).map_err(|e| {
                SinkError(format!(
                    "cannot write the event log {}: {e}",
                    path.display()
                ))
            }));
        }
    }
}
