"""Helpers for the reliability tests: the HTTP twin in a background thread (counting
every request it receives), `endurance run` as a real subprocess, journal readers."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from simulator.twin.serve.faults import parse_faults
from simulator.twin.serve.server import serving, twin_app
from tests.conftest import ROOT

HARDWARE, MODEL = "h100", "llama-3.1-8b"


class TwinThread:
    """The HTTP twin on 127.0.0.1 in its own thread and loop. `counts[path]` counts every
    request received, faulted or not: the server's own account to check the client's."""

    def __init__(self, *, faults: str = "", time_scale: float = 50.0,
                 context_window: int | None = None, cutoff_s: float | None = None,
                 app: Callable[[], web.Application] | None = None) -> None:
        self.app_factory = app
        self.kw: dict[str, Any] = dict(faults=parse_faults(faults), time_scale=time_scale,
                                       context_window=context_window, cutoff_s=cutoff_s)
        self.counts: collections.Counter[str] = collections.Counter()
        self.url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        app = self.app_factory() if self.app_factory else twin_app(HARDWARE, MODEL, **self.kw)[0]

        @web.middleware
        async def count(request: web.Request,
                        handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                        ) -> web.StreamResponse:
            self.counts[f"{request.method} {request.path}"] += 1
            return await handler(request)

        app.middlewares.append(count)
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        async with serving(app) as url:
            self.url = url
            self._ready.set()
            await self._stop.wait()

    @property
    def messages(self) -> int:
        return self.counts["POST /v1/messages"]

    def __enter__(self) -> TwinThread:
        self._thread.start()
        assert self._ready.wait(30), "twin did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def soak_scenario(**over: Any) -> dict[str, Any]:
    """Tiny prompts and replies: many requests per second on two cores."""
    base: dict[str, Any] = {
        "name": "soak", "sessions": 8, "turns": 150, "seed": 11,
        "system": {"tokens": 150}, "tools": {"count": 2, "tokens": 150},
        "first_prompt_tokens": 40, "user_prompt_tokens": 15, "think_time_s": 0.0,
        "turn_templates": [
            {"name": "read", "weight": 3, "output_tokens": 12,
             "tool": {"kind": "read", "result_tokens": 60, "latency_s": 0.0}},
            {"name": "answer", "weight": 1, "output_tokens": 10},
        ],
        "compaction": {"kind": "block", "high_water_tokens": 2500, "low_water_tokens": 1500},
        "retry": {"max_attempts": 10, "backoff_s": 0.02, "backoff_max_s": 0.2, "jitter": 0.5},
        "endpoint": {"timeout_s": 1.0, "connect_timeout_s": 2.0},
        "limits": {"max_failed_sessions_frac": 0.0},
    }
    base.update(over)
    return base


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def endurance(*args: str, env: dict[str, str] | None = None,
              **popen: Any) -> subprocess.Popen[str]:
    """`python -m simulator ARGS` as a subprocess (stdout and stderr captured)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "simulator", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, **popen)


def wait_rows(out: Path, n: int, proc: subprocess.Popen[str], timeout_s: float = 30.0) -> Path:
    """The run directory once its journal holds `n` rows (bounded in time)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for d in out.iterdir() if out.exists() else ():
            j = d / "turns.jsonl"
            if j.exists() and j.read_text().count("\n") >= n:
                return d
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} rows after {timeout_s} s")


def journal(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def canned(status: int, body: str, content_type: str = "text/html") -> Callable[[], web.Application]:
    """An app answering every request with the same status and body (not an Anthropic API)."""
    def make() -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            return web.Response(status=status, text=body, content_type=content_type)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app
    return make
