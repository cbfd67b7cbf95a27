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
