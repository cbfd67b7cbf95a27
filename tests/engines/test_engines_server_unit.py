"""Starting several servers at once: a waiting start ends as soon as its process is
stopped (the SmolLM2 vLLM pair is started in two threads; an interrupted session stops
both instead of waiting out their ready timeout). Fast: `sleep` stands in for a server."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from simulator.engines import server
from simulator.errors import RunError


def test_a_stopped_process_ends_the_wait_for_its_health(tmp_path: Path) -> None:
    spawned: list[subprocess.Popen[bytes]] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            with server._serve(["sleep", "300"], {}, tmp_path / "s.log",
                               f"http://{server.HOST}:9/health", 120.0, spawned.append):
                pass
        except RunError as exc:
            errors.append(exc)

    t = threading.Thread(target=start)
    t0 = time.monotonic()
    t.start()
    for _ in range(200):
        if spawned:
            break
        time.sleep(0.01)
    assert len(spawned) == 1
    server.stop(spawned[0], grace_s=2.0)
    t.join(10)
    assert not t.is_alive() and time.monotonic() - t0 < 10
    assert spawned[0].poll() is not None
    with pytest.raises(RunError, match="server exited"):
        raise errors[0]


def test_llamacpp_runs_without_amx_repacking_on_a_cpu_with_amx_tiles() -> None:
    """llama.cpp's AMX path segfaulted at warm-up on this machine's AMX CPU (issue 49):
    `--no-repack` there, nothing on a CPU without AMX tiles."""
    from simulator.engines.server import llamacpp_cpu_args
    amx = "processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile amx_int8\n"
    assert llamacpp_cpu_args(amx) == ["--no-repack"]
    assert llamacpp_cpu_args("processor\t: 0\nflags\t\t: fpu sse avx2\n") == []
    assert llamacpp_cpu_args("") == []
