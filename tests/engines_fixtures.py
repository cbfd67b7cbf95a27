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
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from simulator.engines.install import (
    EngineUnavailable,
    engines_dir,
    ensure_llamacpp,
    ensure_vllm,
    install_limit,
)
from simulator.engines.server import EngineServer, serve_llamacpp, serve_vllm
from simulator.errors import RunError

T = TypeVar("T")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


# Engines are installed before the first test (`preinstall_engines`, called from
# conftest's `pytest_collection_finish`), under their own limit rather than
# pytest-timeout's per-test 600 s; a failure there is remembered here and reported by
# the fixture instead of being retried inside a test.
INSTALL_LIMIT_S = float(os.environ.get("ENDURANCE_ENGINES_INSTALL_LIMIT_S", "5400"))
_ENSURE: dict[str, Callable[[], object]] = {"vllm": ensure_vllm, "llamacpp": ensure_llamacpp}
_FIXTURE_ENGINE = {"vllm_server": "vllm", "llamacpp_server": "llamacpp"}
_PREINSTALL_ERRORS: dict[str, RunError] = {}


def engines_needed(items: Iterable[pytest.Item]) -> list[str]:
    """The engines the selected tests use (through the server fixtures)."""
    names = {_FIXTURE_ENGINE[f] for item in items
             for f in getattr(item, "fixturenames", ()) if f in _FIXTURE_ENGINE}
    return sorted(names)


def preinstall_engines(items: Iterable[pytest.Item], say: Callable[[str], None]) -> None:
    """Install (or find cached) every engine the session needs, before any test runs,
    printing each step and its duration; a build is killed with its process group when
    it passes INSTALL_LIMIT_S or the session is interrupted."""
    for name in engines_needed(items):
        t0 = time.monotonic()
        say(f"[engines] {name}: installing if missing (limit {INSTALL_LIMIT_S:.0f} s; "
            f"cache {engines_dir()})")
        try:
            with install_limit(INSTALL_LIMIT_S, lambda line, n=name: say(f"[engines] {n}:{line}")):
                _ENSURE[name]()
        except RunError as exc:
            _PREINSTALL_ERRORS[name] = exc
            say(f"[engines] {name}: FAILED after {time.monotonic() - t0:.0f} s: {exc}")
        else:
            say(f"[engines] {name}: ready after {time.monotonic() - t0:.0f} s")


def install_or_skip(ensure: Callable[[], T], name: str | None = None) -> T:
    """Run an installer (instant when the pre-install put it in the cache); skip the
    test only when offline outside CI."""
    try:
        if name is not None and name in _PREINSTALL_ERRORS:
            raise _PREINSTALL_ERRORS[name]
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
    install = install_or_skip(ensure_vllm, "vllm")
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
    install = install_or_skip(ensure_llamacpp, "llamacpp")
    log_dir = tmp_path_factory.mktemp("llamacpp")
    try:
        with serve_llamacpp(install, log_dir) as server:
            _report(server)
            yield server
    except RunError:
        _dump_log(log_dir)
        raise
