//! Durations (`200ms`, `5s`, `2m`) and sizes (`64MiB`, `1GiB`, or bytes)
//! as manifests write them, parsed by humantime and bytesize.

use std::time::Duration;

/// Parses a duration with its unit: `200ms`, `5s`, `2m`, `1h 30m`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. 200ms, 5s or 2m"))
}

/// Parses a size: `64MiB`, `512KiB`, `1GiB`, or a number of bytes.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|e| format!("`{text}` is not a size ({e}); write e.g. 16MiB, 512KiB or 1GiB"))
}
