//! A real Postgres for the tests: a private cluster per [`Postgres`],
//! `initdb`'d into a fresh directory under the workspace's
//! `target/tmp/postgres/`, listening on a free loopback port (TCP on
//! 127.0.0.1 only, no unix socket, trust authentication), stopped and
//! removed when dropped, even when the test panics. No mocks of the database.
//!
//! It needs the Debian package `postgresql` (`.ci/run` installs it): the
//! binaries are looked up in the newest `/usr/lib/postgresql/*/bin`, then in
//! `pg_config --bindir`, then on `PATH`. Postgres refuses to run as root and
//! CI runs as root, so as root the server, `initdb` and `pg_ctl` run as
//! `nobody` (through util-linux's `setpriv`) and the cluster's directory is
//! theirs; otherwise they run as the current user. The clients (`psql`,
//! `pg_isready`) run as the current user.
//!
//! The API is synchronous, `std::process` only: call it from a test, with or
//! without a runtime.

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use crate::wait::{PATIENCE, wait_until};

/// The role and the database every cluster has.
const NAME: &str = "toolhost";

/// How many free ports [`Postgres::start`] tries when another process takes
/// the one it found between finding and binding it.
const PORT_TRIES: usize = 5;

/// A private Postgres cluster, running from [`Postgres::start`] until
/// [`Postgres::stop`] or its drop; its data outlives a stop, not the drop.
#[derive(Debug)]
pub struct Postgres {
    /// The cluster's own directory (data, log), removed on drop, after the
    /// server has stopped (fields drop after [`Drop::drop`]).
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// Who runs the server: `None` is the current user.
    user: Option<User>,
    port: u16,
    /// The running postmaster, when it runs.
    server: Mutex<Option<Child>>,
}

/// An unprivileged user to run the server as (the current one is root).
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

impl Postgres {
    /// Starts a fresh private cluster (`initdb` each time, into a unique
    /// directory under `target/tmp/postgres/`) on a free loopback port, waits
    /// (within [`PATIENCE`]) until it accepts connections, and creates the
    /// database `toolhost`, owned by the superuser `toolhost`. Panics, with
    /// what went wrong, when it cannot; when Postgres is not installed, with
    /// the package to install.
    pub fn start() -> Postgres {
        let bin = bindir();
        let user = unprivileged();
        let root = target().join("tmp").join("postgres");
        fs::create_dir_all(&root).unwrap_or_else(|e| panic!("creating {}: {e}", root.display()));
        let dir = tempfile::Builder::new()
            .prefix("cluster-")
            .tempdir_in(&root)
            .unwrap_or_else(|e| panic!("creating a directory in {}: {e}", root.display()));
        if let Some(user) = &user {
            reachable(&root);
            std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid))
                .unwrap_or_else(|e| panic!("handing {} to nobody: {e}", dir.path().display()));
        }
        let mut postgres = Postgres {
            dir,
            bin,
            user,
            port: 0,
            server: Mutex::new(None),
        };
        postgres.initdb();
        let mut tries = 0;
        loop {
            tries += 1;
            postgres.port = free_port();
            match postgres.launch() {
                Ok(()) => break,
                Err(Launch::PortTaken) if tries < PORT_TRIES => continue,
                Err(Launch::PortTaken) => panic!(
                    "Postgres found each of {PORT_TRIES} free ports taken; its log:\n{}",
                    postgres.log()
                ),
                Err(Launch::Failed(why)) => panic!("{why}"),
            }
        }
        postgres
            .psql_in("postgres", &format!("CREATE DATABASE {NAME}"))
            .unwrap_or_else(|e| panic!("creating the database {NAME}: {e}"));
        postgres
    }

    /// The connection URL: `postgres://toolhost@127.0.0.1:PORT/toolhost`.
    pub fn url(&self) -> String {
        format!("postgres://{NAME}@127.0.0.1:{}/{NAME}", self.port)
    }

    /// The port it listens on, on 127.0.0.1 (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Runs `sql` with `psql` in the database `toolhost` and returns what it
    /// printed (unaligned, tuples only: `select 1` gives `"1\n"`); `Err`
    /// with its stderr when it fails, such as when the server is down.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        self.psql_in(NAME, sql)
    }

    /// Stops the server (fast shutdown: open connections are cut) and waits
    /// for it to exit; the data stays. Does nothing when it is stopped.
    pub fn stop(&self) {
        if let Err(e) = self.shutdown() {
            panic!("{e}");
        }
    }

    /// Starts it again after [`Postgres::stop`], on the same port and data,
    /// and waits until it accepts connections. Does nothing when it runs.
    pub fn restart(&self) {
        if lock(&self.server).is_some() {
            return;
        }
        match self.launch() {
            Ok(()) => {}
            Err(Launch::PortTaken) => panic!(
                "Postgres could not restart: port {} is taken; its log:\n{}",
                self.port,
                self.log()
            ),
            Err(Launch::Failed(why)) => panic!("{why}"),
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// The server's log so far (its stdout and stderr, every start's).
    fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_else(|e| format!("(no log: {e})"))
    }

    /// A command running the server-side `program` as the server's user.
    fn server_command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut command = match &self.user {
            Some(user) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={}", user.uid))
                    .arg(format!("--regid={}", user.gid))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(program);
                c
            }
            None => Command::new(program),
        };
        // A locale the machine may lack would stop initdb and the server;
        // a cwd nobody cannot read would make them complain.
        command
            .env("LC_ALL", "C")
            .env_remove("PGDATA")
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        command
    }

    /// Creates the cluster: superuser `toolhost`, trust authentication, TCP
    /// on 127.0.0.1 only, no unix socket.
    fn initdb(&self) {
        let data = self.data();
        let out = self
            .server_command("initdb")
            .arg("--pgdata")
            .arg(&data)
            .args(["--username", NAME, "--auth=trust", "--encoding=UTF8"])
            .args(["--locale=C", "--no-sync", "--no-instructions"])
            .output()
            .unwrap_or_else(|e| panic!("running initdb: {e}"));
        if !out.status.success() {
            panic!(
                "initdb into {} failed ({}):\n{}{}",
                data.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Root writes the configuration; the server only reads it.
        fs::write(
            data.join("pg_hba.conf"),
            "# toolhost-tests: trust, on 127.0.0.1 only.\n\
             host all all 127.0.0.1/32 trust\n",
        )
        .expect("writing pg_hba.conf");
        let mut conf = OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .expect("opening postgresql.conf");
        conf.write_all(
            b"\n# toolhost-tests (the port is given on the command line)\n\
              listen_addresses = '127.0.0.1'\n\
              unix_socket_directories = ''\n",
        )
        .expect("writing postgresql.conf");
    }

    /// Starts the postmaster on `self.port` and waits until it accepts
    /// connections.
    fn launch(&self) -> Result<(), Launch> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("opening the server's log");
        let before = log.metadata().map(|m| m.len()).unwrap_or(0);
        let err = log.try_clone().expect("duplicating the log's handle");
        let mut child = self
            .server_command("postgres")
            .arg("-D")
            .arg(self.data())
            .arg("-p")
            .arg(self.port.to_string())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| Launch::Failed(format!("starting postgres: {e}")))?;
        let mut exited = None;
        let ready = wait_until(PATIENCE, || match child.try_wait() {
            Ok(Some(status)) => {
                exited = Some(status);
                true
            }
            _ => self.accepting(),
        });
        if let Some(status) = exited {
            let log = self.log();
            let this_start = log.get(before as usize..).unwrap_or(&log);
            if this_start.contains("could not bind") || this_start.contains("already in use") {
                return Err(Launch::PortTaken);
            }
            return Err(Launch::Failed(format!(
                "postgres exited ({status}) instead of starting; its log:\n{log}"
            )));
        }
        if !ready {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Launch::Failed(format!(
                "postgres did not accept connections on port {} within {PATIENCE:?}; its log:\n{}",
                self.port,
                self.log()
            )));
        }
        *lock(&self.server) = Some(child);
        Ok(())
    }

    /// Whether the server accepts connections (`pg_isready`).
    fn accepting(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--username", NAME, "--dbname", "postgres", "--timeout", "5"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn psql_in(&self, database: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--username", NAME, "--dbname", database])
            .args([
                "--no-psqlrc",
                "--no-password",
                "--tuples-only",
                "--no-align",
            ])
            .args(["--set", "ON_ERROR_STOP=1", "--command", sql])
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "psql {sql:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Fast shutdown with `pg_ctl`, then reaps the postmaster; kills it when
    /// it does not stop. Never panics: it runs in `drop`.
    fn shutdown(&self) -> Result<(), String> {
        let mut server = lock(&self.server);
        let Some(mut child) = server.take() else {
            return Ok(());
        };
        let stopped = self
            .server_command("pg_ctl")
            .arg("stop")
            .arg("--pgdata")
            .arg(self.data())
            .args(["--mode=fast", "--wait", "--timeout"])
            .arg(PATIENCE.as_secs().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let exited = wait_until(Duration::from_secs(10), || {
            !matches!(child.try_wait(), Ok(None))
        });
        if exited && stopped {
            return Ok(());
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(format!(
            "postgres did not stop within {PATIENCE:?} (pg_ctl stop {}), so it was killed; its log:\n{}",
            if stopped { "succeeded" } else { "failed" },
            self.log()
        ))
    }
}

impl Drop for Postgres {
    /// Stops the server; the directory goes with the `dir` field.
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            eprintln!("{e}");
        }
    }
}

/// Why a start failed.
enum Launch {
    /// Another process took the port: try another.
    PortTaken,
    Failed(String),
}

fn lock(server: &Mutex<Option<Child>>) -> std::sync::MutexGuard<'_, Option<Child>> {
    // A test that panicked while holding it leaves nothing half-done.
    server.lock().unwrap_or_else(|e| e.into_inner())
}

/// The directory of the Postgres server binaries: the newest
/// `/usr/lib/postgresql/*/bin`, else `pg_config --bindir`, else the one on
/// `PATH` holding `initdb`.
fn bindir() -> PathBuf {
    let complete = |dir: &Path| {
        ["initdb", "postgres", "pg_ctl", "pg_isready", "psql"]
            .iter()
            .all(|b| dir.join(b).is_file())
    };
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, bin)| complete(bin))
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && complete(&bin) {
            return bin;
        }
    }
    if let Some(bin) = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find(|dir| complete(dir))
    {
        return bin;
    }
    panic!(
        "the Postgres server is not installed (no initdb, postgres, pg_ctl, pg_isready and psql \
         in /usr/lib/postgresql/*/bin, `pg_config --bindir` or PATH): install the Debian \
         package `postgresql` (apt-get install postgresql; .ci/run installs it)"
    );
}

/// `nobody` when the tests run as root, whom Postgres refuses; else `None`.
pub(crate) fn unprivileged() -> Option<User> {
    if id(&["-u"]) != 0 {
        return None;
    }
    Some(User {
        uid: id(&["-u", "nobody"]),
        gid: id(&["-g", "nobody"]),
    })
}

fn id(args: &[&str]) -> u32 {
    let out = Command::new("id")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running id: {e}"));
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("`id {}` gave no number", args.join(" ")))
}

/// The workspace's target directory: `CARGO_TARGET_DIR` (relative to the
/// repository) or `target/`.
pub(crate) fn target() -> PathBuf {
    let repo = crate::repo();
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { repo.join(t) })
        .unwrap_or_else(|| repo.join("target"))
}

/// Makes `dir` and the directories above it traversable by `nobody`: adds
/// search permission for others to those under the target directory (ours),
/// and panics naming one above it that lacks it.
pub(crate) fn reachable(dir: &Path) {
    let target = target();
    for d in dir.ancestors() {
        let Ok(meta) = fs::metadata(d) else { continue };
        let mode = meta.permissions().mode();
        if mode & 0o001 != 0 {
            continue;
        }
        if d.starts_with(&target) {
            fs::set_permissions(d, fs::Permissions::from_mode(mode | 0o001))
                .unwrap_or_else(|e| panic!("making {} traversable: {e}", d.display()));
        } else {
            panic!(
                "the test servers run as nobody (the tests run as root), who cannot reach {}: {} is not \
                 searchable by others",
                dir.display(),
                d.display()
            );
        }
    }
}

/// A port free on 127.0.0.1 now (the OS's pick for port 0).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("binding a free loopback port")
        .port()
}

#[cfg(test)]
mod tests {
    use std::net::TcpStream;

    use super::*;

    #[test]
    fn starts_stops_and_restarts_a_private_cluster() {
        let pg = Postgres::start();
        assert_eq!(
            pg.url(),
            format!("postgres://toolhost@127.0.0.1:{}/toolhost", pg.port())
        );
        assert_eq!(pg.psql("select 1").unwrap(), "1\n");
        pg.psql("create table kept (v int); insert into kept values (42)")
            .unwrap();

        pg.stop();
        assert!(
            TcpStream::connect((Ipv4Addr::LOCALHOST, pg.port())).is_err(),
            "a stopped server refuses connections"
        );
        assert!(pg.psql("select 1").is_err());

        pg.restart();
        assert_eq!(pg.psql("select 1").unwrap(), "1\n");
        assert_eq!(
            pg.psql("select v from kept").unwrap(),
            "42\n",
            "the data stays"
        );

        let dir = pg.dir.path().to_owned();
        let port = pg.port();
        drop(pg);
        assert!(!dir.exists(), "the drop removes the cluster");
        assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
    }

    #[test]
    fn clusters_are_private() {
        let (a, b) = (Postgres::start(), Postgres::start());
        assert_ne!(a.port(), b.port());
        a.psql("create table only_a (v int)").unwrap();
        assert!(b.psql("select * from only_a").is_err());
    }

    #[test]
    fn a_panicking_test_still_stops_its_server() {
        let (dir, port) = std::panic::catch_unwind(|| {
            let pg = Postgres::start();
            let seen = (pg.dir.path().to_owned(), pg.port());
            std::panic::panic_any(seen);
        })
        .expect_err("it panicked")
        .downcast::<(PathBuf, u16)>()
        .map(|b| *b)
        .expect("what it saw");
        assert!(!dir.exists());
        assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
    }
}
