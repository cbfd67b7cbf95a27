"""A real `endurance twin serve` process on 127.0.0.1 for integration tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

URL_RE = re.compile(rb"(http://127\.0\.0\.1:\d+)")


def _copy(src: IO[bytes], dst: IO[bytes] | None) -> None:
    """Drain the server's stderr (into the log, if any) so it never blocks on a full pipe."""
    for line in iter(src.readline, b""):
        if dst is not None:
            dst.write(line)
            dst.flush()


@contextlib.contextmanager
def twin_server(*args: str, time_scale: float = 200.0, log: Path | None = None,
                ready_timeout_s: float = 60.0) -> Iterator[str]:
    """Start the HTTP twin; yield its base URL; always stop it (SIGTERM, then SIGKILL).

    The server binds port 0 itself and announces the URL it got on stderr, which is read
    back here: no window in which another process can take a port picked in advance."""
    cmd = [sys.executable, "-m", "simulator", "twin", "serve", "--host", "127.0.0.1",
           "--port", "0", "--time-scale", str(time_scale), *args]
    out = open(log, "wb") if log else None
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stderr is not None
    drain: threading.Thread | None = None
    try:
        found: list[str] = []

        def first_line() -> None:
            assert proc.stderr is not None
            for line in iter(proc.stderr.readline, b""):
                if out is not None:
                    out.write(line)
                m = URL_RE.search(line)
                if m:
                    found.append(m.group(1).decode())
                    return

        reader = threading.Thread(target=first_line, daemon=True)
        reader.start()
        reader.join(ready_timeout_s)
        if not found:
            raise RuntimeError(f"twin server did not announce its URL (exit code {proc.poll()})")
        url = found[0]
        drain = threading.Thread(target=_copy, args=(proc.stderr, out), daemon=True)
        drain.start()
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
        if drain is not None:
            drain.join(5)
        proc.stderr.close()
        if out is not None:
            out.close()


@contextlib.contextmanager
def twin_in_thread(hardware: str = "a40", model: str = "qwen3-coder-30b-a3b-awq",
                   **kw: object) -> Iterator[str]:
    """The HTTP twin (`twin_app(**kw)`) served from a thread of this process on
    127.0.0.1, port 0: no interpreter start-up; yields its base URL, always stops it."""
    import asyncio
    import threading

    from simulator.twin.serve.server import serving, twin_app

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


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A 127.0.0.1 port bound (never listening) for the whole block: connecting to it is
    refused, and no other process can take it meanwhile (no pick-then-bind race)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])

