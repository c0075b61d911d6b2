//! Stdin and stdout as the runtime reads and writes them. tokio's own
//! `Stdin` and `Stdout` run every read and write on its blocking pool: two
//! thread hand-offs per message, each a wake-up that costs a call tens of
//! microseconds on a small VM. A pipe (what an MCP client spawns its server
//! with) is read and written through the runtime's poller instead; anything
//! else (a terminal, a file) keeps tokio's.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
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

/// Stdout: the pipe itself when it is one that stderr does not share
/// (putting it in non-blocking mode would make stderr's writes fail when
/// the pipe is full).
pub(super) fn output() -> Output {
    let pipe = io::stdout().as_fd().try_clone_to_owned().and_then(|out| {
        match shares_pipe(&out, io::stderr().as_fd()) {
            Ok(false) => pipe::Sender::from_owned_fd(out),
            Ok(true) => Err(io::Error::other("stderr writes to the same pipe")),
            Err(e) => Err(e),
        }
    });
    match pipe {
        Ok(pipe) => Box::pin(pipe),
        Err(_) => Box::pin(tokio::io::stdout()),
    }
}

/// Whether `other` is the same file (pipe) as `fd`.
fn shares_pipe(fd: &OwnedFd, other: BorrowedFd<'_>) -> io::Result<bool> {
    let this = File::from(fd.try_clone()?).metadata()?;
    let that = File::from(other.try_clone_to_owned()?).metadata()?;
    Ok(this.dev() == that.dev() && this.ino() == that.ino())
}
