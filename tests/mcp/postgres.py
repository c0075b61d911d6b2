"""A real Postgres for the MCP client tests: the Python twin of
`tests/src/postgres.rs`. `Postgres.start()` `initdb`s a private cluster into
a fresh directory under `target/tmp/postgres/`, starts it on a free port of
127.0.0.1 (TCP only, no unix socket, trust authentication, superuser and
database `toolhost`) and waits until it accepts connections; `url` is
`postgres://toolhost@127.0.0.1:PORT/toolhost`. `stop()` (fast shutdown, the
data stays), `restart()` (same port and data) and `close()` (stop, then
remove the directory); `postgres_cluster()` is a context manager that
closes it however the body ends.

It needs the Debian package `postgresql` (`.ci/run` installs it): the
binaries of the newest `/usr/lib/postgresql/*/bin`, else `pg_config
--bindir`, else `PATH`. Postgres refuses to run as root, so as root
`initdb`, `postgres` and `pg_ctl` run as `nobody` through util-linux's
`setpriv` and the cluster's directory is theirs; the clients (`psql`,
`pg_isready`) run as the current user. Every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The role and the database every cluster has.
NAME = "toolhost"
#: How long a start, a stop or a query may take: far beyond what it needs.
PATIENCE = 60.0
#: How many free ports a start tries when another process takes the one it
#: found between finding and binding it.
PORT_TRIES = 5
_PROGRAMS = ("initdb", "postgres", "pg_ctl", "pg_isready", "psql")


def repo() -> Path:
    return Path(__file__).resolve().parents[2]


def target() -> Path:
    t = os.environ.get("CARGO_TARGET_DIR")
    if not t:
        return repo() / "target"
    return Path(t) if Path(t).is_absolute() else repo() / t


def bindir() -> Path:
    """The newest `/usr/lib/postgresql/*/bin`, else `pg_config --bindir`,
    else the directory on PATH holding all of the programs."""

    def complete(d: Path) -> bool:
        return all((d / p).is_file() for p in _PROGRAMS)

    versions = []
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        for e in root.iterdir():
            if e.name.isdigit() and complete(e / "bin"):
                versions.append((int(e.name), e / "bin"))
    if versions:
        return max(versions)[1]
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and complete(Path(out.stdout.strip())):
            return Path(out.stdout.strip())
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d and complete(Path(d)):
            return Path(d)
    raise RuntimeError(
        "the Postgres server is not installed (no initdb, postgres, pg_ctl, pg_isready and psql in "
        "/usr/lib/postgresql/*/bin, `pg_config --bindir` or PATH): install the Debian package "
        "`postgresql` (apt-get install postgresql; .ci/run installs it)"
    )


def free_port() -> int:
    """A port free on 127.0.0.1 now (the OS's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nobody() -> tuple[int, int] | None:
    """`nobody`'s uid and gid when we are root (whom Postgres refuses)."""
    if os.geteuid() != 0:
        return None
    import pwd

    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def _reachable(d: Path) -> None:
    """Makes `d` and the directories above it searchable by others (nobody)
    where they are ours, under the target directory; fails naming one above
    it that is not."""
    tgt = target().resolve()
    for a in [d, *d.parents]:
        try:
            mode = a.stat().st_mode
        except OSError:
            continue
        if mode & 0o001:
            continue
        if a.resolve().is_relative_to(tgt):
            a.chmod(mode | 0o001)
        else:
            raise RuntimeError(
                f"Postgres runs as nobody (the tests run as root), who cannot reach {d}: "
                f"{a} is not searchable by others"
            )


def _wait_until(predicate, timeout: float, step: float = 0.05) -> bool:
    """Polls `predicate` until it is true, at most `timeout` (the pause is
    the poll's interval)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


class Postgres:
    """A private cluster, running from `start()` until `stop()` or
    `close()`; its data outlives a stop, not the close."""

    def __init__(self, directory: Path, bin: Path, user: tuple[int, int] | None) -> None:
        self.dir = directory
        self.bin = bin
        self.user = user
        self.port = 0
        self.server: subprocess.Popen[bytes] | None = None

    # --- the public API ---------------------------------------------------

    @classmethod
    def start(cls) -> Postgres:
        bin = bindir()
        user = _nobody()
        root = target() / "tmp" / "postgres"
        root.mkdir(parents=True, exist_ok=True)
        directory = Path(tempfile.mkdtemp(prefix="cluster-", dir=root))
        pg = cls(directory, bin, user)
        try:
            if user is not None:
                _reachable(root)
                os.chown(directory, *user)
            pg._initdb()
            for tries in range(1, PORT_TRIES + 1):
                pg.port = free_port()
                if pg._launch():
                    break
                if tries == PORT_TRIES:
                    raise RuntimeError(f"Postgres found each of {PORT_TRIES} free ports taken; its log:\n{pg.log()}")
            pg._psql_in("postgres", f"CREATE DATABASE {NAME}")
        except BaseException:
            pg.close()
            raise
        return pg

    @property
    def url(self) -> str:
        return f"postgres://{NAME}@127.0.0.1:{self.port}/{NAME}"

    def psql(self, sql: str) -> str:
        """Runs `sql` in the database `toolhost`; returns what psql printed
        (unaligned, tuples only: `select 1` gives "1\\n"). Raises with its
        stderr when it fails."""
        return self._psql_in(NAME, sql)

    def stop(self) -> None:
        """Fast shutdown; the data stays. Nothing when it is stopped."""
        self._shutdown()

    def restart(self) -> None:
        """Starts it again after `stop()`, on the same port and data."""
        if self.server is not None:
            return
        if not self._launch():
            raise RuntimeError(f"Postgres could not restart: port {self.port} is taken; its log:\n{self.log()}")

    def close(self) -> None:
        """Stops the server and removes the cluster's directory."""
        try:
            self._shutdown()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        try:
            return (self.dir / "postgres.log").read_text(errors="replace")
        except OSError as e:
            return f"(no log: {e})"

    # --- how ----------------------------------------------------------------

    @property
    def data(self) -> Path:
        return self.dir / "data"

    def _server_command(self, program: str, *args: str) -> list[str]:
        path = str(self.bin / program)
        if self.user is None:
            return [path, *args]
        uid, gid = self.user
        return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", path, *args]

    def _server_env(self) -> dict[str, str]:
        # A locale the machine may lack would stop initdb and the server.
        env = {k: v for k, v in os.environ.items() if k != "PGDATA"}
        env["LC_ALL"] = "C"
        return env

    def _initdb(self) -> None:
        done = subprocess.run(
            self._server_command(
                "initdb", "--pgdata", str(self.data), "--username", NAME, "--auth=trust", "--encoding=UTF8",
                "--locale=C", "--no-sync", "--no-instructions",
            ),
            cwd=self.dir, env=self._server_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=PATIENCE,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"initdb into {self.data} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        # We write the configuration; the server only reads it.
        (self.data / "pg_hba.conf").write_text("# toolhost tests: trust, on 127.0.0.1 only.\nhost all all 127.0.0.1/32 trust\n")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# toolhost tests (the port is given on the command line)\n"
                "listen_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"
            )

    def _launch(self) -> bool:
        """Starts the postmaster on `self.port` and waits until it accepts
        connections: True; False when the port was taken; raises otherwise."""
        log_path = self.dir / "postgres.log"
        before = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:
            child = subprocess.Popen(
                self._server_command("postgres", "-D", str(self.data), "-p", str(self.port)),
                cwd=self.dir, env=self._server_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            )  # fmt: skip
        ready = _wait_until(lambda: child.poll() is not None or self._accepting(), PATIENCE)
        if child.poll() is not None:
            this_start = self.log()[before:]
            if "could not bind" in this_start or "already in use" in this_start:
                return False
            raise RuntimeError(f"postgres exited ({child.returncode}) instead of starting; its log:\n{self.log()}")
        if not ready:
            child.kill()
            child.wait(timeout=10)
            raise RuntimeError(
                f"postgres did not accept connections on port {self.port} within {PATIENCE}s; its log:\n{self.log()}"
            )
        self.server = child
        return True

    def _accepting(self) -> bool:
        done = subprocess.run(
            [str(self.bin / "pg_isready"), "--host", "127.0.0.1", "--port", str(self.port),
             "--username", NAME, "--dbname", "postgres", "--timeout", "5"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30,
        )  # fmt: skip
        return done.returncode == 0

    def _psql_in(self, database: str, sql: str) -> str:
        done = subprocess.run(
            [str(self.bin / "psql"), "--host", "127.0.0.1", "--port", str(self.port), "--username", NAME,
             "--dbname", database, "--no-psqlrc", "--no-password", "--tuples-only", "--no-align",
             "--set", "ON_ERROR_STOP=1", "--command", sql],
            env={**os.environ, "PGCONNECT_TIMEOUT": "10"}, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=PATIENCE,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"psql {sql!r} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def _shutdown(self) -> None:
        """Fast shutdown with pg_ctl, then reaps the postmaster; kills it
        when it does not stop."""
        child, self.server = self.server, None
        if child is None:
            return
        try:
            stopped = subprocess.run(
                self._server_command("pg_ctl", "stop", "--pgdata", str(self.data), "--mode=fast", "--wait",
                                     "--timeout", str(int(PATIENCE))),
                cwd=self.dir, env=self._server_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, timeout=PATIENCE + 10,
            ).returncode == 0  # fmt: skip
        except subprocess.TimeoutExpired:
            stopped = False
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            stopped = False
        if not stopped or child.poll() is None:
            child.kill()
            child.wait(timeout=10)


@contextmanager
def postgres_cluster() -> Iterator[Postgres]:
    """A fresh private cluster for the body, stopped and removed after it."""
    pg = Postgres.start()
    try:
        yield pg
    finally:
        pg.close()
