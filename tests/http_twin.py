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
