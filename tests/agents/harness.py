"""Running real agents against `toolhost serve`: the paths, a hermetic
environment, bounded processes, a `toolhost serve --http` server, and how
each agent is configured (opencode and Claude Code).

The paths come from the environment, as in tests/mcp (`cargo xtask test
agents` sets them): TOOLHOST_BIN is the `toolhost` binary, TOOLHOST_PLUGINS
the directory of the built example plugins. The agents are the pinned npm
packages in tests/agents/node_modules (`npm ci` in tests/agents).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from model_server import ScriptedModel

HERE = Path(__file__).resolve().parent

#: How long one agent run may take, start to exit. A run takes a few
#: seconds; the bound is for a cold machine, and a hung agent is killed.
AGENT_TIMEOUT = 150.0

#: How long `toolhost serve --http` may take to print its address.
SERVE_TIMEOUT = 60.0

#: What the user asks; the scripted model ignores it.
PROMPT = "Use the toolhost echo tool once, then say what it returned."

SERVING = re.compile(r"toolhost: serving MCP at (http://\S+/mcp)\s*$")


def _env_path(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(
            f"{name} is not set. Run the suite with `cargo xtask test agents`, or set "
            "TOOLHOST_BIN (target/debug/toolhost) and TOOLHOST_PLUGINS "
            "(target/plugins/wasm32-wasip2/release) to absolute paths."
        )
    return Path(value)


def toolhost_bin() -> Path:
    return _env_path("TOOLHOST_BIN")


def text_tools() -> Path:
    return _env_path("TOOLHOST_PLUGINS") / "text_tools.wasm"


def agent_bin(name: str) -> Path:
    return HERE / "node_modules" / ".bin" / name


# --- a hermetic place to run -------------------------------------------------


@dataclass
class Dirs:
    """Everything one run writes, under the test's directory (which is under
    target/): the agent sees this HOME and these XDG dirs, never the user's."""

    root: Path

    def __post_init__(self) -> None:
        for d in (self.home, self.tmp, self.work, self.toolhost, *self.xdg.values()):
            d.mkdir(parents=True, exist_ok=True)
        # Its own repository, so neither agent takes the checkout around
        # target/ for its project (opencode would watch and snapshot it).
        subprocess.run(
            ["git", "-c", "init.defaultBranch=main", "init", "-q", str(self.work)],
            env=self.env(),
            check=True,
            timeout=30,
        )

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def work(self) -> Path:
        """The agent's working directory."""
        return self.root / "work"

    @property
    def toolhost(self) -> Path:
        """The server's event log, retained outputs and logs."""
        return self.root / "toolhost"

    @property
    def xdg(self) -> dict[str, Path]:
        return {
            "XDG_CONFIG_HOME": self.root / "xdg" / "config",
            "XDG_DATA_HOME": self.root / "xdg" / "data",
            "XDG_CACHE_HOME": self.root / "xdg" / "cache",
            "XDG_STATE_HOME": self.root / "xdg" / "state",
        }

    @property
    def events(self) -> Path:
        return self.toolhost / "events.jsonl"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """A clean environment: only PATH from outside (no API keys, no
        agent settings of the user's), everything else under `root`."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
            "TERM": "dumb",
            **{k: str(v) for k, v in self.xdg.items()},
        }
        env.update(extra or {})
        return env


def serve_command(cache_dir: Path, dirs: Dirs, flags: Sequence[str] = ()) -> list[str]:
    """`toolhost serve` with text-tools, an event log and retained outputs
    under the test's directory, and the compile cache filled up front."""
    outputs = dirs.toolhost / "outputs"
    outputs.mkdir(mode=0o700, exist_ok=True)
    return [
        str(toolhost_bin()),
        "serve",
        str(text_tools()),
        "--events",
        str(dirs.events),
        "--output-dir",
        str(outputs),
        "--cache-dir",
        str(cache_dir),
        *flags,
    ]


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --- bounded processes ---------------------------------------------------------


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return f"exit {self.returncode}\n--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _end_group(pgid: int, grace: float = 10.0) -> None:
    """Ends what is left of a process group (an agent's MCP servers, a
    server's children): SIGTERM, at most `grace` seconds to exit (a stdio
    server flushes its event log), then SIGKILL; nothing outlives its test."""
    if not _group_alive(pgid):
        return
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    # Not our children, so nothing to wait on but the group's existence.
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)


def run_bounded(command: Sequence[str], *, cwd: Path, env: dict[str, str], timeout: float, logs: Path) -> Finished:
    """Runs `command` in a process group of its own with no stdin, and kills
    the whole group when it has not exited within `timeout` seconds."""
    out_path, err_path = logs.with_suffix(".stdout"), logs.with_suffix(".stderr")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            list(command), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
        )
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_group(process.pid, grace=0)
            process.wait(timeout=30)
            returncode = -1
        finally:
            _end_group(process.pid)
    finished = Finished(
        returncode,
        out_path.read_text(encoding="utf-8", errors="replace"),
        err_path.read_text(encoding="utf-8", errors="replace"),
    )
    if returncode == -1:
        raise AssertionError(f"`{command[0]}` did not exit within {timeout}s and was killed\n{finished.describe()}")
    return finished


@dataclass
class HttpServer:
    url: str
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-6000:]


@contextmanager
def toolhost_http(command: Sequence[str], env: dict[str, str], log: Path) -> Iterator[HttpServer]:
    """Runs `command` (a `toolhost serve --http 127.0.0.1:0`), waits for the
    line that names its URL, and stops it (SIGTERM, then SIGKILL) after."""
    process = subprocess.Popen(
        list(command),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    found: list[str] = []
    ready = threading.Event()

    def read_stderr() -> None:
        # Copies stderr to the log for as long as the server runs, so the
        # pipe never fills; signals the URL line, or the end of stderr.
        assert process.stderr is not None
        with open(log, "wb") as out:
            for line in process.stderr:
                out.write(line)
                out.flush()
                match = SERVING.search(line.decode("utf-8", "replace"))
                if match and not found:
                    found.append(match.group(1))
                    ready.set()
        ready.set()

    reader = threading.Thread(target=read_stderr, name="toolhost-stderr", daemon=True)
    reader.start()
    try:
        ready.wait(SERVE_TIMEOUT)
        if not found:
            raise AssertionError(
                f"`toolhost serve --http` printed no URL within {SERVE_TIMEOUT}s "
                f"(exit status {process.poll()}); stderr:\n{log.read_text(errors='replace')[-6000:]}"
            )
        yield HttpServer(found[0], log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        _end_group(process.pid, grace=0)
        process.wait(timeout=30)
        reader.join(timeout=10)


# --- the agents ------------------------------------------------------------------


@dataclass
class Stdio:
    """The agent starts `toolhost serve` itself, over stdio."""

    command: list[str]


@dataclass
class Http:
    """The agent connects to a running `toolhost serve --http`."""

    url: str


class OpenCode:
    """opencode (`opencode run`), with a custom OpenAI-compatible provider
    whose base URL is the scripted model."""

    name = "opencode"
    #: opencode names an MCP tool `<server>_<tool>`.
    tool = "toolhost_echo"

    def command(self, model: ScriptedModel, server: Stdio | Http, dirs: Dirs) -> tuple[list[str], dict[str, str]]:
        if isinstance(server, Stdio):
            mcp = {"type": "local", "command": server.command, "enabled": True, "timeout": 60_000}
        else:
            mcp = {"type": "remote", "url": server.url, "enabled": True, "oauth": False, "timeout": 60_000}
        config = {
            "model": "scripted/scripted-model",
            # Side tasks (titles, summaries) ask the same model, never a
            # default provider's.
            "small_model": "scripted/scripted-model",
            "autoupdate": False,
            "share": "disabled",
            "snapshot": False,
            "provider": {
                "scripted": {
                    "name": "Scripted model",
                    "npm": "@ai-sdk/openai-compatible",
                    "options": {"baseURL": f"{model.base_url}/v1", "apiKey": "not-a-real-key"},
                    # Models listed here need no catalogue from models.dev.
                    "models": {"scripted-model": {"name": "Scripted model", "tool_call": True}},
                }
            },
            "mcp": {"toolhost": mcp},
            "permission": {self.tool: "allow"},
        }
        path = dirs.root / "opencode.json"
        path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        env = dirs.env(
            {
                "OPENCODE_CONFIG": str(path),
                # Nothing but the scripted model and the MCP server: no
                # update check, no models.dev catalogue, no plugin or LSP
                # downloads, no sharing.
                "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                "OPENCODE_DISABLE_SHARE": "1",
                "OPENCODE_DISABLE_CLAUDE_CODE": "1",
                # opencode installs `@opencode-ai/plugin` into each config
                # directory in the background, whatever the flags say; its
                # npm asks the scripted model instead, which answers 404
                # (opencode logs the failure and carries on).
                "npm_config_registry": f"{model.base_url}/npm-registry/",
            }
        )
        command = [
            str(agent_bin("opencode")),
            "run",
            "--pure",
            "--print-logs",
            "--log-level",
            "INFO",
            "--model",
            "scripted/scripted-model",
            "--title",
            "toolhost agent test",
            PROMPT,
        ]
        return command, env


class ClaudeCode:
    """Claude Code (`claude -p`), with ANTHROPIC_BASE_URL at the scripted
    model and the server from an `--mcp-config` file."""

    name = "claude"
    #: Claude Code names an MCP tool `mcp__<server>__<tool>`.
    tool = "mcp__toolhost__echo"

    def command(self, model: ScriptedModel, server: Stdio | Http, dirs: Dirs) -> tuple[list[str], dict[str, str]]:
        if isinstance(server, Stdio):
            entry = {"type": "stdio", "command": server.command[0], "args": server.command[1:]}
        else:
            entry = {"type": "http", "url": server.url}
        path = dirs.root / "mcp.json"
        path.write_text(json.dumps({"mcpServers": {"toolhost": entry}}, indent=2), encoding="utf-8")
        env = dirs.env(
            {
                "CLAUDE_CONFIG_DIR": str(dirs.root / "claude"),
                "ANTHROPIC_BASE_URL": model.base_url,
                "ANTHROPIC_API_KEY": "not-a-real-key",
                # Only the API requests the session needs: no telemetry,
                # error reports, update checks or other side traffic.
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
                # The MCP tools go in the request's tool list, not behind a
                # tool search.
                "ENABLE_TOOL_SEARCH": "false",
                "MCP_TIMEOUT": "60000",
            }
        )
        command = [
            str(agent_bin("claude")),
            "-p",
            PROMPT,
            "--mcp-config",
            str(path),
            "--strict-mcp-config",
            "--allowedTools",
            self.tool,
            "--permission-mode",
            "dontAsk",
            "--no-session-persistence",
            "--model",
            "claude-sonnet-4-5",
            "--debug-file",
            str(dirs.root / "claude-debug.log"),
        ]
        return command, env


AGENTS = {agent.name: agent for agent in (OpenCode(), ClaudeCode())}
