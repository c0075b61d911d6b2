//! The durable event log: every event as one JSON line in a file, written by
//! a background writer with group commit (R19).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::model::event::{EventSink, ProgressEvent, RequestEvent, SinkError, SinkFuture};
use crate::model::outcome::Settlement;

/// Events waiting for the writer beyond which progress updates are dropped
/// (and counted), so a chatty guest cannot grow the queue without bound.
/// Outcomes and audited requests are never dropped: there are at most a
/// few per call in flight.
const PROGRESS_BACKLOG: usize = 4096;

/// Writes every event as one JSON line to a file.
///
/// A background thread does the writing, so settling tasks never block on
/// the disk. Outcomes are durable: [`EventSink::outcome`] resolves only after
/// the writer has synced them, and the writer syncs once for every outcome
/// that arrived while it was busy (group commit). Progress updates are
/// written but not synced: each is superseded by the next.
///
/// A crash mid-write can leave at most one incomplete last line, which
/// [`JsonLinesSink::open`] removes, so every line in the file is complete.
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

/// One serialized line, and who waits for it to be durable.
struct Entry {
    line: Vec<u8>,
    durable: Option<oneshot::Sender<Result<(), SinkError>>>,
}

impl JsonLinesSink {
    /// Opens (creating) `path` for appending, first cutting off an
    /// incomplete last line left by a crash, and starts its writer thread.
    pub fn open(path: impl AsRef<Path>) -> io::Result<JsonLinesSink> {
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)?;
        let complete = complete_len(&mut file)?;
        file.set_len(complete)?;
        file.seek(SeekFrom::End(0))?;
        let (queue, pending) = mpsc::unbounded_channel();
        let backlog = Arc::new(AtomicUsize::new(0));
        let written = backlog.clone();
        let writer = std::thread::Builder::new()
            .name("toolhost-events".into())
            .spawn(move || write_batches(file, pending, &written))?;
        Ok(JsonLinesSink {
            queue: Some(queue),
            writer: Some(writer),
            backlog,
            dropped_progress: AtomicU64::new(0),
        })
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

fn line(kind: &str, body: &impl Serialize) -> Result<Vec<u8>, SinkError> {
    #[derive(Serialize)]
    struct Line<'a, B> {
        event: &'a str,
        #[serde(flatten)]
        body: &'a B,
    }
    let mut line = serde_json::to_vec(&Line { event: kind, body })
        .map_err(|e| SinkError(format!("cannot serialize the {kind} event: {e}")))?;
    line.push(b'\n');
    Ok(line)
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
                line: line("outcome", settlement)?,
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
    mut file: File,
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
        let written = file.write_all(&bytes).and_then(|()| {
            if waiters.is_empty() {
                Ok(())
            } else {
                file.sync_data()
            }
        });
        if let Err(e) = &written {
            tracing::warn!("event log: cannot write {} bytes: {e}", bytes.len());
        }
        for waiter in waiters {
            let _ = waiter.send(
                written
                    .as_ref()
                    .map(|_| ())
                    .map_err(|e| SinkError(format!("cannot write the event log: {e}"))),
            );
        }
    }
}

/// The length of `file` up to and including its last newline.
fn complete_len(file: &mut File) -> io::Result<u64> {
    const CHUNK: u64 = 4096;
    let len = file.seek(SeekFrom::End(0))?;
    let mut end = len;
    let mut buf = vec![0u8; CHUNK as usize];
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        file.seek(SeekFrom::Start(start))?;
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}
