//! The event log's files: whole lines only, whatever fails, in a current
//! segment that rotates at a size into a bounded number of older ones.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Where and how big the log's segments are.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    /// The current segment; rotated ones are `PATH.1` (newest) to `PATH.N`.
    pub(super) path: PathBuf,
    /// A segment rotates before a write would take it past this size.
    pub(super) rotate_bytes: u64,
    /// Rotated segments kept; the oldest beyond them is deleted.
    pub(super) segments: usize,
}

/// The current segment and how much of it is known to be whole lines.
pub(super) struct Segments {
    layout: Layout,
    /// `None` after a rotation that could not open the next segment.
    file: Option<File>,
    /// Bytes of the current segment that are complete lines, written
    /// successfully. Anything past it is a torn write.
    committed: u64,
    /// A write or sync failed and its bytes are not yet cut off.
    torn: bool,
}

impl Segments {
    /// Opens (creating) the current segment, cutting off an incomplete last
    /// line a crash left behind.
    pub(super) fn open(layout: Layout) -> io::Result<Segments> {
        let (file, committed) = open_current(&layout.path)?;
        Ok(Segments {
            layout,
            file: Some(file),
            committed,
            torn: false,
        })
    }

    /// Appends whole lines, synced when `sync`. On failure nothing of them
    /// stays in the log: the segment is cut back to its last complete line
    /// (now, or before the next write if cutting fails too).
    pub(super) fn append(&mut self, lines: &[u8], sync: bool) -> io::Result<()> {
        self.repair()?;
        if self.committed > 0 && self.committed + lines.len() as u64 > self.layout.rotate_bytes {
            self.rotate()?;
        }
        let file = self.current()?;
        let written = file
            .write_all(lines)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        match written {
            Ok(()) => {
                self.committed += lines.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.torn = true;
                if let Err(cut) = self.repair() {
                    tracing::warn!(
                        "event log {}: cannot cut a failed write back yet: {cut}",
                        self.layout.path.display()
                    );
                }
                Err(e)
            }
        }
    }

    /// Cuts a torn write off, so the next line starts on a line of its own.
    fn repair(&mut self) -> io::Result<()> {
        if !self.torn {
            return Ok(());
        }
        let committed = self.committed;
        let file = self.current()?;
        file.set_len(committed)?;
        file.seek(SeekFrom::Start(committed))?;
        self.torn = false;
        Ok(())
    }

    fn current(&mut self) -> io::Result<&mut File> {
        if self.file.is_none() {
            let (file, committed) = open_current(&self.layout.path)?;
            self.committed = committed;
            self.file = Some(file);
        }
        Ok(self.file.as_mut().expect("opened above"))
    }

    /// Moves every segment one number up (dropping the oldest) and starts
    /// an empty current one.
    fn rotate(&mut self) -> io::Result<()> {
        // Progress lines are written unsynced: make them durable before the
        // segment is closed for good.
        self.current()?.sync_data()?;
        let Layout { path, segments, .. } = self.layout.clone();
        if segments == 0 {
            let file = self.current()?;
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            self.committed = 0;
            return Ok(());
        }
        self.file = None;
        for n in (1..segments).rev() {
            rename_if_exists(&numbered(&path, n), &numbered(&path, n + 1))?;
        }
        fs::rename(&path, numbered(&path, 1))?;
        self.current()?;
        sync_dir(&path)
    }
}

/// Opens `path` for writing at the end of its last complete line.
fn open_current(path: &Path) -> io::Result<(File, u64)> {
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    let complete = complete_len(&mut file)?;
    file.set_len(complete)?;
    file.seek(SeekFrom::Start(complete))?;
    Ok((file, complete))
}

/// `PATH.n`.
pub(super) fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

fn rename_if_exists(from: &Path, to: &Path) -> io::Result<()> {
    match fs::rename(from, to) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Makes the renames and the new segment's name durable.
#[cfg(unix)]
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_path: &Path) -> io::Result<()> {
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(dir: &Path, rotate_bytes: u64, segments: usize) -> Layout {
        Layout {
            path: dir.join("events.jsonl"),
            rotate_bytes,
            segments,
        }
    }

    #[test]
    fn segments_rotate_before_a_write_would_pass_the_size_and_the_oldest_goes() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Segments::open(layout(dir.path(), 10, 2)).unwrap();
        for line in [
            "aaaa\n", "bbbb\n", "cccc\n", "dddd\n", "eeee\n", "ffff\n", "gggg\n",
        ] {
            log.append(line.as_bytes(), true).unwrap();
        }
        let read = |p: PathBuf| fs::read_to_string(p).unwrap();
        let path = dir.path().join("events.jsonl");
        assert_eq!(read(path.clone()), "gggg\n");
        assert_eq!(read(numbered(&path, 1)), "eeee\nffff\n");
        assert_eq!(read(numbered(&path, 2)), "cccc\ndddd\n");
        assert!(
            !numbered(&path, 3).exists(),
            "only two rotated segments kept"
        );
    }

    #[test]
    fn without_rotated_segments_the_log_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Segments::open(layout(dir.path(), 6, 0)).unwrap();
        log.append(b"aaaa\n", false).unwrap();
        log.append(b"bbbb\n", false).unwrap();
        let path = dir.path().join("events.jsonl");
        assert_eq!(fs::read_to_string(&path).unwrap(), "bbbb\n");
        assert!(!numbered(&path, 1).exists());
    }

    #[test]
    fn a_batch_larger_than_a_segment_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Segments::open(layout(dir.path(), 4, 1)).unwrap();
        log.append(b"aaaaaaaa\n", true).unwrap();
        log.append(b"bbbbbbbb\n", true).unwrap();
        let path = dir.path().join("events.jsonl");
        assert_eq!(fs::read_to_string(&path).unwrap(), "bbbbbbbb\n");
        assert_eq!(
            fs::read_to_string(numbered(&path, 1)).unwrap(),
            "aaaaaaaa\n"
        );
    }
}
