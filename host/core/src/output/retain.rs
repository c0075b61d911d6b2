//! Retained outputs: the full text behind a bounded part, kept in the
//! store (R16, R38) under a random id and named only by an opaque
//! reference, `toolhost-output:<id>`: no path ever leaves the host.

use std::time::Duration;

/// How long retained outputs are kept by default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Default cap on the bytes all retained outputs may take; the oldest are
/// evicted to make room, so a plugin cannot fill the disk.
pub const DEFAULT_RETENTION_QUOTA: u64 = 1 << 30;

/// The same cap when the store is in memory (a host given neither a store
/// nor a state directory): retained outputs then take the process's memory.
pub const DEFAULT_MEMORY_RETENTION_QUOTA: u64 = 64 << 20;

/// Prefix of every retained-output reference.
pub const REFERENCE_PREFIX: &str = "toolhost-output:";

/// Hex digits in an output id: a random (v4) UUID in simple form, so ids
/// are unguessable.
const ID_LEN: usize = 32;

/// How much retained output the store keeps, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Bytes all retained outputs may take together.
    pub quota: u64,
    /// How long each is kept.
    pub age: Duration,
}

/// A fresh random output id and its reference.
pub fn new_reference() -> (String, String) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let reference = format!("{REFERENCE_PREFIX}{id}");
    (id, reference)
}

/// The id in a reference (`toolhost-output:<id>`, or the bare id), if it is
/// one of ours.
pub fn id_of(reference: &str) -> Option<&str> {
    let id = reference
        .strip_prefix(REFERENCE_PREFIX)
        .unwrap_or(reference);
    (id.len() == ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retained_ids_are_random_and_resolve() {
        let (a, reference) = new_reference();
        let (b, _) = new_reference();
        assert_ne!(a, b);
        // Ids are random UUIDs (version 4), not derived from time or a
        // counter.
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version(), Some(uuid::Version::Random));
        assert_eq!(id_of(&reference), Some(a.as_str()));
        assert_eq!(id_of(&a), Some(a.as_str()));
        assert_eq!(id_of("toolhost-output:../../etc/passwd"), None);
    }
}
