"""Client ceiling: how many streamed tokens/s can each client path ingest on one core?

Starts `fake_server.py` pinned to one core and runs every (path, sessions) point in a
fresh client process pinned to another, so CPU time (`getrusage`) and peak RSS belong
to that point alone. Regimes: ``bulk`` (zero-latency server, whole reply in one write)
and ``paced`` (each stream at ``--rate`` tokens/s, one token per write).

Paths: ``sdk-bare`` (the official SDK alone, iterating raw events), ``sdk`` (our SDK
endpoint, httpx2), ``sdk-aiohttp`` (same, SDK's aiohttp
backend), ``aiohttp`` (our aiohttp endpoint), ``lean`` (our default: hand-written
HTTP/1.1 on asyncio.Protocol; both with per-token timestamps), ``plain`` (aiohttp reader
that only reads the bytes, no parsing or timestamps), each ``+uvloop`` where useful. Peers
``aiperf`` and ``guidellm`` (``peers.py``) join the default paths when their venvs exist
(``bash benchmarks/install_peers.sh``; never installed by this script); each runs the
peer's own CLI pinned to the client core, GuideLLM against an OpenAI-protocol twin of the
fake server since it cannot speak the Messages API.

``--protocol openai`` runs everything on the OpenAI Chat Completions protocol against the
fake server's OpenAI twin: endurance's paths with `--api openai-chat` (``sdk`` is then
the official `openai` SDK) and both peers (AIPerf with ``--endpoint-type chat``), so
the side-by-side is one protocol for everyone.

    python benchmarks/client_ceiling.py --quick
    python benchmarks/client_ceiling.py --quick --protocol openai --regimes bulk
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
HERE = Path(__file__).resolve().parent

PATHS = ["sdk-bare", "sdk", "sdk-aiohttp", "aiohttp", "aiohttp+uvloop", "lean", "lean+uvloop", "plain",
         "plain+uvloop"]


# ----------------------------------------------------------------------- worker side --
API = os.environ.get("ENDURANCE_BENCH_PROTOCOL", "anthropic")  # set by --protocol


def _make_endpoint(path: str, url: str, sessions: int) -> Any:
    if API == "openai":
        return _make_openai_endpoint(path, url, sessions)
    if path.startswith("sdk"):
        from simulator.endpoints.sdk.anthropic import AnthropicSDKEndpoint
        return AnthropicSDKEndpoint(url, "bench", timeout_s=120, connect_timeout_s=10,
                                    backend="aiohttp" if path == "sdk-aiohttp" else "httpx",
                                    max_connections=sessions)
    if path.startswith("aiohttp"):
        from simulator.endpoints.http.aiohttp_client import AiohttpEndpoint
        return AiohttpEndpoint(url, "bench", timeout_s=120, connect_timeout_s=10,
                               max_connections=sessions)
    from simulator.endpoints.http.lean import LeanEndpoint
    return LeanEndpoint(url, "bench", timeout_s=120, connect_timeout_s=10,
                        max_connections=sessions)


def _make_openai_endpoint(path: str, url: str, sessions: int) -> Any:
    from simulator.endpoints.wire.dialects import OPENAI_CHAT
    kw: dict[str, Any] = {"timeout_s": 120, "connect_timeout_s": 10,
                          "max_connections": sessions}
    if path.startswith("sdk"):
        from simulator.endpoints.sdk.openai import OpenAISDKEndpoint
        return OpenAISDKEndpoint(url, "bench", backend="aiohttp" if path == "sdk-aiohttp"
                                 else "httpx", **kw)
    if path.startswith("aiohttp"):
        from simulator.endpoints.http.aiohttp_client import AiohttpEndpoint
        return AiohttpEndpoint(url, "bench", dialect=OPENAI_CHAT, **kw)
    from simulator.endpoints.http.lean import LeanEndpoint
    return LeanEndpoint(url, "bench", dialect=OPENAI_CHAT, **kw)


def _request() -> Any:
    from simulator.endpoints.base import LLMRequest
    from simulator.session.conversation import Prefix, user_text
    return LLMRequest(model="fake", prefix=Prefix("You are a benchmark.", (), 5, 0),
                      messages=(user_text("go"),), max_tokens=1024)


class PlainReader:
    """aiohttp POST + read every chunk; no SSE parsing, no timestamps: the floor."""

    def __init__(self, url: str, sessions: int, n_tokens: int) -> None:
        import aiohttp
        self._aiohttp = aiohttp
        from simulator.endpoints.wire.dialects import dialect
        d = dialect("openai-chat" if API == "openai" else "anthropic")
        self._url = url.rstrip("/") + d.path
        self._n = n_tokens
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=sessions),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=120))
        self._body = d.body(_request())

    async def send(self, _: Any) -> int:
        async with self._session.post(self._url, data=self._body, headers={
                "content-type": "application/json"}) as resp:
            async for _chunk in resp.content.iter_any():
                pass
        return self._n

    async def aclose(self) -> None:
        await self._session.close()


class BareSDKReader:
    """The official SDK alone: `messages.create(stream=True)` iterating raw events, no
    bookkeeping (what our SDK path must at least match)."""

    def __init__(self, url: str, sessions: int) -> None:
        import anthropic
        import httpx2
        limits = httpx2.Limits(max_connections=sessions, max_keepalive_connections=sessions)
        if API == "openai":
            import openai

            from simulator.endpoints.wire.openai_chat import chat_kwargs
            self._oa = openai.AsyncOpenAI(
                base_url=url + "/v1", api_key="bench", max_retries=0,
                http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=120))
            self._kw = chat_kwargs(_request())
            return
        self._client = anthropic.AsyncAnthropic(
            base_url=url, api_key="bench", max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(limits=limits, timeout=120))
        self._kw = _request().to_api_kwargs()

    async def send(self, _: Any) -> int:
        n = 0
        if API == "openai":
            chunks = await self._oa.chat.completions.create(
                **self._kw, stream=True, stream_options={"include_usage": True})
            async for chunk in chunks:
                if chunk.choices and chunk.choices[0].delta.content:
                    n += 1
            return n
        stream = await self._client.messages.create(**self._kw, stream=True)
        async for event in stream:
            if event.type == "content_block_delta":
                n += 1
        return n

    async def aclose(self) -> None:
        await (self._oa if API == "openai" else self._client).close()


async def _worker(path: str, url: str, sessions: int, per_session: int, n_tokens: int,
                  stagger_s: float) -> dict[str, Any]:
    ep: Any = (PlainReader(url, sessions, n_tokens) if path.startswith("plain")
               else BareSDKReader(url, sessions) if path == "sdk-bare"
               else _make_endpoint(path, url, sessions))
    req = _request()
    await ep.send(req)  # warm-up: imports, tokenizer, first connection
    durations: list[float] = []
    tokens = 0

    async def session(i: int) -> None:
        nonlocal tokens
        await asyncio.sleep(stagger_s * i / sessions)
        for _ in range(per_session):
            t = time.monotonic()
            r = await ep.send(req)
            durations.append(time.monotonic() - t)
            tokens += r if isinstance(r, int) else r.timing.n_deltas

    ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    async with asyncio.TaskGroup() as tg:
        for i in range(sessions):
            tg.create_task(session(i))
    elapsed = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    await ep.aclose()
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {"tokens": tokens, "requests": sessions * per_session, "elapsed_s": elapsed,
            "cpu_s": cpu, "peak_rss_mb": ru1.ru_maxrss / 1024,
            "p50_request_s": statistics.median(durations)}


def worker_main(a: argparse.Namespace) -> None:
    os.sched_setaffinity(0, {a.cpu})
    coro = _worker(a.path, a.url, a.sessions, a.per_session, a.tokens, a.stagger)
    if a.path.endswith("+uvloop"):
        import uvloop
        out = uvloop.run(coro)
    else:
        out = asyncio.run(coro)
    print(json.dumps(out), flush=True)


# ----------------------------------------------------------------------- driver side --
import peers as peer_runner  # noqa: E402  (benchmarks/, beside this file)
from machine import machine  # noqa: E402  (benchmarks/machine.py, beside this script)

PEER_PATHS = list(peer_runner.PROTOCOL)


def peers(protocol: str = "anthropic") -> dict[str, str]:
    """AIPerf / GuideLLM: detected from their venvs (never installed by this script);
    with `--protocol openai` every peer speaks Chat Completions."""
    found = peer_runner.installed()
    wire = {name: peer_runner.OPENAI_WIRE if protocol == "openai" else peer_runner.WIRE[name]
            for name in PEER_PATHS}
    return {name: (f"{peer_runner.version(name)} at {found[name].parent.parent} "
                   f"({wire[name]})" if name in found else
                   f"not installed (bash benchmarks/install_peers.sh → "
                   f"{peer_runner.PEERS_DIR / name})") for name in PEER_PATHS}


def start_server(mode: str, tokens: int, rate: float, cpu: int,
                 protocol: str = "anthropic") -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "fake_server.py"), "--mode", mode,
                             "--tokens", str(tokens), "--rate", str(rate), "--cpu", str(cpu),
                             "--protocol", protocol],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if not line or line[0] != "READY":
        proc.kill()
        raise SystemExit("fake server did not start")
    return proc, f"http://127.0.0.1:{line[1]}"


def run_peer_point(path: str, url: str, sessions: int, per_session: int, tokens: int,
                   cpu: int, runner_cpu: int, server_pid: int,
                   protocol: str = "anthropic") -> dict[str, Any]:
    """A peer CLI via `peers.py` in its own process (child subreaper, /proc sampler)."""
    res = subprocess.run([sys.executable, str(HERE / "peers.py"), "--peer", path, "--url", url,
                          "--sessions", str(sessions), "--requests", str(sessions * per_session),
                          "--tokens", str(tokens), "--cpu", str(cpu),
                          "--runner-cpu", str(runner_cpu), "--server-pid", str(server_pid),
                          "--protocol", protocol],
                         capture_output=True, text=True, timeout=1800, check=False)
    lines = res.stdout.strip().splitlines()
    if not lines:
        return {"error": res.stderr.strip().splitlines()[-1] if res.stderr else "failed"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def run_point(path: str, url: str, sessions: int, per_session: int, tokens: int,
              stagger: float, cpu: int, server_pid: int) -> dict[str, Any]:
    s0, t0 = peer_runner.proc_cpu_s(server_pid), time.monotonic()
    res = subprocess.run([sys.executable, __file__, "--worker", "--path", path, "--url", url,
                          "--sessions", str(sessions), "--per-session", str(per_session),
                          "--tokens", str(tokens), "--stagger", str(stagger),
                          "--cpu", str(cpu)], capture_output=True, text=True, timeout=900,
                         check=False, env={**os.environ, "ENDURANCE_BENCH_PROTOCOL": API})
    if res.returncode != 0:
        return {"error": res.stderr.strip().splitlines()[-1] if res.stderr else "failed"}
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    out["server_cpu_share"] = (peer_runner.proc_cpu_s(server_pid) - s0) / (time.monotonic() - t0)
    return out


def _fmt(path: str, n: int, r: dict[str, Any], extra: str) -> str:
    if "error" in r:
        return f"{path:<13} {n:>6}  error: {r['error'][:80]}"
    tok_s = r["tokens"] / r["elapsed_s"]
    us_tok = r["cpu_s"] / max(1, r["tokens"]) * 1e6
    flag = "  server-bound?" if r["server_cpu_share"] > 0.9 else ""
    return (f"{path:<13} {n:>6} {tok_s:>11,.0f} {r['requests'] / r['elapsed_s']:>9,.1f} "
            f"{us_tok:>9.2f} {1e6 / us_tok:>10,.0f} {r['peak_rss_mb']:>7.0f} "
            f"{r['server_cpu_share']:>6.0%}"
            f"{extra}{flag}" + (f"  [{r['protocol']}]" if "protocol" in r else ""))


def run_regime(a: argparse.Namespace, mode: str, counts: list[int]) -> dict[str, Any]:
    tokens = a.tokens if mode == "bulk" else a.paced_tokens
    proc, url = start_server(mode, tokens, a.rate, a.server_cpu, a.protocol)
    servers = {a.protocol: (proc, url)}
    if a.protocol == "anthropic" and any(peer_runner.PROTOCOL.get(p) == "openai"
                                         for p in a.paths):
        servers["openai"] = start_server(mode, tokens, a.rate, a.server_cpu, "openai")
    results: dict[str, Any] = {}
    try:
        title = (f"bulk: {tokens}-token replies, zero latency" if mode == "bulk" else
                 f"paced: {tokens}-token replies at {a.rate:g} tok/s per session")
        print(f"\n== {title} ==")
        extra_h = "  p50 req / ideal" if mode == "paced" else ""
        print(f"{'path':<13} {'sess':>6} {'tok/s':>11} {'req/s':>9} {'µs/tok':>9} "
              f"{'tok/cpu-s':>10} {'rss MB':>7} {'server':>6}{extra_h}")
        print("  µs/tok = client CPU µs per token (= ms per 1,000 tokens); tok/cpu-s = tokens "
              "per client CPU second (the one-core ceiling when the core is not shared)")
        for n in counts:
            for path in a.paths:
                if mode == "bulk":
                    per = max(1, round(a.bulk_target / (tokens * n)))
                    stagger = 0.0
                else:
                    per, stagger = a.paced_requests, 1.0 / a.rate
                if path in PEER_PATHS:
                    proto = "openai" if a.protocol == "openai" else peer_runner.PROTOCOL[path]
                    sp, surl = servers[proto]
                    r = run_peer_point(path, surl, n, per, tokens, a.client_cpu, a.server_cpu,
                                       sp.pid, proto)
                else:
                    r = run_point(path, url, n, per, tokens, stagger, a.client_cpu, proc.pid)
                extra = ""
                if mode == "paced" and "error" not in r:
                    extra = f"  {r['p50_request_s'] / (tokens / a.rate):>15.2f}"
                print(_fmt(path, n, r, extra), flush=True)
                results[f"{path}@{n}"] = r
            _print_ratios(results, n)
    finally:
        for sp, _ in servers.values():
            sp.terminate()
            sp.wait(timeout=10)
    return results


def _print_ratios(results: dict[str, Any], n: int) -> None:
    def rate(p: str) -> float | None:
        r = results.get(f"{p}@{n}")
        return r["tokens"] / r["elapsed_s"] if r and "error" not in r else None
    base = rate("sdk")
    parts = [f"{p} {v / base:.1f}×" for p in PATHS if (v := rate(p)) and base and p != "sdk"]
    if parts:
        print(f"{'':<13} {n:>6}  vs sdk: " + ", ".join(parts))
    lean = rate("lean")
    vs = [f"{lean / v:.1f}× {p}" for p in PEER_PATHS if (v := rate(p)) and lean]
    if vs:
        print(f"{'':<13} {n:>6}  lean " + ", ".join(vs))


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="few points, short runs")
    ap.add_argument("--regimes", nargs="+", default=["bulk", "paced"])
    ap.add_argument("--paths", nargs="+", default=PATHS + list(peer_runner.installed()),
                    choices=PATHS + PEER_PATHS)
    ap.add_argument("--sessions", type=int, nargs="+", default=None)
    ap.add_argument("--tokens", type=int, default=512, help="bulk reply length")
    ap.add_argument("--paced-tokens", type=int, default=None, help="paced reply length")
    ap.add_argument("--rate", type=float, default=50.0, help="paced tokens/s per session")
    ap.add_argument("--paced-requests", type=int, default=None)
    ap.add_argument("--bulk-target", type=int, default=None, help="tokens per bulk point")
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, help="also write results here")
    ap.add_argument("--protocol", choices=["anthropic", "openai"], default="anthropic",
                    help="wire protocol of every path and peer (openai: Chat Completions)")
    # worker mode (internal)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", default="lean", help=argparse.SUPPRESS)
    ap.add_argument("--url", default="", help=argparse.SUPPRESS)
    ap.add_argument("--per-session", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--stagger", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--cpu", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.paced_tokens = a.paced_tokens or (100 if a.quick else 250)
    a.paced_requests = a.paced_requests or (1 if a.quick else 2)
    a.bulk_target = a.bulk_target or (60_000 if a.quick else 400_000)
    return a


def main(argv: list[str] | None = None) -> None:
    global API
    a = parse(argv)
    API = os.environ["ENDURANCE_BENCH_PROTOCOL"] = a.protocol if not a.worker else API
    if a.worker:
        a.sessions = a.sessions[0] if a.sessions else 1
        worker_main(a)
        return
    print(f"machine: {machine()}")
    print(f"client pinned to cpu {a.client_cpu}, fake server to cpu {a.server_cpu}; "
          f"protocol {a.protocol}")
    for name, state in peers(a.protocol).items():
        print(f"peer {name}: {state}")
    out: dict[str, Any] = {"machine": machine(), "peers": peers(a.protocol)}
    for mode in a.regimes:
        counts = a.sessions or ([1, 16, 256] if a.quick else [1, 4, 16, 64, 256, 1024])
        if mode == "paced" and not a.sessions:
            counts = [32, 1000] if a.quick else [1, 32, 256, 1000]
        out[mode] = run_regime(a, mode, counts)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
