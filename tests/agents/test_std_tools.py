"""opencode edits a file with the standard toolset's `edit` and reads it back
with `read`, through `toolhost serve --std DIR` over stdio (issue 28).

The scripted model asks for `toolhost_edit` on a file of the agent's working
directory, then (once the edit's result is in the request) for
`toolhost_read` of the same file, then (once the read's result is in)
answers with its final text. The test checks the file on disk, that the
read's result carried the edited line to the model, that the agent printed
the final text and exited 0, and that the server's event log has a
completed `edit` and `read`.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from harness import AGENT_TIMEOUT, OpenCode, Dirs, Stdio, read_events, run_bounded, toolhost_bin
from model_server import Request, ScriptedModel


class EditThenRead(ScriptedModel):
    """The script: edit `notes.txt`, read it, then the final text."""

    def __init__(self) -> None:
        super().__init__(tool_suffix="edit")
        self.new_line = f"edited by {self.message}"
        self.edit_id = f"{self.call_id}e"
        self.read_id = f"{self.call_id}r"
        self.results: dict[str, str] = {}

    def _openai(self, request: Request, body: dict[str, Any]) -> bytes:
        request.tools = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
        for message in body.get("messages") or []:
            call = message.get("tool_call_id")
            if message.get("role") == "tool" and call in (self.edit_id, self.read_id):
                text = message.get("content")
                self.results[call] = text if isinstance(text, str) else json.dumps(text)
        delta: dict[str, Any] = {"role": "assistant"}
        if self.read_id in self.results:
            request.answer, request.tool_result = "final", self.results[self.read_id]
            delta["content"] = self.final_text
            finish = "stop"
        else:
            if self.edit_id in self.results:
                name, call, arguments = "toolhost_read", self.read_id, {"filePath": "notes.txt"}
            else:
                name, call = "toolhost_edit", self.edit_id
                arguments = {"filePath": "notes.txt", "oldString": "second line", "newString": self.new_line}
            if name not in request.tools:
                request.answer = "text"
                delta["content"] = "ok"
                finish = "stop"
            else:
                request.answer, request.called = "tool_call", name
                function = {"name": name, "arguments": json.dumps(arguments)}
                delta["tool_calls"] = [{"index": 0, "id": call, "type": "function", "function": function}]
                finish = "tool_calls"
        chunk = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": int(time.time()), "model": body.get("model", "scripted")}
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
        ]
        return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


def test_opencode_edits_a_file_with_std_edit_and_reads_it_back(tmp_path: Path) -> None:
    dirs = Dirs(tmp_path)
    notes = dirs.work / "notes.txt"
    notes.write_text("first line\nsecond line\nthird line\n", encoding="utf-8")
    cache = dirs.root / "cache"
    # Fill the compile cache first, so opencode never waits for a compile.
    listed = subprocess.run(
        [str(toolhost_bin()), "list", "--std", str(dirs.work), "--cache-dir", str(cache)],
        env=dirs.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr
    outputs = dirs.toolhost / "outputs"
    outputs.mkdir(mode=0o700, exist_ok=True)
    serve = [
        str(toolhost_bin()),
        "serve",
        "--std",
        str(dirs.work),
        # The careful default asks before an edit; this run allows edits of
        # exactly this file, as a user's rule would.
        "--allow",
        "edit:notes.txt",
        "--events",
        str(dirs.events),
        "--output-dir",
        str(outputs),
        "--cache-dir",
        str(cache),
    ]
    agent = OpenCode()
    with EditThenRead() as model:
        command, env = agent.command(model, Stdio(serve), dirs)
        # opencode's permission for the second tool too.
        config_path = Path(env["OPENCODE_CONFIG"])
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["permission"] = {"toolhost_edit": "allow", "toolhost_read": "allow"}
        config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        finished = run_bounded(command, cwd=dirs.work, env=env, timeout=AGENT_TIMEOUT, logs=dirs.root / "opencode")
    context = f"opencode: {finished.describe()}\nmodel requests:\n{model.summary()}"

    called = [r.called for r in model.requests if r.called]
    assert called == ["toolhost_edit", "toolhost_read"], context
    assert notes.read_text(encoding="utf-8") == f"first line\n{model.new_line}\nthird line\n", context
    assert "Edited `notes.txt`: 1 replacement." in model.results[model.edit_id], context
    assert f"2: {model.new_line}" in model.results[model.read_id], context
    assert finished.returncode == 0, context
    assert model.final_text in finished.stdout, f"the agent did not print the model's final text\n{context}"

    outcomes = {e.get("tool"): e.get("status") for e in read_events(dirs.events) if e.get("event") == "outcome"}
    assert outcomes == {"edit": "completed", "read": "completed"}, f"{outcomes}\n{context}"
