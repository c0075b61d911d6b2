//! Durations (`200ms`, `5s`, `2m`) and sizes (`64MiB`, or bytes) on the
//! command line, read as manifests read them: by humantime and bytesize.

use std::time::Duration;

/// `--timeout 200ms`, `--grace 5s`, `--session-idle 2m`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. 200ms, 5s or 2m"))
}

/// `--memory 64MiB`, `--max-buffered 1GiB`, or a number of bytes.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|e| format!("`{text}` is not a size ({e}); write e.g. 16MiB, 512KiB or 1GiB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_as_in_manifests() {
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("lots").is_err());
    }
}
