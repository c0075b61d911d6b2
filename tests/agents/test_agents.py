"""Real coding agents use Toolhost's tools through `toolhost serve`.

Each agent (opencode, Claude Code) runs non-interactively against a scripted
model on 127.0.0.1 and a `toolhost serve` with text-tools, over stdio (the
agent starts the server) and over streamable HTTP (the agent connects to a
running server). The model's first turn calls the agent's name for
text-tools' `echo` with a unique message; the test checks that the agent
put the tool's result, carrying that message, into the model's next turn,
that the agent printed the model's final text and exited 0, and that the
server's event log has the call.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest
from harness import AGENT_TIMEOUT, Dirs, Http, Stdio, read_events, run_bounded, serve_command, toolhost_http
from model_server import ScriptedModel


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_agent_gets_a_toolhost_result_back_to_the_model(agent, transport: str, cache_dir: Path, tmp_path: Path) -> None:
    dirs = Dirs(tmp_path)
    with ScriptedModel() as model, ExitStack() as stack:
        server_log = ""
        if transport == "stdio":
            server: Stdio | Http = Stdio(serve_command(cache_dir, dirs))
        else:
            command = serve_command(cache_dir, dirs, ["--http", "127.0.0.1:0"])
            http = stack.enter_context(toolhost_http(command, dirs.env(), dirs.toolhost / "stderr.log"))
            server = Http(http.url)
        command, env = agent.command(model, server, dirs)
        finished = run_bounded(command, cwd=dirs.work, env=env, timeout=AGENT_TIMEOUT, logs=dirs.root / agent.name)
        if transport == "http":
            server_log = f"\n--- toolhost serve --http stderr ---\n{http.stderr()}"
    context = f"{agent.name} over {transport}: {finished.describe()}\nmodel requests:\n{model.summary()}{server_log}"

    offered = [r for r in model.requests if r.tools]
    assert offered, f"the agent never asked the model with tools\n{context}"
    assert any(agent.tool in r.tools for r in offered), f"no request offered {agent.tool}\n{context}"
    called = [r.called for r in model.requests if r.called]
    assert called and set(called) == {agent.tool}, f"the model should have called {agent.tool} only\n{context}"

    results = [r.tool_result for r in model.requests if r.tool_result is not None]
    assert results, f"no request carried the result of the tool call {model.call_id}\n{context}"
    assert model.message in results[0], f"the tool result lacks the echoed message {model.message}\n{context}"

    assert finished.returncode == 0, context
    assert model.final_text in finished.stdout, f"the agent did not print the model's final text\n{context}"

    echoes = [e for e in read_events(dirs.events) if e.get("event") == "outcome" and e.get("tool") == "echo"]
    assert len(echoes) == 1, f"the event log should have one echo outcome: {echoes}\n{context}"
    assert echoes[0]["status"] == "completed", f"{echoes[0]}\n{context}"
