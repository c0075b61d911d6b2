//! The store a host uses: one given by the embedder, the embedded store in
//! the state directory the embedder named, or, when it named neither, a
//! store in memory. An embedded or in-memory store is opened when first
//! needed (so a host builds without touching the disk) and opened again
//! after a failure.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::OnceCell;

use crate::model::event::{EventSink, ProgressEvent, RequestEvent};
use crate::{Durability, SqlStore, Store, StoreError, StoreEvent};

/// Where a host's store comes from, opened on first use.
#[derive(Debug)]
pub struct StoreSlot(Slot);

#[derive(Debug)]
enum Slot {
    /// The embedder's store.
    Given(Arc<dyn Store>),
    /// The embedded store in `dir`, once opened.
    Embedded {
        dir: PathBuf,
        durability: Durability,
        opened: OnceCell<Arc<dyn Store>>,
    },
    /// A store in this process's memory, once opened: nothing on disk.
    Memory(OnceCell<Arc<dyn Store>>),
    /// No store: outcomes are not recorded, ids never replay, and an
    /// oversized output fails its call (benchmarks measure the pipeline
    /// without one).
    #[cfg(feature = "bench")]
    Absent,
}

impl StoreSlot {
    /// The embedder's store.
    pub fn given(store: Arc<dyn Store>) -> StoreSlot {
        StoreSlot(Slot::Given(store))
    }

    /// The embedded store in `dir`, not yet opened.
    pub fn embedded(dir: PathBuf, durability: Durability) -> StoreSlot {
        StoreSlot(Slot::Embedded {
            dir,
            durability,
            opened: OnceCell::new(),
        })
    }

    /// A store in memory, not yet opened.
    pub fn memory() -> StoreSlot {
        StoreSlot(Slot::Memory(OnceCell::new()))
    }

    /// No store (benchmarks measure the pipeline without one).
    #[cfg(feature = "bench")]
    pub fn absent() -> StoreSlot {
        StoreSlot(Slot::Absent)
    }

    /// Whether the store is in memory.
    pub fn in_memory(&self) -> bool {
        matches!(self.0, Slot::Memory(_))
    }

    /// The store, opening the embedded or in-memory one on first use; a
    /// failed open is tried again by the next call.
    pub async fn get(&self) -> Result<Option<&Arc<dyn Store>>, StoreError> {
        match &self.0 {
            Slot::Given(store) => Ok(Some(store)),
            Slot::Embedded {
                dir,
                durability,
                opened,
            } => opened
                .get_or_try_init(|| async {
                    let store = SqlStore::embedded_with(dir, *durability).await?;
                    Ok(Arc::new(store) as Arc<dyn Store>)
                })
                .await
                .map(Some),
            Slot::Memory(opened) => opened
                .get_or_try_init(|| async {
                    Ok(Arc::new(SqlStore::in_memory().await?) as Arc<dyn Store>)
                })
                .await
                .map(Some),
            #[cfg(feature = "bench")]
            Slot::Absent => Ok(None),
        }
    }
}

/// Progress and audited requests of a call, kept in the store.
#[allow(missing_debug_implementations)] // a store, nothing to show
pub struct EventsToStore(pub Arc<dyn Store>);

impl EventSink for EventsToStore {
    fn progress(&self, event: &ProgressEvent) {
        self.0.event(StoreEvent {
            kind: "progress",
            context: event.context.clone(),
            body: serde_json::to_value(event).unwrap_or_default(),
        });
    }

    fn request(&self, event: &RequestEvent) {
        self.0.event(StoreEvent {
            kind: "request",
            context: event.context.clone(),
            body: serde_json::to_value(event).unwrap_or_default(),
        });
    }
}
