//! Durations (`200ms`, `5s`, `2m`) and sizes (`64MiB`, `1GiB`, or bytes)
//! as manifests write them, parsed by humantime and bytesize. Public so
//! that every front end (the CLI's flags, an embedder's settings) reads
//! them as manifests do, and writes defaults these parsers read back.

use std::time::Duration;

/// Parses a duration with its unit: `200ms`, `5s`, `2m`, `1h 30m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. 200ms, 5s or 2m"))
}

/// Parses a size: `64MiB`, `512KiB`, `1GiB`, or a number of bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|e| format!("`{text}` is not a size ({e}); write e.g. 16MiB, 512KiB or 1GiB"))
}

/// Writes `duration` as [`parse_duration`] reads it back: `10s`, `1m`,
/// `1h 30m`; for defaults shown from their constants.
pub fn format_duration(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// Writes `bytes` as [`parse_size`] reads it back, in the largest binary
/// unit that divides it exactly (`256MiB`, `1536KiB`), else in bytes.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u32, &str); 4] = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    UNITS
        .iter()
        .find(|(shift, _)| bytes != 0 && bytes.trailing_zeros() >= *shift)
        .map_or_else(
            || bytes.to_string(),
            |(shift, unit)| format!("{}{unit}", bytes >> shift),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatted_durations_and_sizes_read_back() {
        for secs in [1, 10, 60, 90, 300, 5400] {
            let duration = Duration::from_secs(secs);
            assert_eq!(parse_duration(&format_duration(duration)), Ok(duration));
        }
        assert_eq!(
            parse_duration(&format_duration(Duration::from_millis(1500))),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
        assert_eq!(format_size(256 << 20), "256MiB");
        assert_eq!(format_size(1536 << 10), "1536KiB");
        assert_eq!(format_size(1000), "1000");
        for bytes in [0, 1, 1000, 4 << 10, 1536 << 10, 256 << 20, 1 << 30, 3 << 40] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
    }
}
