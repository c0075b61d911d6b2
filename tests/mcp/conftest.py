"""Fixtures for the MCP client tests of `toolhost serve`.

Run them with `cargo xtask test` (which prepares target/venv, builds the
binary and the example plugins and sets TOOLHOST_BIN and TOOLHOST_PLUGINS),
or by hand after `cargo build -p toolhost-cli && cargo xtask plugins`:

    TOOLHOST_BIN=$PWD/target/debug/toolhost \\
    TOOLHOST_PLUGINS=$PWD/target/plugins/wasm32-wasip2/release \\
    target/venv/bin/python -m pytest tests/mcp -q
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from toolhost_mcp import ALL_PLUGINS, plugin, toolhost_bin


def pytest_configure(config: pytest.Config) -> None:
    try:
        binary = toolhost_bin()
        for name in ALL_PLUGINS:
            plugin(name)
    except RuntimeError as e:
        raise pytest.UsageError(str(e)) from None
    if not binary.is_file():
        raise pytest.UsageError(f"TOOLHOST_BIN={binary} does not exist: run `cargo build -p toolhost-cli`")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for every server of the run, filled up front."""
    cache = tmp_path_factory.mktemp("compile-cache")
    done = subprocess.run(
        [str(toolhost_bin()), "compile", *(str(plugin(p)) for p in ALL_PLUGINS), "--cache-dir", str(cache)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"toolhost compile failed ({done.returncode}):\n{done.stderr}"
    return cache


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    yield tmp_path_factory.mktemp(request.module.__name__)
