"""A scripted model on 127.0.0.1 that speaks the two wire formats the agents
use: OpenAI chat completions (opencode, through `@ai-sdk/openai-compatible`)
and the Anthropic Messages API (Claude Code). Both pinned agents ask for a
streamed answer (`"stream": true`), so that is what the server gives; any
other request is recorded and refused.

The script, per request: when the request carries the result of our tool
call, answer with the final text; else when it offers exactly one tool whose
name ends in the wanted suffix (`echo`), call it with the unique message;
else answer with plain text. Every request is recorded before it is
answered, so once the agent has exited the record is complete.

Each stream is sent whole with a Content-Length: a stream that arrives in
one piece is still a valid stream, and the clients need nothing more.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    """One request the model server received."""

    method: str
    path: str
    body: Any
    #: What the script did with it: "tool_call", "final", "text" or "refused".
    answer: str = "refused"
    #: The names of the tools the request offered.
    tools: list[str] = field(default_factory=list)
    #: The tool result for our call, as text, when the request carried one.
    tool_result: str | None = None
    #: The tool the answer called, when it called one.
    called: str | None = None


class ScriptedModel:
    """The script and its record; use it as a context manager to serve."""

    def __init__(self, tool_suffix: str = "echo") -> None:
        self.tool_suffix = tool_suffix
        token = uuid.uuid4().hex
        #: What the model asks the tool to echo, and what it must get back.
        self.message = f"toolhost-agent-check-{token}"
        #: The final answer the agent should print.
        self.final_text = f"The tool answered; done {token[:12]}."
        self.call_id = f"call_{token[:24]}"
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def summary(self) -> str:
        """One line per recorded request, for failure messages."""
        with self._lock:
            lines = [
                f"  {r.method} {r.path} -> {r.answer} called={r.called} tools={r.tools} tool_result={r.tool_result!r}"
                for r in self.requests
            ]
        return "\n".join(lines) or "  (none)"

    # --- the server ---------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None, "not serving"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ScriptedModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # the record is the log

            def do_GET(self) -> None:
                model._handle(self, None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                model._handle(self, body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="model-server", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _handle(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        request = Request(handler.command, handler.path, body)
        path = handler.path.split("?", 1)[0]
        streamed = handler.command == "POST" and isinstance(body, dict) and body.get("stream") is True
        if streamed and path.endswith("/chat/completions"):
            status, content_type, payload = 200, "text/event-stream", self._openai(request, body)
        elif streamed and path.endswith("/messages"):
            status, content_type, payload = 200, "text/event-stream", self._anthropic(request, body)
        else:
            status, content_type = 404, "application/json"
            payload = json.dumps({"error": {"type": "not_found", "message": "not scripted"}}).encode()
        with self._lock:
            self.requests.append(request)
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _decide(self, request: Request) -> None:
        """The final text once the tool's result is back, the tool call
        while the tool is offered, else plain text."""
        wanted = [name for name in request.tools if name.endswith(self.tool_suffix)]
        if request.tool_result is not None:
            request.answer = "final"
        elif len(wanted) == 1:
            request.answer, request.called = "tool_call", wanted[0]
        else:
            request.answer = "text"

    def _text(self, request: Request) -> str:
        return self.final_text if request.answer == "final" else "ok"

    # --- OpenAI chat completions ---------------------------------------------

    def _openai(self, request: Request, body: dict[str, Any]) -> bytes:
        request.tools = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
        for message in body.get("messages") or []:
            if message.get("role") == "tool" and message.get("tool_call_id") == self.call_id:
                request.tool_result = _text_of(message.get("content"))
        self._decide(request)
        delta: dict[str, Any] = {"role": "assistant"}
        if request.called:
            arguments = json.dumps({"message": self.message})
            function = {"name": request.called, "arguments": arguments}
            delta["tool_calls"] = [{"index": 0, "id": self.call_id, "type": "function", "function": function}]
            finish = "tool_calls"
        else:
            delta["content"] = self._text(request)
            finish = "stop"
        chunk = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
        }
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
        ]
        return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()

    # --- Anthropic messages ----------------------------------------------------

    def _anthropic(self, request: Request, body: dict[str, Any]) -> bytes:
        request.tools = [t.get("name", "") for t in body.get("tools") or []]
        for message in body.get("messages") or []:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == self.call_id:
                    request.tool_result = _text_of(block.get("content"))
        self._decide(request)
        if request.called:
            block = {"type": "tool_use", "id": self.call_id, "name": request.called, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps({"message": self.message})}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": self._text(request)}
            stop = "end_turn"
        message = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        events = [
            {"type": "message_start", "message": message},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
            {"type": "message_stop"},
        ]
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _text_of(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(part.get("text", part.get("content"))) for part in content if isinstance(part, dict))
    return "" if content is None else json.dumps(content)
