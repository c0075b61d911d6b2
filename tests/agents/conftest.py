"""Fixtures for the real-agent tests of `toolhost serve`.

Run them with `cargo xtask test agents` (which runs `npm ci` here, prepares
target/venv, builds the binary and the example plugins and sets
TOOLHOST_BIN and TOOLHOST_PLUGINS), or by hand after `npm ci` in
tests/agents, `cargo build -p toolhost-cli` and `cargo xtask plugins`:

    TOOLHOST_BIN=$PWD/target/debug/toolhost \\
    TOOLHOST_PLUGINS=$PWD/target/plugins/wasm32-wasip2/release \\
    target/venv/bin/python -m pytest tests/agents -k opencode
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harness import AGENTS, HERE, Dirs, agent_bin, text_tools, toolhost_bin


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Everything a run writes (the agents' HOME included) stays under
    # target/, also when run by hand.
    if not config.option.basetemp:
        config.option.basetemp = str(HERE.parents[1] / "target" / "agents" / "tmp")
    # pytest empties the base directory but creates only its last component.
    Path(config.option.basetemp).parent.mkdir(parents=True, exist_ok=True)
    try:
        binary, plugin = toolhost_bin(), text_tools()
    except RuntimeError as e:
        raise pytest.UsageError(str(e)) from None
    if not binary.is_file():
        raise pytest.UsageError(f"TOOLHOST_BIN={binary} does not exist: run `cargo build -p toolhost-cli`")
    if not plugin.is_file():
        raise pytest.UsageError(f"{plugin} does not exist: build the plugins with `cargo xtask plugins`")
    missing = [name for name in ("opencode", "claude") if not agent_bin(name).is_file()]
    if missing:
        raise pytest.UsageError(f"{', '.join(missing)} not installed: run `npm ci` in {HERE}")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for every server of the run, filled up front, so no
    agent waits for a compile while it connects."""
    dirs = Dirs(tmp_path_factory.mktemp("compile"))
    cache = dirs.root / "cache"
    done = subprocess.run(
        [str(toolhost_bin()), "compile", str(text_tools()), "--cache-dir", str(cache)],
        env=dirs.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"toolhost compile failed ({done.returncode}):\n{done.stderr}"
    return cache


@pytest.fixture(params=sorted(AGENTS))
def agent(request: pytest.FixtureRequest):
    return AGENTS[request.param]
