//! Stdin and stdout as the runtime reads and writes them. tokio's own
//! `Stdin` and `Stdout` run every read and write on its blocking pool: two
//! thread hand-offs per message, each a wake-up that costs a call tens of
//! microseconds on a small VM. A pipe (what an MCP client spawns its server
//! with) is read and written through the runtime's poller instead; anything
//! else (a terminal, a file, a socket) keeps tokio's.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt as _;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// Where stdin's bytes come from.
pub(super) type Input = Pin<Box<dyn AsyncRead + Send>>;

/// Where stdout's bytes go.
pub(super) type Output = Pin<Box<dyn AsyncWrite + Send>>;

/// Stdin: the pipe itself when it is one.
pub(super) fn input() -> Input {
    match io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
    {
        Ok(pipe) => Box::pin(pipe),
        Err(_) => Box::pin(tokio::io::stdin()),
    }
}

/// Stdout: the pipe itself when it is one that stderr does not share.
pub(super) fn output() -> Output {
    match polled_stdout() {
        Ok(pipe) => Box::pin(pipe),
        Err(_) => Box::pin(tokio::io::stdout()),
    }
}

/// Stdout as a non-blocking pipe, unless stderr writes to the same one:
/// then non-blocking mode would make stderr's writes fail when it is full.
fn polled_stdout() -> io::Result<pipe::Sender> {
    let stdout = io::stdout().as_fd().try_clone_to_owned()?;
    if same_file(stdout.as_fd(), io::stderr().as_fd())? {
        return Err(io::Error::other("stderr writes to the same pipe"));
    }
    pipe::Sender::from_owned_fd(stdout)
}

/// Whether two descriptors name the same file (here, the same pipe).
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> io::Result<bool> {
    let a = File::from(a.try_clone_to_owned()?).metadata()?;
    let b = File::from(b.try_clone_to_owned()?).metadata()?;
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}
