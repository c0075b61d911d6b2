"""Sealed approvals (R39): a 2026-07-28 permission question ends the request
with `input_required` and a `requestState` sealed under the replicas' shared
key; the retry with the answer completes on another replica, and nothing
waits in the first. A tampered, expired-key, cross-caller, cross-session or
other-tool state is refused with an error that says what to do."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path
from typing import Any

import pytest
from front_door import MODERN, Client
from toolhost_mcp import http_server

PLUGINS = ("chaos",)


def meta(session: str | None = None) -> dict[str, Any]:
    """A 2026-07-28 request's own `_meta`: a client that answers forms."""
    m = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "sealed-test", "version": "1"},
    }
    if session:
        m["io.toolhost/session-id"] = session
    return m


def call(
    client: Client,
    arguments: dict[str, Any],
    *,
    state: str | None = None,
    answer: str | None = None,
    session: str | None = None,
    tool: str = "ask",
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments, "_meta": meta(session)}
    if state is not None:
        params["requestState"] = state
    if answer is not None:
        params["inputResponses"] = {"permission": {"action": "accept", "content": {"answer": answer}}}
    message = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "tools/call", "params": params}
    reply = client.post(message, {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool})
    assert reply.status == 200, f"{reply.status} {reply.body[:500]!r}"
    return reply.message()


def asked(reply: dict[str, Any]) -> str:
    """The sealed state of an `input_required` result."""
    result = reply.get("result") or {}
    assert result.get("resultType") == "input_required", reply
    assert "permission" in result["inputRequests"], reply
    return result["requestState"]


def key_file(path: Path) -> Path:
    path.write_text(secrets.token_hex(32) + "\n")
    return path


@pytest.fixture(scope="module")
def replicas(module_dir: Path, cache_dir: Path):
    """Two replicas sharing one key, and a stranger with a key of its own."""
    shared = key_file(module_dir / "shared.key")
    other = key_file(module_dir / "other.key")
    with (
        http_server(PLUGINS, module_dir / "one", cache_dir, flags=["--state-key-file", str(shared)]) as one,
        http_server(PLUGINS, module_dir / "two", cache_dir, flags=["--state-key-file", str(shared)]) as two,
        http_server(PLUGINS, module_dir / "three", cache_dir, flags=["--state-key-file", str(other)]) as three,
    ):
        clients = [Client(s.url) for s in (one, two, three)]
        yield clients
        for c in clients:
            c.close()


def test_r39_an_ask_answered_on_another_replica_completes(replicas) -> None:
    one, two, _ = replicas
    arguments = {"action": "net", "resource": f"example.org/r39/{uuid.uuid4().hex}"}
    state = asked(call(one, arguments))
    done = call(two, arguments, state=state, answer="once")
    result = done.get("result") or {}
    assert result.get("isError") is False, done
    assert result["content"][0]["text"] == "granted", done


def test_r39_a_rejected_answer_denies_and_a_second_question_asks_again(replicas) -> None:
    one, two, _ = replicas
    arguments = {"action": "net", "resource": f"example.org/r39/{uuid.uuid4().hex}"}
    denied = call(two, arguments, state=asked(call(one, arguments)), answer="reject")
    assert denied["result"]["isError"] is True, denied
    # "once" lasts for that retry only: the next call asks again.
    again = call(two, arguments, state=asked(call(one, arguments)), answer="once")
    assert again["result"]["isError"] is False, again
    asked(call(one, arguments))


def test_r39_states_bound_elsewhere_are_refused(replicas) -> None:
    one, two, three = replicas
    session = uuid.uuid4().hex
    arguments = {"action": "net", "resource": f"example.org/r39/{uuid.uuid4().hex}"}
    state = asked(call(one, arguments, session=session))

    def refused(reply: dict[str, Any], says: str) -> None:
        error = reply.get("error")
        assert error is not None, f"expected a refusal, got {reply}"
        assert says in error["message"], error

    tampered = state[:-2] + ("AA" if state[-2:] != "AA" else "BB")
    refused(call(two, arguments, state=tampered, answer="once", session=session), "not one this server sealed")
    refused(call(three, arguments, state=state, answer="once", session=session), "not one this server sealed")
    refused(call(two, arguments, state=state, answer="once", session=uuid.uuid4().hex), "another caller or session")
    other_arguments = {"action": "net", "resource": "example.org/elsewhere"}
    refused(call(two, other_arguments, state=state, answer="once", session=session), "another tool or other arguments")
    # The state is good for its own call: it completes.
    done = call(two, arguments, state=state, answer="once", session=session)
    assert done["result"]["isError"] is False, done


def measure(rounds: int) -> None:
    """Median time of a call a rule allows against an ask answered through
    its sealed state (docs/performance.md): `python test_sealed.py
    --measure N` with TOOLHOST_BIN, TOOLHOST_PLUGINS and TMPDIR set."""
    import os
    import statistics
    import time

    work = Path(os.environ["TMPDIR"]) / f"sealed-measure-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    flags = ["--state-key-file", str(key_file(work / "key")), "--allow", "net:example.org/plain/*"]
    with http_server(PLUGINS, work / "server", work / "cache", flags=flags) as server:
        client = Client(server.url)
        plain, sealed = [], []
        for i in range(rounds):
            start = time.perf_counter()
            allowed = call(client, {"action": "net", "resource": f"example.org/plain/{i}"})
            plain.append(time.perf_counter() - start)
            assert allowed["result"]["isError"] is False, allowed
            arguments = {"action": "net", "resource": f"example.org/ask/{i}"}
            start = time.perf_counter()
            state = asked(call(client, arguments))
            done = call(client, arguments, state=state, answer="once")
            sealed.append(time.perf_counter() - start)
            assert done["result"]["isError"] is False, done
        client.close()
    a, b = statistics.median(plain), statistics.median(sealed)
    print(f"allowed by a rule: median {a * 1e3:.2f} ms; asked and answered: median {b * 1e3:.2f} ms ({b / a:.1f}x)")


if __name__ == "__main__":
    import sys

    measure(int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--measure" else 60)
