"""Session-scoped pytest fixtures that run real engines on 127.0.0.1.

Import them into tests/conftest.py:

    from tests.engines_fixtures import llamacpp_server, vllm_server  # noqa: F401

`llamacpp_server` / `vllm_server` serve the tiny random-weight model (replies run to
max_tokens); `smol_llamacpp`, `smol_vllm` and `smol_vllm_spec` (n-gram speculation) serve
the real SmolLM2-135M-Instruct, whose replies stop where the model does.

Each installs its engine into the cache (`$ENDURANCE_ENGINES_DIR`, default
~/.cache/endurance-engines) when missing, starts one server for the whole session, yields
an `EngineServer` (base_url, model, metrics_url, block_size, …) and stops it by PID.
An engine that cannot be installed for lack of network is skipped, unless `CI` is set:
in CI every install or start failure fails loudly.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import pytest

from simulator.engines.install import (
    SMOLLM2_CONTEXT,
    EngineUnavailable,
    SmolInstall,
    abort_installs,
    allow_installs,
    engines_dir,
    ensure_llamacpp,
    ensure_smollm2,
    ensure_vllm,
    install_limit,
)
from simulator.engines.server import EngineServer, serve_llamacpp, serve_vllm, stop
from simulator.errors import RunError

T = TypeVar("T")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


# Engines are installed by `preinstall_engines` (from conftest: in the xdist controller's
# `BackgroundInstall`, beside the tests; without xdist before the first test), under
# their own limit rather than pytest-timeout's per-test 600 s; a failure in this process
# is remembered here and reported by the fixture instead of being retried inside a test.
INSTALL_LIMIT_S = float(os.environ.get("ENDURANCE_ENGINES_INSTALL_LIMIT_S", "5400"))


def _smol_gguf() -> SmolInstall:
    return ensure_smollm2(hf=False)


_ENSURE: dict[str, Callable[[], object]] = {
    "vllm": ensure_vllm, "llamacpp": ensure_llamacpp, "smollm2-gguf": _smol_gguf,
    "smollm2": ensure_smollm2}
_FIXTURE_ENGINES: dict[str, tuple[str, ...]] = {
    "vllm_server": ("vllm",), "llamacpp_server": ("llamacpp",),
    "smol_llamacpp": ("llamacpp", "smollm2-gguf"), "smol_vllm": ("vllm", "smollm2"),
    "smol_vllm_spec": ("vllm", "smollm2"), "_smol_vllm_pair": ("vllm", "smollm2")}
_PREINSTALL_ERRORS: dict[str, RunError] = {}
# llama.cpp's threads in the tests: one. A second thread spin-waits at every step's
# barrier; on a 2-core box another job keeps busy, that made decode 10-25x slower
# (smol_llamacpp's measurement below) and burned the CPU the other worker needed; the
# tiny model's steps are too small to gain from two.
TEST_THREADS = 1


def engines_needed(items: Iterable[pytest.Item]) -> list[str]:
    """The engines the selected tests use (through the server fixtures)."""
    def used(item: pytest.Item) -> list[str]:
        # fixtures requested by name, and those a parametrized test gets through
        # request.getfixturevalue(param) (tests/engines/test_real_model_recall.py)
        params = getattr(getattr(item, "callspec", None), "params", {})
        return [*getattr(item, "fixturenames", ()),
                *(v for v in params.values() if isinstance(v, str))]
    names = {e for item in items for f in used(item) for e in _FIXTURE_ENGINES.get(f, ())}
    return [e for e in _ENSURE if e in names]   # an engine before the model it needs


def engines_in_files(paths: Iterable[Path], markexpr: str) -> list[str]:
    """What `engines_needed` would answer, from the xdist controller, which collects no
    items: the engines whose server fixtures the selected test files name, none when the
    `-m` expression deselects `real_engine` tests. An over-estimate at worst (a file
    naming a fixture whose test `-k` deselects), never an under-estimate: the workers
    still run `preinstall_engines` on their items, instantly from the cache."""
    from _pytest.mark.expression import Expression
    if markexpr and not Expression.compile(markexpr).evaluate(lambda m: m == "real_engine"):
        return []
    text = ""
    for root in paths:
        root = Path(str(root).split("::", 1)[0])
        files = [root] if root.is_file() else sorted(root.rglob("test_*.py")) \
            if root.is_dir() else []
        text += "".join(f.read_text(encoding="utf-8", errors="replace") for f in files)
    names = {e for f, es in _FIXTURE_ENGINES.items() if f in text for e in es}
    return [e for e in _ENSURE if e in names]


def preinstall_engines(items: Iterable[pytest.Item], say: Callable[[str], None],
                       names: list[str] | None = None) -> None:
    """Install (or find cached) every engine the session needs, printing each step and
    its duration (before the first test without xdist; beside the tests in xdist's
    controller, `BackgroundInstall`). The engines install side by side, one thread
    each (vLLM's download beside llama.cpp's and SmolLM2's, issue 57);
    a model that needs an engine waits on that engine's install lock. A build is killed
    with its process group when it passes INSTALL_LIMIT_S or the session is interrupted."""
    wanted = engines_needed(items) if names is None else names
    lock = threading.Lock()

    def one_line(line: str) -> None:      # whole lines, whichever thread says them
        with lock:
            say(line)
    done = {name: threading.Event() for name in wanted}

    def install(name: str) -> None:
        try:
            _preinstall_one(name, one_line)
        finally:
            done[name].set()
    for name in wanted:
        threading.Thread(target=install, args=(name,), name=f"install-{name}",
                         daemon=True).start()
    # Waited on through events, not Thread.join: a join that Ctrl-C interrupts marks a
    # running thread stopped (CPython's bpo-45274 cleanup), so the joins after it
    # returned at once and that engine's build outlived the session.
    try:
        for ev in done.values():
            while not ev.wait(0.5):      # a short wait: Ctrl-C reaches this thread at once
                pass
    except BaseException:
        abort_installs()             # every step killed with its process group
        for ev in done.values():
            ev.wait(30)
        raise
    finally:
        allow_installs()


def _preinstall_one(name: str, say: Callable[[str], None]) -> None:
    """One engine's install in its own thread, its failure kept for the fixtures."""
    t0 = time.monotonic()
    say(f"[engines] {name}: installing if missing (limit {INSTALL_LIMIT_S:.0f} s; "
        f"cache {engines_dir()})")
    try:
        with install_limit(INSTALL_LIMIT_S, lambda line: say(f"[engines] {name}:{line}")):
            _ENSURE[name]()
    except RunError as exc:
        _PREINSTALL_ERRORS[name] = exc
        say(f"[engines] {name}: FAILED after {time.monotonic() - t0:.0f} s: {exc}")
    else:
        say(f"[engines] {name}: ready after {time.monotonic() - t0:.0f} s")


class BackgroundInstall:
    """The engines' install in a thread of the xdist controller, while the workers run the
    tests that need no engine: a first run's downloads overlap the tests (issue 57)
    instead of coming before them. The thread's lines are queued and printed by the
    controller's main thread (`flush`, between test reports), so they never tear a line
    of the terminal. Registered as a plugin by conftest's `pytest_sessionstart`. A
    worker's engine fixture waits on that engine's install lock (`install_or_skip`),
    outside pytest-timeout's per-test limit (`engine_timeout`)."""

    def __init__(self, names: list[str], say: Callable[[str], None]) -> None:
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._say = say
        self._done = threading.Event()
        threading.Thread(target=self._run, args=(names,), daemon=True,
                         name="engines-install").start()

    def _run(self, names: list[str]) -> None:
        try:
            preinstall_engines((), self._lines.put, names)
        finally:
            self._done.set()

    def flush(self) -> None:
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            self._say(line)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.flush()

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.finish(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)

    def finish(self, *, interrupted: bool) -> None:
        """Wait for the install to end (a deselected engine's install is still cached for
        the next run); on an interrupted session, kill every step first."""
        if interrupted and not self._done.is_set():
            abort_installs()
        while not self._done.wait(0.5):
            self.flush()
        self.flush()


def engine_timeout(item: pytest.Item) -> None:
    """pytest-timeout's 600 s per test, counted on the test function only for a test that
    uses an engine: its session fixture may wait for the controller's install (bounded by
    INSTALL_LIMIT_S) and start a server (bounded by its ready timeout)."""
    if engines_needed([item]) and item.get_closest_marker("timeout") is None:
        item.add_marker(pytest.mark.timeout(float(item.config.getini("timeout") or 600),
                                            func_only=True))


def install_or_skip(ensure: Callable[[], T], name: str | None = None) -> T:
    """Run an installer (instant when the pre-install put it in the cache, and waiting on
    its lock while the controller's install runs), under the install's own limit; skip
    the test only when offline outside CI."""
    try:
        if name is not None and name in _PREINSTALL_ERRORS:
            raise _PREINSTALL_ERRORS[name]
        with install_limit(INSTALL_LIMIT_S):
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


@contextmanager
def _serving(server: AbstractContextManager[EngineServer], log_dir: Path) -> Iterator[EngineServer]:
    """A started server, reported; a start that fails prints its logs, then raises."""
    try:
        with server as started:
            _report(started)
            yield started
    except RunError:
        _dump_log(log_dir)
        raise


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    """vLLM (CPU) serving the tiny model with prefix caching, block size 32."""
    install = install_or_skip(ensure_vllm, "vllm")
    log_dir = tmp_path_factory.mktemp("vllm")
    with _serving(serve_vllm(install, log_dir), log_dir) as server:
        yield server


@pytest.fixture(scope="session")
def llamacpp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    """llama.cpp's llama-server with 4 slots and a unified KV cache."""
    install = install_or_skip(ensure_llamacpp, "llamacpp")
    log_dir = tmp_path_factory.mktemp("llamacpp")
    with _serving(serve_llamacpp(install, log_dir, threads=TEST_THREADS), log_dir) as server:
        yield server


SMOL_NAME = "smol"
# float32, not bfloat16: with bf16 weights vLLM CPU's n-gram speculation changed 3 of the
# 6 greedy code probes of `check --against` (the verify pass scores k+1 positions in one
# matmul, so near-tied argmaxes flip); with fp32 all 6 were identical (docs/real-servers.md)
SMOL_DTYPE = ("--dtype", "float32")
# vLLM's n-gram proposer as `../shared/tools/real-engine/make_smollm2.sh` ran it here
SMOL_NGRAM = ('{"method":"ngram","num_speculative_tokens":8,"prompt_lookup_max":4,'
              '"prompt_lookup_min":2}')


@pytest.fixture(scope="session")
def smol_llamacpp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    """llama-server serving SmolLM2-135M-Instruct (the wheel's GGUF as it is): 2 slots
    sharing one unified 8k KV cache, so no request can pass the model's 8k window. One
    thread: on a busy 2-core box a second, spin-waiting thread made decode 10-25x
    slower (measured here: 0.4-1.1 tok/s with -t 2, 10 tok/s with -t 1)."""
    engine = install_or_skip(ensure_llamacpp, "llamacpp")
    smol = install_or_skip(_smol_gguf, "smollm2-gguf")
    log_dir = tmp_path_factory.mktemp("smol-llamacpp")
    with _serving(serve_llamacpp(replace(engine, gguf=smol.gguf), log_dir, slots=2,
                                 ctx_tokens=SMOLLM2_CONTEXT, threads=TEST_THREADS, model_name=SMOL_NAME,
                                 ignore_eos=False), log_dir) as server:
        yield server


@pytest.fixture(scope="session")
def _smol_vllm_pair(tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[tuple[EngineServer, EngineServer]]:
    """Both SmolLM2 vLLM servers, plain and with n-gram speculation, started at the same
    time (each start is ~2 min of mostly single-threaded warm-up on 2 cores, so two in
    parallel take little more than one); both stopped at the end of the session."""
    engine = install_or_skip(ensure_vllm, "vllm")
    smol = install_or_skip(ensure_smollm2, "smollm2")
    assert smol.hf_dir is not None
    hf_dir = smol.hf_dir
    logs = [tmp_path_factory.mktemp(n) for n in ("smol-vllm", "smol-vllm-spec")]
    extras: list[tuple[str, ...]] = [SMOL_DTYPE, (*SMOL_DTYPE, "--speculative-config", SMOL_NGRAM)]
    spawned: list[subprocess.Popen[bytes]] = []
    with ExitStack() as stack, ThreadPoolExecutor(2) as pool:
        def start(i: int) -> EngineServer:
            return stack.enter_context(serve_vllm(
                engine, logs[i], model_dir=hf_dir, model_name=SMOL_NAME,
                max_model_len=SMOLLM2_CONTEXT, extra_args=extras[i],
                on_spawn=spawned.append))
        futures = [pool.submit(start, i) for i in range(2)]
        try:
            plain, spec = (f.result() for f in futures)
        except BaseException as exc:   # a failed start, a timeout, Ctrl-C: stop both now
            for proc in spawned:        # (the other start's wait ends when its process does)
                stop(proc, grace_s=5.0)
            if isinstance(exc, RunError):
                for log_dir in logs:
                    _dump_log(log_dir)
            raise
        _report(plain)
        _report(spec)
        yield plain, spec


@pytest.fixture(scope="session")
def smol_vllm(_smol_vllm_pair: tuple[EngineServer, EngineServer]) -> EngineServer:
    """vLLM (CPU) serving SmolLM2-135M-Instruct (fp32), prefix caching, 8k window."""
    return _smol_vllm_pair[0]


@pytest.fixture(scope="session")
def smol_vllm_spec(_smol_vllm_pair: tuple[EngineServer, EngineServer]) -> EngineServer:
    """The same as `smol_vllm`, with vLLM's n-gram speculation (8 draft tokens,
    lookup 2–4): started together with it."""
    return _smol_vllm_pair[1]
