"""Body framing alone, in client CPU µs per token (issue 17's httptools evaluation):
the lean connection's `data_received` (llhttp via `httptools` since the evaluation)
beside a bare `httptools` parser, each with a no-op sink and with the Anthropic
`StreamState`. No sockets: the same chunked SSE bytes are fed as one token per read (a
paced server) and as 64 KiB reads (bulk).

    python benchmarks/http_framing.py

Measured before the switch (shared 2-vCPU VM, no-op sink, one token per read): the
hand-written chunked state machine 1.85 µs, llhttp 0.12 µs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.endpoints.http import http1
from simulator.endpoints.wire.anthropic import StreamState

N = 20_000
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n")


def _event(i: int) -> bytes:
    body = {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": f" w{i % 16}"}}
    p = f"event: content_block_delta\ndata: {json.dumps(body, separators=(',', ':'))}\n\n"
    return b"%x\r\n%s\r\n" % (len(p), p.encode())


class _Pool:
    clock = staticmethod(time.monotonic)

    def forget(self, conn: Any) -> None:
        pass


class _Noop:
    n_deltas = 0

    def feed_bytes(self, b: bytes, now: float) -> None:
        self.n_deltas += 1


def lean(reads: list[bytes], state: Any) -> tuple[float, int]:
    loop = asyncio.new_event_loop()
    try:
        conn = http1._Conn(_Pool())  # type: ignore[arg-type]
        asyncio.set_event_loop(loop)

        async def run() -> float:
            conn.transport = _Transport()  # type: ignore[assignment]
            conn.begin(b"")
            conn.data_received(HEAD)
            conn.set_sink(state.feed_bytes)
            t = time.perf_counter()
            for r in reads:
                conn.data_received(r)
            return time.perf_counter() - t

        return loop.run_until_complete(run()), state.n_deltas
    finally:
        loop.close()


class _Transport:
    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def llhttp(reads: list[bytes], state: Any) -> tuple[float, int]:
    import httptools


    class Proto:
        def on_body(self, b: bytes) -> None:
            state.feed_bytes(b, 1.0)

    parser = httptools.HttpResponseParser(Proto())
    parser.feed_data(HEAD)
    t = time.perf_counter()
    for r in reads:
        parser.feed_data(r)
    return time.perf_counter() - t, state.n_deltas


def main() -> None:
    chunks = [_event(i) for i in range(N)]
    whole = b"".join(chunks)
    bulk = [whole[i:i + 65536] for i in range(0, len(whole), 65536)]
    paths: list[Callable[[list[bytes], Any], tuple[float, int]]] = [lean, llhttp]
    for regime, reads in (("paced (1 token/read)", chunks), ("bulk (64 KiB reads)", bulk)):
        for sink in ("no-op", "StreamState"):
            for f in paths:
                dt, n = min(f(reads, _Noop() if sink == "no-op" else StreamState(0.0))
                            for _ in range(5))
                print(f"{regime:22} {sink:12} {f.__name__:7} {dt / n * 1e6:6.2f} µs/token")


if __name__ == "__main__":
    main()
