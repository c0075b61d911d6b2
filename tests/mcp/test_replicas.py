"""Replicas behind a load balancer (R39): three `toolhost serve --http`
replicas sharing one private Postgres (`postgres.py`) and one state key,
behind HAProxy running `deploy/haproxy/haproxy.cfg` (round robin for
stateless 2026-07-28 requests, 2025 sessions pinned by `Mcp-Session-Id`,
`/readyz` health checks).

- a permission ask answered by a retry that lands on another replica;
- a retained output produced through the balancer, read on another replica;
- a 2025 session stays on its replica; when that replica dies the session
  is "not found" (404) and a new session works;
- a bounded load run during which a replica is SIGKILLed and restarted:
  every call a client saw complete has exactly one outcome in Postgres;
- SIGTERM: `/readyz` turns 503 first, the call in flight finishes within
  `--grace`, new calls through the balancer succeed;
- the replicas' `/metrics` count exactly the calls made through the
  balancer, and no session id appears in them.

It needs the Debian packages `postgresql` and `haproxy` (`.ci/run` installs
both). `python tests/mcp/test_replicas.py --measure` (same environment as
pytest) prints settled echo calls/s through HAProxy with 1 and 3 replicas
(docs/deploy.md quotes it).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from front_door import MODERN, Client, wait_until
from postgres import Postgres, free_port, postgres_cluster, repo
from toolhost_mcp import LEGACY, HttpServer, connect_http, generated_text, start_http_server, text, within

PLUGINS = ("text_tools", "bulk_output", "chaos")
TEMPLATE = repo() / "deploy" / "haproxy" / "haproxy.cfg"
#: How long a replica has for calls in flight when it stops.
GRACE = 30
#: Budgets far beyond any call here (the slow `busy` of the SIGTERM test).
FLAGS = ("--fuel", "1000000000000000", "--timeout", "60s", "--grace", f"{GRACE}s")
#: Far beyond how long anything here takes on a loaded machine.
PATIENCE = 60.0

MARKER = re.compile(r"full output retained as toolhost-output:([0-9a-f]{32})\b")


def haproxy_bin() -> str:
    found = shutil.which("haproxy") or next(
        (p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if Path(p).is_file()), None
    )
    if not found:
        raise RuntimeError("HAProxy is not installed: apt-get install haproxy (.ci/run installs it)")
    return found


# --- the deployment -------------------------------------------------------------


def fill(template: str, listen: str, replicas: Sequence[str], stats: Path | None = None) -> str:
    """The configuration for these addresses: @LISTEN@ and one `server` line
    per replica (the template's lines beyond their number are dropped), and,
    for the tests, an admin socket to read the servers' states from."""
    lines = []
    for line in template.replace("@LISTEN@", listen).splitlines():
        found = re.search(r"@REPLICA(\d+)@", line)
        if found:
            n = int(found.group(1))
            if n > len(replicas):
                continue
            line = line.replace(found.group(0), replicas[n - 1])
        lines.append(line)
        if stats is not None and line.strip() == "global":
            lines.append(f"    stats socket {stats} mode 600 level admin")
    return "\n".join(lines) + "\n"


@dataclass
class Haproxy:
    process: subprocess.Popen[bytes]
    port: int
    workdir: Path
    stats: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def log(self) -> str:
        return (self.workdir / "stderr.log").read_text(errors="replace")[-4000:]

    def states(self) -> dict[str, str]:
        """Each server's state as HAProxy sees it now (`UP`, `DOWN`, ...)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.stats))
            s.sendall(b"show stat\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        rows = data.decode().lstrip("# ").splitlines()
        header = rows[0].split(",")
        out = {}
        for row in rows[1:]:
            cells = dict(zip(header, row.split(","), strict=False))
            if cells.get("pxname") == "toolhost" and cells.get("svname", "").startswith("replica"):
                out[cells["svname"]] = cells["status"]
        return out

    def wait_states(self, want: dict[str, str], what: str) -> None:
        def matches() -> bool:
            now = self.states()
            return all(now.get(k, "").startswith(v) for k, v in want.items())

        try:
            wait_until(matches, PATIENCE, what)
        except AssertionError:
            raise AssertionError(f"{what}: HAProxy sees {self.states()}; log:\n{self.log()}") from None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@contextmanager
def haproxy(workdir: Path, replicas: Sequence[int]) -> Iterator[Haproxy]:
    """HAProxy in the foreground on a free loopback port, in front of the
    replicas on these ports; stopped when the body ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    stats = workdir / "admin.sock"
    cfg = workdir / "haproxy.cfg"
    cfg.write_text(fill(TEMPLATE.read_text(), f"127.0.0.1:{port}", [f"127.0.0.1:{p}" for p in replicas], stats))
    check = subprocess.run([haproxy_bin(), "-c", "-q", "-f", str(cfg)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, f"haproxy -c refused {cfg}:\n{check.stdout}{check.stderr}"
    with open(workdir / "stderr.log", "wb") as log:
        process = subprocess.Popen(
            [haproxy_bin(), "-db", "-f", str(cfg)], stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    proxy = Haproxy(process, port, workdir, stats)
    try:
        wait_until(lambda: process.poll() is not None or stats.exists(), PATIENCE, "HAProxy to start")
        assert process.poll() is None, f"haproxy exited ({process.returncode}):\n{proxy.log()}"
        yield proxy
    finally:
        proxy.stop()


@dataclass
class Replica:
    name: str
    port: int
    workdir: Path
    flags: list[str]
    cache_dir: Path
    server: HttpServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.server = start_http_server(
            PLUGINS, self.workdir, self.cache_dir, flags=self.flags, address=f"127.0.0.1:{self.port}"
        )

    def alive(self) -> bool:
        return self.server is not None and self.server.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no grace, nothing flushed."""
        assert self.server is not None
        self.server.process.kill()
        self.server.process.wait(timeout=30)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def readyz(self) -> int | None:
        """`/readyz`'s status now; None when nothing answers."""
        try:
            return httpx2.get(self.base + "/readyz", timeout=5).status_code
        except httpx2.HTTPError:
            return None

    def outcomes(self) -> list[dict[str, Any]]:
        assert self.server is not None
        return self.server.events.outcomes()

    def served(self, call_id: str) -> list[dict[str, Any]]:
        """This replica's outcome events for the JSON-RPC request `call_id`."""
        return [e for e in self.outcomes() if e.get("context", {}).get("call_id") == call_id]


@dataclass
class Deployment:
    pg: Postgres
    replicas: list[Replica]
    proxy: Haproxy
    workdir: Path
    clients: list[Client] = field(default_factory=list)

    def client(self, url: str | None = None) -> Client:
        c = Client(url or self.proxy.url)
        self.clients.append(c)
        return c

    def healthy(self) -> None:
        """Every replica runs (restarted on its port when it died) and
        HAProxy sees every one of them up."""
        for r in self.replicas:
            if not r.alive():
                r.start()
        self.proxy.wait_states({r.name: "UP" for r in self.replicas}, "every replica up in HAProxy")

    def serving(self, call_id: str) -> list[str]:
        """The replicas with an outcome for `call_id`."""
        return [r.name for r in self.replicas if r.served(call_id)]

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)


@contextmanager
def deployment(workdir: Path, cache_dir: Path, count: int = 3, flags: Sequence[str] = FLAGS) -> Iterator[Deployment]:
    """A private Postgres, `count` replicas on ports of our choosing (so a
    replica restarts on its own port), one state key, HAProxy in front."""
    with ExitStack() as stack:
        pg = stack.enter_context(postgres_cluster())
        workdir.mkdir(parents=True, exist_ok=True)
        key = workdir / "state.key"
        key.write_text(secrets.token_hex(32) + "\n")
        replicas = []
        for n in range(1, count + 1):
            replica = Replica(
                f"replica{n}",
                free_port(),
                workdir / f"replica{n}",
                ["--store", pg.url, "--state-key-file", str(key), *flags],
                cache_dir,
            )
            stack.callback(replica.stop)
            replica.start()
            replicas.append(replica)
        proxy = stack.enter_context(haproxy(workdir / "haproxy", [r.port for r in replicas]))
        d = Deployment(pg, replicas, proxy, workdir)
        stack.callback(lambda: [c.close() for c in d.clients])
        d.healthy()
        yield d


@pytest.fixture(scope="module")
def deployed(module_dir: Path, cache_dir: Path) -> Iterator[Deployment]:
    with deployment(module_dir, cache_dir) as d:
        yield d


@pytest.fixture
def d(deployed: Deployment) -> Deployment:
    """The deployment, every replica up (a test before may have killed one)."""
    deployed.healthy()
    return deployed


# --- raw 2026-07-28 requests ----------------------------------------------------


def meta(session: str | None = None, message: str | None = None, forms: bool = False) -> dict[str, Any]:
    m: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}} if forms else {},
        "io.modelcontextprotocol/clientInfo": {"name": "replicas-test", "version": "1"},
    }
    if session:
        m["io.toolhost/session-id"] = session
    if message:
        m["io.toolhost/message-id"] = message
    return m


def request(
    client: Client, method: str, params: dict[str, Any], request_id: str, name: str = ""
) -> dict[str, Any]:
    """One stateless request; returns its JSON-RPC response (asserting 200)."""
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    reply = client.post(message, headers)
    assert reply.status == 200, f"{method}: {reply.status} {reply.body[:500]!r}"
    return reply.message()


def call(
    client: Client, tool: str, arguments: dict[str, Any], request_id: str | None = None, **params: Any
) -> tuple[str, dict[str, Any]]:
    """A stateless `tools/call`; returns its request id and its response."""
    request_id = request_id or uuid.uuid4().hex
    m = params.pop("_meta", None) or meta()
    body = {"name": tool, "arguments": arguments, "_meta": m, **params}
    return request_id, request(client, "tools/call", body, request_id, tool)


def result_text(response: dict[str, Any]) -> str:
    result = response.get("result") or {}
    assert result.get("isError") is False, response
    return "".join(c.get("text", "") for c in result["content"] if c.get("type") == "text")


async def eventually(what: str, condition: Any) -> Any:
    """Polls `condition` (bounded; the pause is the poll's interval)."""
    with within(what, PATIENCE):
        while not (value := condition()):
            await anyio.sleep(0.05)
    return value


# --- 1. a sealed approval across replicas ----------------------------------------


@pytest.mark.anyio
async def test_an_ask_answered_through_another_replica_completes(d: Deployment) -> None:
    client = d.client()
    arguments = {"action": "net", "resource": f"example.org/replicas/{uuid.uuid4().hex}"}
    asked_id, asked = call(client, "ask", arguments, _meta=meta(forms=True))
    result = asked.get("result") or {}
    assert result.get("resultType") == "input_required", asked
    assert "permission" in result["inputRequests"], asked
    retry_id, done = call(
        client,
        "ask",
        arguments,
        _meta=meta(forms=True),
        requestState=result["requestState"],
        inputResponses={"permission": {"action": "accept", "content": {"answer": "once"}}},
    )
    assert result_text(done) == "granted", done
    # Round robin sent the two requests to two replicas: the question's run
    # is recorded (interrupted) on one, the retry's completion on another.
    asked_on = await eventually("the ask's outcome on a replica", lambda: d.serving(asked_id))
    retried_on = await eventually("the retry's outcome on a replica", lambda: d.serving(retry_id))
    assert len(asked_on) == 1 and len(retried_on) == 1, (asked_on, retried_on)
    assert asked_on != retried_on, f"both requests reached {asked_on}: the balancer did not spread them"
    (outcome,) = d.replica(retried_on[0]).served(retry_id)
    assert outcome["status"] == "completed", outcome


# --- 2. a retained output read on another replica --------------------------------


PAGE = 700  # lines of 64 bytes: a page stays under the byte bound


@pytest.mark.anyio
@pytest.mark.parametrize("declared", [False, True], ids=["stateless", "declared-session"])
async def test_a_retained_output_is_read_on_another_replica(d: Deployment, declared: bool) -> None:
    session = uuid.uuid4().hex if declared else None
    size = 200_000
    produced_id, produced = call(d.client(), "generate", {"bytes": size}, _meta=meta(session))
    found = MARKER.search(result_text(produced))
    assert found, result_text(produced)[:300]
    ident = found.group(1)
    (producer,) = await eventually("the generate's outcome on a replica", lambda: d.serving(produced_id))
    others = [r for r in d.replicas if r.name != producer]
    expected = generated_text(size)

    # The resource, on one of the others.
    read = request(
        d.client(others[0].url),
        "resources/read",
        {"uri": f"toolhost://output/{ident}", "_meta": meta(session)},
        uuid.uuid4().hex,
        f"toolhost://output/{ident}",
    )
    contents = (read.get("result") or {}).get("contents")
    assert contents and contents[0].get("text") == expected, str(read)[:500]

    # read_output, page by page, on the other (straight to it: the built-in
    # tool leaves no outcome to tell where it ran).
    pages = []
    reader = d.client(others[1].url)
    for offset in range(0, expected.count("\n"), PAGE):
        _, page = call(reader, "read_output", {"id": ident, "offset": offset, "limit": PAGE}, _meta=meta(session))
        pages.append(result_text(page))
    assert "".join(pages) == expected


# --- 3. 2025 sessions are pinned; a dead replica's session is not found -----------


@pytest.mark.anyio
async def test_a_2025_session_stays_on_its_replica_and_is_not_found_when_it_dies(d: Deployment) -> None:
    front = HttpServer(d.proxy.process, d.proxy.url, d.proxy.workdir)
    async with connect_http(front, LEGACY) as conn:
        for n in range(30):
            result = await conn.client.call_tool("echo", {"message": f"sticky {n}"})
            assert text(result) == f"sticky {n}"
        (session,) = conn.session_ids

        def where() -> dict[str, int]:
            return {
                r.name: n
                for r in d.replicas
                if (n := sum(1 for e in r.outcomes() if e.get("context", {}).get("agent") == conn.agent))
            }

        spread = await eventually("the session's 30 outcomes", lambda: (w := where()) and sum(w.values()) == 30 and w)
        assert len(spread) == 1, f"one 2025 session's calls reached several replicas: {spread}"
        (home,) = spread
        d.replica(home).kill()

        # The balancer sends the session elsewhere, where it is not found.
        reply = d.client().post(
            {"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": {}},
            {"mcp-session-id": session, "mcp-protocol-version": LEGACY},
        )
        assert reply.status == 404, f"{reply.status} {reply.body[:300]!r}"
        assert b"no such session" in reply.body, reply.body
        # And the client sees its session end.
        # And the client hears its session ended (the SDK's reading of 404).
        with within("the old session's call to fail", PATIENCE), pytest.raises(MCPError, match="Session terminated"):
            await conn.client.call_tool("echo", {"message": "after the kill"})

    async with connect_http(front, LEGACY) as fresh:
        for n in range(3):
            result = await fresh.client.call_tool("echo", {"message": f"fresh {n}"})
            assert text(result) == f"fresh {n}"
        assert fresh.session_ids and fresh.session_ids[0] != session


# --- 4. a load run through a SIGKILL and a restart ---------------------------------


CLIENTS = 20
CALLS = 300
# Of every 20 calls: one bounded output (retained in full), two permission
# asks answered by a retry (two requests each, on two replicas), the rest echo.
ASKS = (7, 14)
OUTPUT = 19


@dataclass
class Seen:
    """What one call looked like to its client."""

    message_id: str
    completed: bool
    failure: str = ""
    retained: str | None = None
    asked: str | None = None  # the message id of an ask's first request


def load_call(client: Client, session: str, n: int, seen: Seen) -> None:
    """One call of the load run: an echo, a bounded output or an ask and
    its answered retry. Raises when its client sees it fail."""
    message_id = seen.message_id
    if n % 20 in ASKS:
        arguments = {"action": "net", "resource": f"example.org/load/{message_id}"}
        seen.asked = f"{message_id}-asked"
        _, asked = call(client, "ask", arguments, _meta=meta(session, seen.asked, forms=True))
        result = asked.get("result") or {}
        assert result.get("resultType") == "input_required", asked
        _, done = call(
            client,
            "ask",
            arguments,
            _meta=meta(session, message_id, forms=True),
            requestState=result["requestState"],
            inputResponses={"permission": {"action": "accept", "content": {"answer": "once"}}},
        )
        assert result_text(done) == "granted", done
    elif n % 20 == OUTPUT:
        _, reply = call(client, "generate", {"bytes": 100_000}, _meta=meta(session, message_id))
        found = MARKER.search(result_text(reply))
        assert found, result_text(reply)[:300]
        seen.retained = found.group(1)
    else:
        _, reply = call(client, "echo", {"message": message_id}, _meta=meta(session, message_id))
        assert result_text(reply) == message_id, reply


def load_client(d: Deployment, number: int, done: list[Seen], lock: threading.Lock) -> None:
    client = Client(d.proxy.url)
    session = f"load-{number}-{uuid.uuid4().hex[:8]}"
    try:
        for n in range(CALLS):
            seen = Seen(f"{session}-{n}", completed=False)
            try:
                load_call(client, session, n, seen)
                seen.completed = True
            except (AssertionError, httpx2.HTTPError) as e:
                seen.failure = f"{type(e).__name__}: {str(e)[:300]}"
            with lock:
                done.append(seen)
    finally:
        client.close()


def test_a_load_run_through_a_sigkill_loses_and_duplicates_nothing(d: Deployment) -> None:
    done: list[Seen] = []
    lock = threading.Lock()
    victim = d.replicas[1]
    total = CLIENTS * CALLS
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        futures = [pool.submit(load_client, d, n, done, lock) for n in range(CLIENTS)]
        wait_until(lambda: len(done) >= total // 4 or all(f.done() for f in futures), PATIENCE, "a quarter of the calls")
        victim.kill()
        killed_at = len(done)
        wait_until(lambda: len(done) >= killed_at + total // 8 or all(f.done() for f in futures), PATIENCE, "calls after the kill")
        victim.start()
        for f in futures:
            f.result(timeout=PATIENCE * 10)
    print(f"load: {total} calls, {victim.name} killed after {killed_at}, restarted; failed: {[s.failure for s in done if not s.completed]}")
    assert killed_at < total, "the load finished before the kill: nothing was tested"
    assert len(done) == total, "every call either completed or failed visibly"
    completed = [s for s in done if s.completed]
    failed = [s for s in done if not s.completed]
    # The balancer retries only where no replica got the request; calls in
    # flight on the killed replica fail, and those are few.
    assert len(completed) >= total - CLIENTS * 2, f"{len(failed)} failed: {[s.failure for s in failed][:5]}"

    dupes = d.pg.psql("SELECT message_id, count(*) FROM calls GROUP BY 1 HAVING count(*) > 1")
    assert dupes == "", f"message ids recorded more than once:\n{dupes}"
    rows = d.pg.psql("SELECT message_id, state, status FROM calls WHERE message_id LIKE 'load-%'")
    recorded = {line.split("|")[0]: line.split("|")[1:] for line in rows.splitlines() if line}
    for s in completed:
        assert s.message_id in recorded, f"{s.message_id} completed for its client but has no row"
        assert recorded[s.message_id] == ["done", "completed"], (s.message_id, recorded[s.message_id])
        if s.asked:
            assert s.asked in recorded, f"{s.asked}: the ask's first request has no row"
    asks = sum(1 for s in completed if s.asked)
    assert asks >= len(ASKS) * total // 20 - CLIENTS * 2, f"only {asks} asks completed"

    # No retained output is lost: each is readable through the balancer.
    d.healthy()
    reader = d.client()
    for s in completed:
        if s.retained:
            session = s.message_id.rsplit("-", 1)[0]
            _, page = call(reader, "read_output", {"id": s.retained, "limit": 1}, _meta=meta(session))
            assert result_text(page) == generated_text(64), s


# --- 5. SIGTERM: out of rotation first, the call in flight finishes -----------------


def test_sigterm_turns_readyz_first_and_the_call_in_flight_finishes(d: Deployment) -> None:
    slow = Client(d.proxy.url)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            slow_id = uuid.uuid4().hex
            # Some seconds of arithmetic: it runs while the stop begins.
            running = pool.submit(call, slow, "busy", {"iterations": 1_500_000_000}, slow_id)

            def started() -> list[Replica]:
                return [r for r in d.replicas if r.server.events.progress_for_call(slow_id)]

            (home,) = wait_until(started, PATIENCE, "busy to report that it started")
            stopping_at = time.monotonic()
            home.server.process.send_signal(signal.SIGTERM)
            wait_until(lambda: home.readyz() == 503, PATIENCE, "/readyz to say 503")
            assert not running.done(), "the slow call ended before /readyz said 503: make it slower"
            # HAProxy takes it out of rotation; new calls go elsewhere while
            # the slow call still runs. (Before the check notices, a request
            # may still reach it and get 503 with Retry-After: 1.)
            d.proxy.wait_states({home.name: "DOWN"}, "HAProxy to take the stopping replica out")
            client = d.client()
            for n in range(6):
                _, reply = call(client, "echo", {"message": f"during {n}"})
                assert result_text(reply) == f"during {n}"
            _, reply = running.result(timeout=GRACE + 15)
            assert (reply.get("result") or {}).get("isError") is False, reply
            assert "checksum" in json.loads(result_text(reply)), reply
            assert home.server.process.wait(timeout=GRACE + 15) == 0, home.server.stderr()[-2000:]
            took = time.monotonic() - stopping_at
            print(f"sigterm: the slow call and the stop took {took:.1f}s after SIGTERM")
            assert took < GRACE + 10
        (outcome,) = home.served(slow_id)
        assert outcome["status"] == "completed", outcome
        for n in range(3):
            _, reply = call(d.client(), "echo", {"message": f"after {n}"})
            assert result_text(reply) == f"after {n}"
    finally:
        slow.close()


# --- measuring (not a test) ---------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _postgres_cpu(pg: Postgres) -> float:
    """CPU seconds of the postmaster and its backends (those alive now)."""
    assert pg.server is not None
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if int(entry.name) == pg.server.pid or ppid == pg.server.pid:
                total += _cpu_seconds(int(entry.name))
        except (OSError, ValueError):
            continue
    return total


def measure(workdir: Path, cache_dir: Path, count: int, clients: int, calls: int) -> dict[str, float]:
    """Settled echo calls/s through HAProxy in front of `count` replicas:
    `clients` threads, each with its own keep-alive connection, `calls`
    stateless echo calls each."""
    with deployment(workdir, cache_dir, count, flags=()) as dep:
        warm = Client(dep.proxy.url)
        for n in range(20 * count):
            call(warm, "echo", {"message": "warm"}, _meta=meta(message=f"warm-{n}"))
        warm.close()
        pids = [r.server.process.pid for r in dep.replicas]
        before = sum(_cpu_seconds(p) for p in pids)
        proxy_before = _cpu_seconds(dep.proxy.process.pid)
        pg_before = _postgres_cpu(dep.pg)
        client_before = sum(os.times()[:2])

        def run(n: int) -> None:
            c = Client(dep.proxy.url)
            try:
                for i in range(calls):
                    _, reply = call(c, "echo", {"message": f"m{i}"}, request_id=f"r{i}", _meta=meta(message=f"{n}-{i}"))
                    assert result_text(reply) == f"m{i}"
            finally:
                c.close()

        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=clients) as pool:
            for f in [pool.submit(run, n) for n in range(clients)]:
                f.result(timeout=600)
        elapsed = time.monotonic() - start
        total = clients * calls
        settled = int(dep.pg.psql("SELECT count(*) FROM calls WHERE state = 'done' AND message_id NOT LIKE 'warm-%'"))
        assert settled == total, (settled, total)
        return {
            "replicas": count,
            "calls": total,
            "seconds": elapsed,
            "calls_per_s": total / elapsed,
            "replica_cpu_ms_per_call": 1000 * (sum(_cpu_seconds(p) for p in pids) - before) / total,
            "haproxy_cpu_ms_per_call": 1000 * (_cpu_seconds(dep.proxy.process.pid) - proxy_before) / total,
            "postgres_cpu_ms_per_call": 1000 * (_postgres_cpu(dep.pg) - pg_before) / total,
            "client_cpu_ms_per_call": 1000 * (sum(os.times()[:2]) - client_before) / total,
        }


def main() -> None:
    import tempfile

    from toolhost_mcp import ALL_PLUGINS, plugin, toolhost_bin

    clients = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 250
    root = Path(tempfile.mkdtemp(prefix="replicas-measure-"))
    cache = root / "cache"
    subprocess.run(
        [str(toolhost_bin()), "compile", *(str(plugin(p)) for p in ALL_PLUGINS), "--cache-dir", str(cache)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    try:
        for count in (1, 3):
            print(json.dumps(measure(root / f"r{count}", cache, count, clients, calls)), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] != ["--measure"]:
        sys.exit("usage: python tests/mcp/test_replicas.py --measure [CLIENTS [CALLS]]")
    main()


# --- 6. metrics through the balancer -----------------------------------------------

ECHOES = 'toolhost_calls_total{tool="echo",status="completed"}'


def echoes_counted(replica: Replica) -> tuple[float, str]:
    """The completed echo calls `/metrics` of `replica` counts, and the text."""
    body = httpx2.get(replica.base + "/metrics", timeout=5).text
    counted = sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith(ECHOES + " "))
    return counted, body


def test_metrics_of_the_replicas_count_the_calls_made_through_the_balancer(d: Deployment) -> None:
    before = [echoes_counted(r)[0] for r in d.replicas]
    client = d.client()
    session = uuid.uuid4().hex
    for i in range(30):
        _, response = call(client, "echo", {"message": f"m{i}"}, _meta=meta(session=session))
        assert result_text(response) == f"m{i}"
    after = [echoes_counted(r) for r in d.replicas]
    deltas = [a[0] - b for a, b in zip(after, before)]
    assert sum(deltas) == 30, f"the replicas counted {deltas} echo calls"
    assert sum(1 for n in deltas if n > 0) >= 2, f"round robin spread the calls: {deltas}"
    for _, body in after:
        assert session not in body, "no session id is ever a label"
