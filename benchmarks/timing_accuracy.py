"""Timing accuracy: client-measured TTFT and inter-token times vs the twin's own record.

Starts the real-time HTTP twin (`endurance twin serve`, pinned to one core) and drives
N concurrent sessions through one of our client paths pinned to another. For every
reply the twin's `GET /debug/requests/{id}` gives, per delta, when its engine step ended
(`emit_times_s`) and when its bytes were handed to the socket (`write_times_s`); the id
comes back in the `x-endurance-request-id` header. Errors, in ms:

* TTFT error  = client receipt of the first delta − the server's write of it, both on
  the host's monotonic clock: the client's own timing error (delivery and parsing)
* ITL error   = |client gap between deltas i−1 and i − server gap between their writes|
* TTFT gap    = (client first delta − client sent) − (server first write − server
  receipt): also counts the request's transfer and the server's parsing and
  tokenising before it stamps receipt (a single-threaded server queues these)
* write lag   = server write − engine step end: the twin's own delivery delay (its
  writer tasks queue behind each other), not a client error; shown for context.

    python benchmarks/timing_accuracy.py --sessions 1 32 256 --path lean
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def start_twin(cpu: int, extra: list[str]) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "simulator", "twin", "serve", "--port", "0", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=ROOT,
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        for word in line.split():
            if word.startswith("http://"):
                return proc, word.rstrip(",;")
    proc.kill()
    raise SystemExit("the twin did not announce its URL (is `endurance twin serve` there?)")


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


async def _session(ep: Any, fetch: Any, req: Any, turns: int, ttft: list[float],
                   ttft_total: list[float], itl: list[float], lag: list[float]) -> None:
    for _ in range(turns):
        r = await ep.send(req)
        rid = r.extra.get("request_id")
        if not rid:
            raise SystemExit("no x-endurance-request-id header: not the twin?")
        rec = await fetch(rid)
        writes: list[float] = rec["write_times_s"]
        times = list(r.extra["token_times"])
        n = min(len(writes), len(times))
        if n == 0:
            continue
        # Client receipt of the first token vs the server's write of it, both on the
        # host's monotonic clock: the client's own timing error (delivery + parsing).
        ttft.append((times[0] - rec["first_write_mono_s"]) * 1e3)
        ttft_total.append(((times[0] - r.timing.sent) - writes[0]) * 1e3)
        itl.extend(((times[i] - times[i - 1]) - (writes[i] - writes[i - 1])) * 1e3
                   for i in range(1, n))
        lag.extend((w - e) * 1e3 for w, e in zip(writes, rec["emit_times_s"], strict=False))


async def measure(url: str, path: str, sessions: int, turns: int,
                  max_tokens: int) -> dict[str, float]:
    import aiohttp

    from simulator.endpoints.base import LLMRequest
    from simulator.session.conversation import Prefix, user_text
    if path == "lean":
        from simulator.endpoints.http.lean import LeanEndpoint
        ep: Any = LeanEndpoint(url, "", timeout_s=300, max_connections=sessions)
    elif path == "aiohttp":
        from simulator.endpoints.http.aiohttp_client import AiohttpEndpoint
        ep = AiohttpEndpoint(url, "", timeout_s=300, max_connections=sessions)
    else:
        from simulator.endpoints.sdk.anthropic import AnthropicSDKEndpoint
        ep = AnthropicSDKEndpoint(url, "x", timeout_s=300, max_connections=sessions)
    req = LLMRequest(model="twin", prefix=Prefix("You are a coding agent.", (), 6, 0),
                     messages=(user_text("Refactor the parser module."),),
                     max_tokens=max_tokens)
    ttft: list[float] = []
    ttft_total: list[float] = []
    itl: list[float] = []
    lag: list[float] = []
    await ep.send(req)  # warm-up, not measured: the server's first request loads its tokenizer
    async with aiohttp.ClientSession() as http:
        async def fetch(rid: str) -> dict[str, Any]:
            async with http.get(f"{url}/debug/requests/{rid}") as resp:
                data: dict[str, Any] = await resp.json()
                return data

        async with asyncio.TaskGroup() as tg:
            for _ in range(sessions):
                tg.create_task(_session(ep, fetch, req, turns, ttft, ttft_total, itl, lag))
    await ep.aclose()
    abs_itl = [abs(x) for x in itl]
    return {"n_requests": len(ttft), "n_gaps": len(itl),
            "ttft_err_median_ms": statistics.median(ttft) if ttft else float("nan"),
            "ttft_err_p99_ms": _pct(ttft, 0.99),
            "ttft_gap_median_ms": statistics.median(ttft_total) if ttft_total else float("nan"),
            "itl_abs_err_median_ms": statistics.median(abs_itl) if abs_itl else float("nan"),
            "itl_abs_err_p99_ms": _pct(abs_itl, 0.99),
            "write_lag_median_ms": statistics.median(lag) if lag else float("nan"),
            "write_lag_p99_ms": _pct(lag, 0.99)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 32, 256])
    ap.add_argument("--path", choices=["lean", "aiohttp", "sdk"], default="lean")
    ap.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop",
                    help="client event loop (`endurance run` uses uvloop when installed)")
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--twin-arg", action="append", default=[],
                    help="extra argument for `endurance twin serve` (repeatable)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from client_ceiling import machine
    print(f"machine: {machine()}")
    proc, url = start_twin(a.server_cpu, a.twin_arg)
    os.sched_setaffinity(0, {a.client_cpu})
    try:
        print(f"twin at {url}; client path {a.path} on {a.loop}; {a.turns} requests per session, "
              f"max_tokens {a.max_tokens}")
        print(f"{'sessions':>8} {'reqs':>6} {'TTFT err p50':>13} {'p99':>8} "
              f"{'|ITL err| p50':>14} {'p99':>8} {'TTFT gap p50':>13} "
              f"{'write lag p50':>14} {'p99':>8}   (ms)")
        for n in a.sessions:
            coro = measure(url, a.path, n, a.turns, a.max_tokens)
            if a.loop == "uvloop":
                import uvloop
                r = uvloop.run(coro)
            else:
                r = asyncio.run(coro)
            print(f"{n:>8} {r['n_requests']:>6} {r['ttft_err_median_ms']:>13.3f} "
                  f"{r['ttft_err_p99_ms']:>8.3f} {r['itl_abs_err_median_ms']:>14.3f} "
                  f"{r['itl_abs_err_p99_ms']:>8.3f} {r['ttft_gap_median_ms']:>13.3f} "
                  f"{r['write_lag_median_ms']:>14.3f} {r['write_lag_p99_ms']:>8.3f}",
                  flush=True)
        print("targets (issue 8): ≤ 2 ms median, ≤ 10 ms p99 at 32 sessions")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        print(json.dumps({"twin": url}))


if __name__ == "__main__":
    main()
