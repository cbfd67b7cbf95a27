"""Session-scoped pytest fixtures that run real engines on 127.0.0.1.

Import them into tests/conftest.py:

    from tests.engines_fixtures import llamacpp_server, vllm_server  # noqa: F401

Each installs its engine into the cache (`$ENDURANCE_ENGINES_DIR`, default
~/.cache/endurance-engines) when missing, starts one server for the whole session, yields
an `EngineServer` (base_url, model, metrics_url, block_size, …) and stops it by PID.
An engine that cannot be installed for lack of network is skipped, unless `CI` is set:
in CI every install or start failure fails loudly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from simulator.engines.install import EngineUnavailable, ensure_llamacpp, ensure_vllm
from simulator.engines.server import EngineServer, serve_llamacpp, serve_vllm
from simulator.errors import RunError

T = TypeVar("T")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def install_or_skip(ensure: Callable[[], T]) -> T:
    """Run an installer; skip the test only when offline outside CI."""
    try:
        return ensure()
    except EngineUnavailable as exc:
        if exc.offline and not in_ci():
            pytest.skip(f"real engine unavailable: {exc}")
        raise


def _report(server: EngineServer) -> None:
    print(f"\n[{server.engine}] {server.base_url} ready in {server.ready_s:.1f} s, "
          f"block size {server.block_size}, pid {server.pid}, log {server.log_path}",
          file=sys.stderr)


def _dump_log(log_dir: Path) -> None:
    """On a failed start, show the end of the server log (pytest captures it)."""
    for log in log_dir.glob("*.log"):
        lines = log.read_text(errors="replace").splitlines()[-40:]
        print(f"--- {log} (last {len(lines)} lines)\n" + "\n".join(lines), file=sys.stderr)


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    """vLLM (CPU) serving the tiny model with prefix caching, block size 32."""
    install = install_or_skip(ensure_vllm)
    log_dir = tmp_path_factory.mktemp("vllm")
    try:
        with serve_vllm(install, log_dir) as server:
            _report(server)
            yield server
    except RunError:
        _dump_log(log_dir)
        raise


@pytest.fixture(scope="session")
def llamacpp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    """llama.cpp's llama-server with 4 slots and a unified KV cache."""
    install = install_or_skip(ensure_llamacpp)
    log_dir = tmp_path_factory.mktemp("llamacpp")
    try:
        with serve_llamacpp(install, log_dir) as server:
            _report(server)
            yield server
    except RunError:
        _dump_log(log_dir)
        raise
