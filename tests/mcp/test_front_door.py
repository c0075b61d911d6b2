"""R37: what real and hostile network clients can do to `toolhost serve
--http`, with real sockets against the real binary, on loopback. Every test
here failed on the server before its front door was bounded."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from front_door import (
    MODERN,
    V2025_06_18,
    Client,
    open_socket,
    peak_rss_bytes,
    read_until_closed,
    request_head,
    rss_bytes,
    unique,
    wait_until,
)
from toolhost_mcp import EventLog, HttpServer, http_server, plugin, serve_command, server_env, start_http_server

TEXT = ("text_tools",)

MiB = 1 << 20


def retained_id(result: dict) -> str:
    """The retained-output id in a bounded result's omission marker."""
    text = "".join(part.get("text", "") for part in result["content"])
    found = re.search(r"toolhost-output:([0-9a-f]+)", text)
    assert found, f"no omission marker in {text[:300]!r}"
    return found.group(1)


def started(events: list[dict], agent: str | None = None) -> set[str]:
    """The call ids whose `busy` call reported that it started."""
    return {
        e["context"]["call_id"]
        for e in events
        if e.get("event") == "progress" and (agent is None or e["context"]["agent"] == agent)
    }


def chaos_manifest(workdir: Path, concurrency: int, timeout: str = "60s") -> Path:
    """The chaos plugin with `concurrency` slots and a call deadline."""
    workdir.mkdir(parents=True, exist_ok=True)
    manifest = workdir / "chaos.toml"
    manifest.write_text(f'path = "{plugin("chaos")}"\n\n[limits]\nconcurrency = {concurrency}\ntimeout = "{timeout}"\n')
    return manifest


# --- protocol details ----------------------------------------------------


def test_r37_a_2025_06_18_client_sees_no_empty_data_events(workdir: Path, cache_dir: Path) -> None:
    with http_server(TEXT, workdir, cache_dir) as server:
        client = Client(server.url)
        session = client.initialize(V2025_06_18)
        reply = session.call("echo", {"message": "primed?"})
        assert reply.status == 200
        assert reply.events, f"no SSE events in {reply.body!r}"
        for event in reply.events:
            assert event.get("data"), f"an event without data reached a {V2025_06_18} client: {event}"
        assert reply.message()["result"]["structuredContent"] == {"message": "primed?"}
        client.close()


def test_r37_a_2025_11_25_client_gets_resumable_streams(workdir: Path, cache_dir: Path) -> None:
    with http_server(TEXT, workdir, cache_dir) as server:
        client = Client(server.url)
        session = client.initialize("2025-11-25")
        reply = session.call("echo", {"message": "primed"})
        primers = [e for e in reply.events if not e.get("data") and "retry" in e]
        assert primers, f"no priming event for a 2025-11-25 client: {reply.events}"
        assert reply.message()["result"]["structuredContent"] == {"message": "primed"}
        client.close()


def test_r37_malformed_json_is_answered_400_with_a_parse_error(workdir: Path, cache_dir: Path) -> None:
    with http_server(TEXT, workdir, cache_dir) as server:
        client = Client(server.url)
        reply = client.post(b'{"jsonrpc": "2.0", "id": 1, "method": ')
        assert reply.status == 400
        error = json.loads(reply.body)["error"]
        assert error["code"] == -32700, error
        client.close()


def test_r37_origin_must_match_exactly(workdir: Path, cache_dir: Path) -> None:
    with http_server(TEXT, workdir, cache_dir) as server:
        client = Client(server.url)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for evil in (f"http://localhost:{server.port}.evil.example", "http://localhost.evil.example", "null"):
            assert client.post(ping, {"origin": evil}).status == 403, evil
        assert client.post(ping, {"origin": f"http://localhost:{server.port}"}).status != 403
        client.close()


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_r37_an_empty_token_is_refused_at_start(how: str, workdir: Path, cache_dir: Path) -> None:
    flags = ["--http", "127.0.0.1:0"] + (["--token", ""] if how == "flag" else [])
    env = server_env(workdir, {"TOOLHOST_TOKEN": ""} if how == "environment" else None)
    done = subprocess.run(
        serve_command(TEXT, flags, workdir, cache_dir), env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "token is empty" in done.stderr


# --- sessions -------------------------------------------------------------


def test_r37_a_session_is_honoured_only_with_the_token_that_made_it(workdir: Path, cache_dir: Path) -> None:
    with http_server(("bulk_output",), workdir, cache_dir, flags=["--token", "alice-token,mallory-token"]) as server:
        alice = Client(server.url, "alice-token")
        mallory = Client(server.url, "mallory-token")
        session = alice.initialize()
        output_id = retained_id(session.call("generate", {"bytes": 200_000, "lines": 5000}).message()["result"])
        # Mallory knows the session id but not Alice's token.
        stolen = mallory.post(
            {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "read_output", "arguments": {"id": output_id}}},
            session.headers(),
        )
        assert stolen.status == 404, (stolen.status, stolen.body[:300])
        own = session.call("read_output", {"id": output_id}).message()
        assert "error" not in own and not own["result"].get("isError"), own
        alice.close()
        mallory.close()


def test_r37_a_2026_request_never_resolves_a_2025_session(workdir: Path, cache_dir: Path) -> None:
    with http_server(("bulk_output",), workdir, cache_dir) as server:
        client = Client(server.url)
        session = client.initialize()
        output_id = retained_id(session.call("generate", {"bytes": 200_000, "lines": 5000}).message()["result"])
        # A stateless request that carries the 2025 session's header.
        reply = client.post(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {
                    "name": "read_output",
                    "arguments": {"id": output_id},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": MODERN,
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                },
            },
            {"mcp-session-id": session.id, "mcp-protocol-version": MODERN},
        )
        answer = reply.message()
        refused = "error" in answer or answer["result"].get("isError")
        assert refused, f"a 2026-07-28 request read the 2025 session's output: {answer}"
        client.close()


def test_r37_a_session_flood_is_capped_and_idle_sessions_are_freed(workdir: Path, cache_dir: Path) -> None:
    flags = ["--max-sessions", "50", "--session-idle", "2s"]
    with http_server(TEXT, workdir, cache_dir, flags=flags) as server:
        client = Client(server.url)
        first = client.initialize()
        big_info = "x" * (60 << 10)  # within the initialize bound, kept per session
        baseline = rss_bytes(server.process.pid)

        def flood() -> None:
            for _ in range(400):
                client.post(
                    {
                        "jsonrpc": "2.0",
                        "id": 0,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": V2025_06_18,
                            "capabilities": {},
                            "clientInfo": {"name": big_info, "version": "1"},
                        },
                    }
                )

        flood()
        after_first = rss_bytes(server.process.pid)
        # The first session was the oldest idle one: it made room.
        assert first.request("ping").status == 404
        # 400 sessions of 60 KiB would hold ~24 MiB and more; at most 50 live.
        assert after_first - baseline < 64 * MiB, (baseline, after_first)
        # An idle session expires, and then answers as unknown.
        late = client.initialize()
        # Each ping is a request, so polling faster than the expiry would
        # keep the session alive.
        wait_until(lambda: late.request("ping").status == 404, 20, "an idle session expires", step=2.5)
        flood()
        after_second = rss_bytes(server.process.pid)
        assert after_second - after_first < 32 * MiB, (after_first, after_second)
        client.close()


def test_r37_an_oversized_initialize_is_refused(workdir: Path, cache_dir: Path) -> None:
    with http_server(TEXT, workdir, cache_dir) as server:
        client = Client(server.url)
        reply = client.post(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "initialize",
                "params": {"protocolVersion": V2025_06_18, "capabilities": {}, "clientInfo": {"name": "x" * MiB, "version": "1"}},
            }
        )
        assert reply.status == 400
        assert json.loads(reply.body)["error"]["code"] == -32602
        client.close()


# --- connections and bodies ---------------------------------------------------


def test_r37_slowloris_at_a_low_descriptor_limit_locks_nobody_out(workdir: Path, cache_dir: Path) -> None:
    server = start_http_server(
        TEXT, workdir, cache_dir, flags=["--header-timeout", "1s"], wrap=["prlimit", "--nofile=128:128", "--"]
    )
    try:
        slow = []
        for _ in range(150):
            try:
                sock = open_socket(server.port)
                sock.sendall(f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{server.port}\r\nx-slow: ".encode())
                slow.append(sock)
            except OSError:
                break
        assert len(slow) >= 100, "the test could not open its slow connections"

        def initialize_ok() -> bool:
            try:
                client = Client(server.url)
                try:
                    return client.post(
                        {
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "initialize",
                            "params": {"protocolVersion": V2025_06_18, "capabilities": {}, "clientInfo": {"name": "n", "version": "1"}},
                        }
                    ).status == 200
                finally:
                    client.close()
            except OSError:
                return False

        wait_until(initialize_ok, 15, "a new client is served while slow ones hold connections", step=0.2)
        for sock in slow[:20]:
            read_until_closed(sock, 10)
            sock.close()
        for sock in slow[20:]:
            sock.close()
        assert server.process.poll() is None, server.stderr()
    finally:
        server.stop()


def test_r37_stalled_bodies_are_cut_and_bounded_in_memory(workdir: Path, cache_dir: Path) -> None:
    flags = ["--body-timeout", "1s", "--max-buffered", "48MiB"]
    with http_server(TEXT, workdir, cache_dir, flags=flags) as server:
        baseline = peak_rss_bytes(server.process.pid)
        chunk = b"x" * MiB
        socks = []
        for _ in range(16):
            sock = open_socket(server.port)
            sock.sendall(request_head(server.port, 16 * MiB))
            try:
                for _ in range(15):
                    sock.sendall(chunk)
            except OSError:
                pass  # refused over budget: the server closed it
            socks.append(sock)
        statuses = []
        for sock in socks:
            reply = read_until_closed(sock, 15)
            statuses.append(reply.split(b" ", 2)[1] if reply.startswith(b"HTTP/1.1 ") else b"closed")
            sock.close()
        assert set(statuses) <= {b"408", b"503", b"closed"}, statuses
        assert b"408" in statuses, statuses
        grown = peak_rss_bytes(server.process.pid) - baseline
        # 16 stalled bodies of 15 MiB are 240 MiB; the budget holds 48.
        assert grown < 160 * MiB, f"peak RSS grew by {grown >> 20} MiB"


def test_r37_a_trickled_body_is_cut_at_the_body_deadline(workdir: Path, cache_dir: Path) -> None:
    flags = ["--body-timeout", "5s", "--body-deadline", "2s"]
    with http_server(TEXT, workdir, cache_dir, flags=flags) as server:
        sock = open_socket(server.port)
        sock.sendall(request_head(server.port, 1000))
        cut = threading.Event()

        def trickle() -> None:
            for _ in range(200):
                if cut.is_set():
                    return
                try:
                    sock.sendall(b" ")
                except OSError:
                    return
                time.sleep(0.25)  # the hostile client's pace, not an ordering

        feeder = threading.Thread(target=trickle)
        feeder.start()
        try:
            reply = read_until_closed(sock, 20)
        finally:
            cut.set()
            feeder.join(timeout=10)
            sock.close()
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]


def test_r37_queued_inputs_count_what_they_cost_parsed_not_their_wire_bytes(workdir: Path, cache_dir: Path) -> None:
    # The blocker holds the plugin's one slot until its deadline; the calls
    # queued behind it share that deadline, so every call ends by itself.
    manifest = chaos_manifest(workdir, concurrency=1, timeout="10s")
    with http_server((manifest,), workdir, cache_dir) as server:
        blocker = Client(server.url)
        session = blocker.initialize()
        spinning = ThreadPoolExecutor(max_workers=1).submit(session.call, "busy", {})
        wait_until(lambda: started(server.events.read()), 30, "the blocker started")
        baseline = peak_rss_bytes(server.process.pid)
        text = "y" * (15 * MiB)

        def queued_call(_: int) -> tuple[int, dict]:
            client = Client(server.url)
            try:
                reply = client.stateless_call("print", {"stdout": text, "stderr": ""}, 1, unique("queued"))
                return reply.status, (json.loads(reply.body) if reply.status != 200 else reply.message())
            finally:
                client.close()

        with ThreadPoolExecutor(max_workers=40) as pool:
            replies = list(pool.map(queued_call, range(40)))
        refused = [body for status, body in replies if status == 503]
        answered = [body for status, body in replies if status == 200]
        # A held 15 MiB input costs its bytes, its parsed value and the
        # call's input text: the default 256 MiB budget holds five at once,
        # not seventeen; the others were refused while the blocker ran.
        assert refused and all(body["error"]["code"] == -32003 for body in refused), replies
        assert len(refused) + len(answered) == 40, [status for status, _ in replies]
        grown = peak_rss_bytes(server.process.pid) - baseline
        assert grown < 320 * MiB, f"peak RSS grew by {grown >> 20} MiB with 40 queued 15 MiB inputs"
        assert spinning.result(timeout=60).status == 200
        blocker.close()


def test_r37_a_body_of_small_values_is_charged_what_it_parses_into(workdir: Path, cache_dir: Path) -> None:
    # 4 MiB of `0,` parses into two million values (~200 MiB): more than
    # the whole budget, so it is refused for good, before anything parses it.
    with http_server(TEXT, workdir, cache_dir, flags=["--max-buffered", "64MiB"]) as server:
        client = Client(server.url)
        zeros = "[" + "0," * (2 * MiB) + "0]"
        meta = json.dumps(
            {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "dense", "version": "1"},
            }
        )
        body = (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":'
            + meta
            + ',"arguments":{"message":"x","n":'
            + zeros
            + "}}}"
        )
        baseline = peak_rss_bytes(server.process.pid)
        headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
        reply = client.post(body.encode(), headers)
        assert reply.status == 413, (reply.status, reply.body[:300])
        assert b"once parsed" in reply.body, reply.body[:300]
        grown = peak_rss_bytes(server.process.pid) - baseline
        assert grown < 64 * MiB, f"peak RSS grew by {grown >> 20} MiB for a refused 4 MiB body"
        client.close()


# --- fair shares of connections -------------------------------------------


def _get_stream(port: int, token: str, session: str):
    """A 2025 GET stream held open on a socket of its own; its status."""
    sock = open_socket(port)
    sock.sendall(
        (
            f"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: text/event-stream\r\n"
            f"authorization: Bearer {token}\r\nmcp-session-id: {session}\r\n"
            f"mcp-protocol-version: {V2025_06_18}\r\n\r\n"
        ).encode()
    )
    sock.settimeout(15)
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    status = head.split(b" ", 2)[1] if head.startswith(b"HTTP/1.1 ") else b"closed"
    return sock, status


def test_r37_one_caller_holds_at_most_its_share_of_connections_and_idle_sockets_make_room(
    workdir: Path, cache_dir: Path
) -> None:
    hog_token, other_token = unique("hog"), unique("other")
    flags = ["--token", hog_token, "--token", other_token, "--max-connections", "40"]
    with http_server(TEXT, workdir, cache_dir, flags=flags) as server:
        hog = Client(server.url, hog_token)
        sessions = [hog.initialize().id for _ in range(30)]
        hog.close()
        streams = [_get_stream(server.port, hog_token, s) for s in sessions]
        held = [sock for sock, status in streams if status == b"200"]
        refused = [status for _, status in streams if status != b"200"]
        # Half the cap (20) is the hog's share; its other streams are refused.
        assert len(held) == 20, [status for _, status in streams]
        assert set(refused) == {b"503"}, refused
        # Idle sockets fill the rest and more, holding nothing.
        idle = []
        for _ in range(60):
            try:
                idle.append(open_socket(server.port))
            except OSError:
                break
        assert len(idle) >= 40
        other = Client(server.url, other_token)
        reply = other.initialize().call("echo", {"message": "still served"})
        assert reply.status == 200, (reply.status, reply.body[:300])
        assert reply.message()["result"]["structuredContent"] == {"message": "still served"}
        other.close()
        for sock in held + [sock for sock, _ in streams] + idle:
            sock.close()


def test_r37_a_cancellation_is_never_refused_for_load(workdir: Path, cache_dir: Path) -> None:
    manifest = chaos_manifest(workdir, concurrency=4, timeout="60s")
    token = unique("canceller")
    flags = ["--token", token, "--max-connections", "4"]
    with http_server((manifest,), workdir, cache_dir, flags=flags) as server:
        client = Client(server.url, token)
        session = client.initialize()
        client.close()

        def busy(request_id: int):
            c = Client(server.url, token)
            try:
                message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": {"name": "busy", "arguments": {}}}  # fmt: skip
                return c.post(message, session.headers())
            finally:
                c.close()

        with ThreadPoolExecutor(max_workers=2) as pool:
            # Two calls that run until cancelled: the caller's whole share
            # of the connections (two of four).
            running = [pool.submit(busy, n) for n in (101, 102)]
            wait_until(lambda: len(started(server.events.read())) == 2, 30, "both calls started")
            # Anything else of the caller is refused for load...
            more = Client(server.url, token)
            refused = more.post({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, session.headers())
            more.close()
            assert refused.status == 503, (refused.status, refused.body[:300])
            # ...but its cancellations are not.
            for request_id in (101, 102):
                c = Client(server.url, token)
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": request_id, "reason": "enough of this call"}}  # fmt: skip
                reply = c.post(cancel, session.headers())
                c.close()
                assert reply.status == 202, (reply.status, reply.body[:300])
            for call in running:
                call.result(timeout=30)

        def both_ended() -> list[dict]:
            ended = [o for o in server.events.outcomes() if o.get("tool") == "busy"]
            return ended if len(ended) == 2 else []

        outcomes = wait_until(both_ended, 30, "both calls' outcomes")
        assert {o["status"] for o in outcomes} == {"interrupted"}, outcomes


# --- fairness -------------------------------------------------------------


def test_r37_a_busy_session_does_not_delay_another_sessions_call(workdir: Path, cache_dir: Path) -> None:
    manifest = chaos_manifest(workdir, concurrency=1)
    with http_server((manifest,), workdir, cache_dir) as server:
        hog_client, other_client = Client(server.url), Client(server.url)
        hog, other = hog_client.initialize(), other_client.initialize()
        order: list[str] = []
        lock = threading.Lock()

        def call(session, who: str) -> None:
            reply = session.call("compute", {"iterations": 20_000_000})
            assert reply.status == 200, reply.body[:300]
            with lock:
                order.append(who)

        with ThreadPoolExecutor(max_workers=40) as pool:
            hogs = [pool.submit(call, hog, "hog") for _ in range(32)]
            # The hog's calls queue behind the plugin's one slot; once the
            # first has finished, the rest are waiting.
            wait_until(lambda: order, 60, "the hog's first call finishes")
            mine = pool.submit(call, other, "other")
            mine.result(timeout=120)
            for h in hogs:
                h.result(timeout=300)
        position = order.index("other")
        # Served in turn, the other session's call waits for at most the
        # hog's call in progress and the one whose turn came first.
        assert position <= 4, f"the other session's call finished {position}th: {order}"
        hog_client.close()
        other_client.close()


# --- stopping -------------------------------------------------------------


def test_r37_sigterm_during_a_partial_request_ends_within_the_grace(workdir: Path, cache_dir: Path) -> None:
    server = start_http_server(TEXT, workdir, cache_dir, flags=["--grace", "1s"])
    try:
        sock = open_socket(server.port)
        sock.sendall(f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{server.port}\r\ncontent-length: 100\r\n\r\n{{".encode())
        body = open_socket(server.port)
        body.sendall(request_head(server.port, 100) + b"{")
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(timeout=10)
        assert code == 0, server.stderr()
        sock.close()
        body.close()
    finally:
        server.stop()


def _calls_in_flight_at_sigterm(workdir: Path, cache_dir: Path, round_: int) -> None:
    manifest = chaos_manifest(workdir / f"round-{round_}", concurrency=64)
    server: HttpServer = start_http_server(
        (manifest,), workdir / f"round-{round_}", cache_dir, flags=["--grace", "1s", "--timeout", "60s"]
    )
    try:
        agent = unique("stop")
        replies: dict[int, bytes] = {}

        def call(i: int) -> None:
            tool, args = ("busy", {}) if i < 20 else ("busy", {"iterations": 400_000_000})
            sock = open_socket(server.port)
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {
                        "name": tool,
                        "arguments": args,
                        "_meta": {
                            "io.modelcontextprotocol/protocolVersion": MODERN,
                            "io.modelcontextprotocol/clientCapabilities": {},
                            "io.modelcontextprotocol/clientInfo": {"name": agent, "version": "1"},
                        },
                    },
                }
            ).encode()
            extra = f"mcp-protocol-version: {MODERN}\r\nmcp-method: tools/call\r\nmcp-name: {tool}\r\nconnection: close\r\n"
            sock.sendall(request_head(server.port, len(body), extra) + body)
            replies[i] = read_until_closed(sock, 60)
            sock.close()

        threads = [threading.Thread(target=call, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        # Every call has started running (its `busy` said so) when the stop
        # comes; the long ones are still running.
        wait_until(lambda: len(started(server.events.read(), agent)) == 50, 60, "all 50 calls start")
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(timeout=60)
        for t in threads:
            t.join(timeout=30)
        assert code == 0, f"exit {code}: {server.stderr()[-3000:]}"
        outcomes = [
            e for e in server.events.read() if e.get("event") == "outcome" and e["context"]["agent"] == agent
        ]
        ids = sorted(int(e["context"]["call_id"]) for e in outcomes)
        assert ids == list(range(50)), f"round {round_}: outcomes for {ids}"
        for i, raw in replies.items():
            text = raw.decode("utf-8", "replace")
            assert f'"id":{i}' in text, f"call {i} got no JSON-RPC reply: {text[-500:]}"
        stopping = [i for i, raw in replies.items() if b"server is stopping" in raw]
        assert len(stopping) >= 20, f"the spinning calls were not told the server is stopping: {stopping}"
        assert len(replies) == 50
    finally:
        server.stop()


def test_r37_sigterm_with_50_calls_in_flight_records_every_outcome(workdir: Path, cache_dir: Path) -> None:
    for round_ in range(20):
        _calls_in_flight_at_sigterm(workdir, cache_dir, round_)


def test_r37_sigterm_over_stdio_records_the_outcome_and_tells_the_client(workdir: Path, cache_dir: Path) -> None:
    manifest = chaos_manifest(workdir, concurrency=4)
    command = serve_command((manifest,), ["--grace", "500ms"], workdir, cache_dir)
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=open(workdir / "stderr.log", "wb"),
        env=server_env(workdir),
    )
    try:
        def send(message: dict) -> None:
            assert process.stdin is not None
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()

        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "stdio-stop", "version": "1"}},
            }
        )
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "busy", "arguments": {}}})
        events = EventLog(workdir / "events.jsonl")
        wait_until(lambda: started(events.read()), 60, "the call started")
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
        replies = [json.loads(line) for line in out.splitlines() if line.strip()]
        answer = [r for r in replies if r.get("id") == 2]
        assert len(answer) == 1 and "server is stopping" in answer[0]["error"]["message"], replies
        outcomes = [e for e in events.read() if e.get("event") == "outcome"]
        assert [(o["context"]["call_id"], o["status"]) for o in outcomes] == [("2", "interrupted")], outcomes
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


# --- the server answers while it loads -------------------------------------------


def test_serve_answers_initialize_while_its_plugins_load(workdir: Path, cache_dir: Path) -> None:
    import sys

    workdir.mkdir(parents=True, exist_ok=True)
    gate = workdir / "gate"
    script = Path(__file__).resolve().parent.parent / "bridge" / "scripted_server.py"
    manifest = workdir / "toolhost.toml"
    manifest.write_text(
        "[[mcp]]\n"
        'name = "blocked"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(script))}]\n"
        f'env = {{ LOG = {json.dumps(str(workdir / "bridged.jsonl"))}, START_GATE = {json.dumps(str(gate))} }}\n'
    )
    server = start_http_server((manifest, "text_tools"), workdir, cache_dir, flags=["--yes"])
    try:
        client = Client(server.url)
        # Loading waits for the bridged server, which waits for the gate;
        # the server answers meanwhile.
        session = client.initialize()
        assert session.request("ping").status == 200
        listing = ThreadPoolExecutor(max_workers=1).submit(session.request, "tools/list")
        gate.touch()
        tools = {t["name"] for t in listing.result(timeout=60).message()["result"]["tools"]}
        assert {"blocked_count", "echo"} <= tools, tools
        client.close()
    finally:
        server.stop()


@pytest.mark.parametrize("log", ["warn,rmcp=error", "warn,rmcp=debug"])
def test_a_client_that_leaves_is_logged_only_at_debug(log: str, workdir: Path, cache_dir: Path) -> None:
    manifest = chaos_manifest(workdir, concurrency=4, timeout="3s")
    with http_server((manifest,), workdir, cache_dir, env={"TOOLHOST_LOG": log}) as server:
        client = Client(server.url)
        session = client.initialize()
        ThreadPoolExecutor(max_workers=1).submit(session.call, "busy", {})
        wait_until(lambda: started(server.events.read()), 30, "the call started")
        # The client ends its session while its call runs: the reply has
        # nowhere to go.
        client.http.delete(server.url, headers=session.headers())
        wait_until(
            lambda: [e for e in server.events.read() if e.get("event") == "outcome"], 60, "the call's outcome"
        )
        code = server.stop()
        assert code == 0, server.stderr()[-2000:]
        gone = "failed to send pending response during drain"
        if log.endswith("debug"):
            assert gone in server.stderr(), "the test did not make a reply go nowhere"
        else:
            assert gone not in server.stderr() and " ERROR " not in server.stderr(), server.stderr()[-2000:]
        client.close()
