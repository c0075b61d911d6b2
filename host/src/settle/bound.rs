//! Step 6: bound the text that reaches the model (R16, R28). The line and
//! byte bounds apply to all text parts of a result together. Text parts
//! that fit stay whole; the first that does not is retained in full and
//! replaced by head + marker + tail within what is left; any text parts
//! after it are retained together and replaced by one marker. If retention
//! fails the call fails operationally: never a lossy success.

use std::sync::Arc;

use crate::model::budget::OutputBounds;
use crate::model::content::ContentPart;
use crate::model::outcome::{Completed, FaultKind, Outcome, RetainedOutput};
use crate::output::preview::{
    MARKER_LINES, MARKER_ROOM, count_lines, parts_marker, preview, within,
};
use crate::output::retain::new_reference;
use crate::settle::pipeline::Pipeline;
use crate::store::Store;

/// Room kept for the marker that stands for the parts after a cut.
const PARTS_MARKER_BYTES: usize = 256;

/// Where bounding retains full texts: the store, for the call's scope.
pub(super) struct Retainer<'a> {
    pub(super) pipeline: &'a Pipeline,
    pub(super) store: Option<&'a Arc<dyn Store>>,
    /// Who may read them back.
    pub(super) scope: &'a str,
}

pub(super) async fn bound(
    retainer: &Retainer<'_>,
    completed: &mut Completed,
    bounds: &OutputBounds,
) -> Result<(), Outcome> {
    let texts = completed.content.iter().filter_map(|p| match p {
        ContentPart::Text { text } => Some(text),
        ContentPart::Media { .. } => None,
    });
    let (bytes, lines) = texts.fold((0, 0), |(b, l), t| (b + t.len(), l + count_lines(t)));
    if bytes <= bounds.max_bytes && lines <= bounds.max_lines {
        return Ok(());
    }
    let mut texts_after = completed
        .content
        .iter()
        .filter(|p| matches!(p, ContentPart::Text { .. }))
        .count();
    let mut left = *bounds;
    let mut cut = false;
    let mut overflow: Vec<String> = Vec::new();
    let mut kept = Vec::with_capacity(completed.content.len());
    for part in completed.content.drain(..) {
        let text = match part {
            ContentPart::Text { text } if cut => {
                overflow.push(text);
                continue;
            }
            ContentPart::Text { text } => text,
            media => {
                kept.push(media);
                continue;
            }
        };
        texts_after -= 1;
        let room = room_for(&left, texts_after > 0);
        if within(&text, &room) {
            left.max_bytes -= text.len();
            left.max_lines -= count_lines(&text);
            kept.push(ContentPart::Text { text });
            continue;
        }
        cut = true;
        if room.max_bytes < MARKER_ROOM || room.max_lines <= MARKER_LINES {
            // Too little room left for a preview: retained with the rest.
            overflow.push(text);
            continue;
        }
        let retained = retainer.retain(&text).await?;
        kept.push(ContentPart::text(preview(
            &text,
            &room,
            &retained.reference,
        )));
        completed.retained.push(retained);
    }
    if !overflow.is_empty() {
        let joined = overflow.join("\n");
        let retained = retainer.retain(&joined).await?;
        let marker = parts_marker(overflow.len(), joined.len(), &retained.reference);
        kept.push(ContentPart::text(marker));
        completed.retained.push(retained);
    }
    completed.content = kept;
    Ok(())
}

/// What is left for the next text part, keeping room for the marker of any
/// text parts that may follow it.
fn room_for(left: &OutputBounds, more_texts: bool) -> OutputBounds {
    if !more_texts {
        return *left;
    }
    OutputBounds {
        max_bytes: left.max_bytes.saturating_sub(PARTS_MARKER_BYTES),
        max_lines: left.max_lines.saturating_sub(1),
        ..*left
    }
}

impl Retainer<'_> {
    /// Keeps `text` in the store under a fresh reference.
    async fn retain(&self, text: &str) -> Result<RetainedOutput, Outcome> {
        let fault = |why: String| {
            Outcome::fault(
                FaultKind::Retention,
                format!("cannot retain oversized output: {why}"),
            )
        };
        let Some(store) = self.store else {
            return Err(fault("this host has no store".into()));
        };
        let retention = self.pipeline.retention;
        let bytes = text.len() as u64;
        if bytes > retention.quota {
            return Err(fault(format!(
                "{bytes} bytes exceed the retention quota of {} bytes; raise `HostBuilder::retention_quota`",
                retention.quota
            )));
        }
        let (id, reference) = new_reference();
        store
            .retain(
                &id,
                self.scope,
                text.as_bytes(),
                retention.quota,
                retention.age,
            )
            .await
            .map_err(|e| {
                fault(format!(
                    "{e}; check that the store is reachable and has room"
                ))
            })?;
        Ok(RetainedOutput { reference, bytes })
    }
}
