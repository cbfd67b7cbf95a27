"""A real `endurance twin serve` process on 127.0.0.1 for integration tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def twin_server(*args: str, time_scale: float = 200.0, log: Path | None = None,
                ready_timeout_s: float = 60.0) -> Iterator[str]:
    """Start the HTTP twin; yield its base URL; always stop it (SIGTERM, then SIGKILL)."""
    port = free_port()
    cmd = [sys.executable, "-m", "simulator", "twin", "serve", "--host", "127.0.0.1",
           "--port", str(port), "--time-scale", str(time_scale), *args]
    out = open(log, "wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"twin server exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("twin server did not become healthy")
            time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if log:
            out.close()  # type: ignore[union-attr]


@contextlib.contextmanager
def twin_in_thread(hardware: str = "a40", model: str = "qwen3-coder-30b-a3b-awq",
                   **kw: object) -> Iterator[str]:
    """The HTTP twin (`twin_app(**kw)`) served from a thread of this process on
    127.0.0.1, port 0: no interpreter start-up; yields its base URL, always stops it."""
    import asyncio
    import threading

    from simulator.twin.server import serving, twin_app

    loop = asyncio.new_event_loop()
    ready: list[str] = []
    failed: list[BaseException] = []

    async def main(stop: asyncio.Event) -> None:
        app, _ = twin_app(hardware, model, **kw)  # type: ignore[arg-type]
        async with serving(app) as url:
            ready.append(url)
            await stop.wait()

    stop_box: list[asyncio.Event] = []

    def target() -> None:
        asyncio.set_event_loop(loop)
        stop_box.append(asyncio.Event())
        try:
            loop.run_until_complete(main(stop_box[0]))
        except BaseException as exc:  # reported to the waiting test below
            failed.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not ready and not failed and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        if not ready:
            raise RuntimeError(f"twin server did not start: {failed!r}")
        yield ready[0]
    finally:
        if stop_box:
            loop.call_soon_threadsafe(stop_box[0].set)
        thread.join(10)
        loop.close()
