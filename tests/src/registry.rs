//! A real OCI registry for the tests: the CNCF distribution registry from
//! Debian (`docker-registry`, `/usr/bin/docker-registry`), one per
//! [`Registry`], storing into a fresh directory under the workspace's
//! `target/tmp/registry/`, listening on a free loopback port over plain
//! HTTP, or HTTPS with a given certificate, optionally behind basic
//! authentication ([`Options`]), stopped (killed and reaped) and removed when dropped, even when
//! the test panics. No mocks of the registry.
//!
//! As root (CI) the server runs as `nobody` through util-linux's `setpriv`
//! and its directory is theirs, as the Postgres harness does; otherwise as
//! the current user. The API is synchronous, `std::process` only.

use std::fs;
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use crate::postgres::{User, free_port, reachable, target, unprivileged};
use crate::wait::{PATIENCE, wait_until};

/// The registry binary the Debian package installs.
const BINARY: &str = "/usr/bin/docker-registry";

/// How many free ports [`Registry::start`] tries when another process takes
/// the one it found between finding and binding it.
const PORT_TRIES: usize = 5;

/// How a registry serves: TLS with a certificate and key (PEM), and basic
/// authentication of one user (a bcrypt htpasswd entry is made of it).
#[derive(Debug, Default)]
pub struct Options {
    /// The server certificate chain and its key, both PEM.
    pub tls: Option<(String, String)>,
    /// The one user and password it accepts.
    pub user: Option<(String, String)>,
}

/// A private registry, running from [`Registry::start`] until
/// [`Registry::stop`] or its drop.
#[derive(Debug)]
pub struct Registry {
    /// Its storage, configuration and log, removed on drop after the
    /// server has stopped.
    dir: tempfile::TempDir,
    user: Option<User>,
    port: u16,
    server: Mutex<Option<Child>>,
    options: Options,
}

impl Registry {
    /// Starts a registry with empty storage on a free loopback port and
    /// waits (within [`PATIENCE`]) until it answers `GET /v2/`. Panics with
    /// what went wrong; when it is not installed, with the package to
    /// install.
    pub fn start() -> Registry {
        Registry::start_with(Options::default())
    }

    /// [`Registry::start`], serving as `options` say.
    pub fn start_with(options: Options) -> Registry {
        assert!(
            std::path::Path::new(BINARY).is_file(),
            "the OCI registry is not installed ({BINARY}): install the Debian package \
             `docker-registry` (apt-get install docker-registry; .ci/run installs it)"
        );
        let user = unprivileged();
        let root = target().join("tmp").join("registry");
        fs::create_dir_all(&root).unwrap_or_else(|e| panic!("creating {}: {e}", root.display()));
        let dir = tempfile::Builder::new()
            .prefix("registry-")
            .tempdir_in(&root)
            .unwrap_or_else(|e| panic!("creating a directory in {}: {e}", root.display()));
        fs::create_dir(dir.path().join("data")).expect("creating the storage directory");
        if let Some(user) = &user {
            reachable(&root);
            for d in [dir.path().to_owned(), dir.path().join("data")] {
                std::os::unix::fs::chown(&d, Some(user.uid), Some(user.gid))
                    .unwrap_or_else(|e| panic!("handing {} to nobody: {e}", d.display()));
            }
        }
        let mut registry = Registry {
            dir,
            user,
            port: 0,
            server: Mutex::new(None),
            options,
        };
        for tries in 1.. {
            registry.port = free_port();
            match registry.launch() {
                Ok(()) => break,
                Err(Launch::PortTaken) if tries < PORT_TRIES => continue,
                Err(Launch::PortTaken) => panic!(
                    "the registry found each of {PORT_TRIES} free ports taken; its log:\n{}",
                    registry.log()
                ),
                Err(Launch::Failed(why)) => panic!("{why}"),
            }
        }
        registry
    }

    /// `127.0.0.1:PORT`: the registry part of an `oci://` reference.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The file the registry serves the blob `digest` (`sha256:HEX`) from,
    /// to tamper with.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Stops the server (killed: it keeps nothing in memory worth a
    /// graceful stop) and reaps it. Does nothing when it is stopped.
    pub fn stop(&self) {
        let mut server = self.server.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut child) = server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("registry.log"))
            .unwrap_or_else(|e| format!("(no log: {e})"))
    }

    fn launch(&self) -> Result<(), Launch> {
        let config = self.dir.path().join("config.yml");
        let mut yaml = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{}\n",
            self.dir.path().join("data").display(),
            self.port
        );
        if let Some((certificate, key)) = &self.options.tls {
            let (cert_file, key_file) = (
                self.dir.path().join("tls.crt"),
                self.dir.path().join("tls.key"),
            );
            fs::write(&cert_file, certificate).expect("writing the certificate");
            fs::write(&key_file, key).expect("writing the key");
            yaml += &format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                cert_file.display(),
                key_file.display()
            );
        }
        if let Some((user, password)) = &self.options.user {
            let file = self.dir.path().join("htpasswd");
            let hash = bcrypt::hash(password, 4).expect("a bcrypt hash");
            fs::write(&file, format!("{user}:{hash}\n")).expect("writing htpasswd");
            yaml += &format!(
                "auth:\n  htpasswd:\n    realm: toolhost-tests\n    path: {}\n",
                file.display()
            );
        }
        fs::write(&config, yaml).expect("writing the registry's configuration");
        let log = fs::File::create(self.dir.path().join("registry.log"))
            .expect("creating the registry's log");
        let err = log.try_clone().expect("duplicating the log's handle");
        let mut command = match &self.user {
            Some(user) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={}", user.uid))
                    .arg(format!("--regid={}", user.gid))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(BINARY);
                c
            }
            None => Command::new(BINARY),
        };
        let mut child = command
            .arg("serve")
            .arg(&config)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| Launch::Failed(format!("starting {BINARY}: {e}")))?;
        let mut exited = None;
        let ready = wait_until(PATIENCE, || match child.try_wait() {
            Ok(Some(status)) => {
                exited = Some(status);
                true
            }
            _ => self.answering(),
        });
        if let Some(status) = exited {
            let log = self.log();
            if log.contains("address already in use") {
                return Err(Launch::PortTaken);
            }
            return Err(Launch::Failed(format!(
                "the registry exited ({status}) instead of starting; its log:\n{log}"
            )));
        }
        if !ready {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Launch::Failed(format!(
                "the registry did not answer on port {} within {PATIENCE:?}; its log:\n{}",
                self.port,
                self.log()
            )));
        }
        *self.server.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
        Ok(())
    }

    /// Whether it answers HTTP at all: `GET /v2/` in plain HTTP gets an
    /// HTTP response (200; 401 behind authentication; 400 from a TLS port).
    fn answering(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let request = format!(
            "GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.port
        );
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut head = [0u8; 7];
        stream.read_exact(&mut head).is_ok() && &head == b"HTTP/1."
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `sha256:HEX` of `bytes`: how a registry names a blob or manifest.
pub fn digest(bytes: &[u8]) -> String {
    let hash = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Why a start failed.
enum Launch {
    /// Another process took the port: try another.
    PortTaken,
    Failed(String),
}
