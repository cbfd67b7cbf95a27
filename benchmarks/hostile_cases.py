"""Issue 29's adversarial set as one script: every case through the `endurance` command
in a child process (30 s and a 3 GiB address-space cap), classified as

  clean     — one `error:` line and the right exit code (or, where the right outcome is
              a run, its rows right), before the 30 s kill; the seconds are printed
              (they include ~2-5 s of interpreter start-up and, for runs, finalizing)
  traceback — a Python traceback, or an exit code from a crash (134, 137, …)
  hang      — still running at 30 s (killed)
  accepted  — exit 0 (or the wrong verdict / the wrong culprit) where it should refuse

Run it against any checkout: `python benchmarks/hostile_cases.py [--root DIR]`
(default: this repository). Lying servers are raw asyncio sockets on 127.0.0.1:0 in a
thread of this process. Measured, not asserted: the tests are in tests/reliability,
tests/endpoints and tests/check.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parents[1]
CAP = 3 * 2**30
HANG_S = 30.0


def _ev(name: str, body: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(body)}\n\n".encode()


START = _ev("message_start", {"type": "message_start", "message": {
    "id": "m", "usage": {"input_tokens": 3, "output_tokens": 0}}})
BLOCK = _ev("content_block_start", {"type": "content_block_start", "index": 0,
                                    "content_block": {"type": "text", "text": ""}})
DELTA = _ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "text_delta", "text": "hello"}})
END = (_ev("content_block_stop", {"type": "content_block_stop", "index": 0})
       + _ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                               "usage": {"output_tokens": 1}})
       + _ev("message_stop", {"type": "message_stop"}))
SSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"


def _chunk(b: bytes) -> bytes:
    return f"{len(b):x}\r\n".encode() + b + b"\r\n"


Write = Callable[[asyncio.StreamWriter], Awaitable[None]]


def _chunked(*events: bytes, close: bool = True) -> Write:
    async def w(wr: asyncio.StreamWriter) -> None:
        wr.write(SSE + b"transfer-encoding: chunked\r\n\r\n" + _chunk(b"".join(events))
                 + (_chunk(b"") if close else b""))
    return w


async def _http10(wr: asyncio.StreamWriter) -> None:
    wr.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
             + START + BLOCK + DELTA + END)


async def _length_larger(wr: asyncio.StreamWriter) -> None:
    body = START + BLOCK + DELTA + END
    wr.write(SSE + b"content-length: " + str(10 * len(body)).encode() + b"\r\n\r\n" + body)


async def _gzip_garbage(wr: asyncio.StreamWriter) -> None:
    junk = b"\x1f\x8b\x08\x00 not deflate" * 50
    wr.write(SSE + b"content-encoding: gzip\r\ncontent-length: "
             + str(len(junk)).encode() + b"\r\n\r\n" + junk)


_BOMB: list[bytes] = []


async def _gzip_bomb(wr: asyncio.StreamWriter) -> None:
    wr.write(SSE + b"content-encoding: gzip\r\ncontent-length: "
             + str(len(_BOMB[0])).encode() + b"\r\n\r\n" + _BOMB[0])


async def _no_line_feed(wr: asyncio.StreamWriter) -> None:
    wr.write(SSE + b"transfer-encoding: chunked\r\n\r\n")
    piece = _chunk(b"a" * 65536)
    for _ in range(16384):                     # 1 GiB
        wr.write(piece)
        await wr.drain()


async def _delta_gb(wr: asyncio.StreamWriter) -> None:
    wr.write(SSE + b"transfer-encoding: chunked\r\n\r\n" + _chunk(START + BLOCK))
    d = _ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "text_delta", "text": "ab" * 32768}})
    piece = _chunk(d)
    for _ in range(16384):
        wr.write(piece)
        await wr.drain()


async def _garbage_status(wr: asyncio.StreamWriter) -> None:
    wr.write(b"\x00\xffHELLO\r\n\r\n")


async def _silent(wr: asyncio.StreamWriter) -> None:
    await asyncio.sleep(3600)


async def _trickle(wr: asyncio.StreamWriter) -> None:
    wr.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
             b"transfer-encoding: chunked\r\n\r\n")
    while True:
        wr.write(b"1\r\n \r\n")
        await wr.drain()
        await asyncio.sleep(0.1)


async def _json_gb(wr: asyncio.StreamWriter) -> None:
    wr.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
             b"content-length: 1000000000\r\n\r\n")
    piece = b'{"data": [' + b'{"id": "m"}, ' * 5000
    for _ in range(1_000_000_000 // len(piece)):
        wr.write(piece)
        await wr.drain()


async def _models_ok(wr: asyncio.StreamWriter) -> None:
    body = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'
    wr.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
             + str(len(body)).encode() + b"\r\n\r\n" + body)


async def _not_found(wr: asyncio.StreamWriter) -> None:
    wr.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")


class Server:
    """GET (the pre-flight) → `models`; POST → `messages`; connections kept open."""

    def __init__(self, models: Write, messages: Write) -> None:
        self.models, self.messages = models, messages
        self.url = ""
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),),
                                        daemon=True)

    async def _handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                n = next((int(x.split(b":")[1]) for x in head.lower().split(b"\r\n")
                          if x.startswith(b"content-length:")), 0)
                if n:
                    await r.readexactly(n)
                await (self.models if head.startswith(b"GET") else self.messages)(w)
                await w.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError,
                asyncio.LimitOverrunError):
            pass
        finally:
            w.close()

    async def _serve(self) -> None:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._ready.set()
        await self._stop.wait()
        server.close()

    def __enter__(self) -> Server:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(2)


def _scenario(tmp: Path, **over: Any) -> Path:
    base: dict[str, Any] = {
        "name": "h", "sessions": 1, "turns": 2, "seed": 3, "system": {"tokens": 100},
        "tools": {"count": 1, "tokens": 100}, "first_prompt_tokens": 50,
        "user_prompt_tokens": 20, "retry": {"max_attempts": 1},
        "limits": {"max_failed_sessions_frac": 1.0},
        "turn_templates": [{"name": "answer", "weight": 1, "output_tokens": 20}]}
    base.update(over)
    path = tmp / f"s{len(list(tmp.glob('s*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def endurance(root: Path, args: list[str]) -> tuple[int | None, str, float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "simulator", *args], capture_output=True,
                           text=True, timeout=HANG_S, preexec_fn=_cap, env=env, cwd=root,
                           errors="replace")
    except subprocess.TimeoutExpired:
        return None, "", time.monotonic() - t0
    return p.returncode, (p.stdout + p.stderr).strip(), time.monotonic() - t0


def _rows(out: str) -> list[dict[str, Any]]:
    run_dir = Path(out.splitlines()[-1]) if out else Path("/nonexistent")
    turns = run_dir / "turns.jsonl"
    return [json.loads(x) for x in turns.read_text().splitlines()] if turns.exists() else []


def classify(rc: int | None, out: str, secs: float, expect: str,
             needle: str = "") -> str:
    """expect: 'refuse2' / 'refuse1' (one error line, that exit code), 'ok' (exit 0 and
    every row ok), 'malformed' (the run ends, its rows malformed_stream, none ok),
    'fail1' (exit 1, no traceback)."""
    if rc is None:
        return "hang"
    if "Traceback" in out or rc not in (0, 1, 2, 130):
        return "traceback"
    lines = out.splitlines()
    if expect.startswith("refuse"):
        code = int(expect[-1])
        errs = [x for x in lines if x.startswith("error: ")]
        good = rc == code and len(errs) == 1 and needle in errs[0] and len(lines) <= 2
        return "clean" if good else ("accepted" if rc == 0 or errs else "other")
    if expect == "fail1":
        return "clean" if rc == 1 else ("accepted" if rc == 0 else "other")
    rows = _rows(out)
    if expect == "ok":
        good = rc == 0 and bool(rows) and all(r["ok"] for r in rows)
        return "clean" if good else "accepted"   # a right reply recorded wrong
    if expect == "malformed":
        bad = [r for r in rows if not r["ok"]]
        good = bool(rows) and not any(r["ok"] for r in rows) and all(
            r.get("error_type") in ("malformed_stream", "response_too_large") for r in bad)
        return "clean" if good else ("accepted" if any(r["ok"] for r in rows) else "other")
    raise ValueError(expect)


def cli_cases(tmp: Path) -> list[tuple[str, list[str], str, str]]:
    s = _scenario(tmp)
    hw = _scenario(tmp, twin={"hardware": "z9000", "model": "qwen3-coder-30b-a3b-awq"})
    name = _scenario(tmp, name="x" * 50_000_000)
    flow = tmp / "flow.yaml"
    flow.write_text("name: x\nturns: [" + "1, " * 17_000_000 + "1]\n")
    out = ["--out", str(tmp / "r"), "--quiet"]
    return [
        ("kv-cache-gib 1e30", ["run", str(s), *out, "--kv-cache-gib", "1e30"], "refuse2",
         "kv_cache_gib"),
        ("kv-cache-gib 1e9", ["run", str(s), *out, "--kv-cache-gib", "1e9"], "refuse2",
         "kv_cache_gib"),
        ("--set twin.kv_cache_gib=1e6", ["run", str(s), *out, "--set",
                                         "twin.kv_cache_gib=1e6"], "refuse2", "kv_cache_gib"),
        ("validate kv 1e30", ["validate", str(s), "--set", "twin.kv_cache_gib=1e30"],
         "refuse2", "kv_cache_gib"),
        ("validate unknown hardware", ["validate", str(hw)], "refuse2", "z9000"),
        ("validate 50 MB name", ["validate", str(name)], "refuse2", "name: "),
        ("run 50 MB name", ["run", str(name), *out], "refuse2", "name: "),
        ("sessions 100000 (twin)", ["run", str(s), *out, "--sessions", "100000"],
         "refuse2", "sessions"),
        ("validate 50 MB flow list", ["validate", str(flow)], "refuse2", "nodes"),
        ("run 50 MB flow list", ["run", str(flow), *out], "refuse2", "nodes"),
    ]


TIGHT = ["--set", "timeouts.first_byte_s=1", "--set", "endpoint.timeout_s=1", "--set",
         "timeouts.total_s=3", "--set", "endpoint.connect_timeout_s=2"]

SERVER_CASES: list[tuple[str, Write, Write, list[str], str, str]] = [
    # (name, GET /v1/models, POST /v1/messages, extra args, expect, needle)
    ("pre-flight: garbage status line", _garbage_status, _not_found, [], "refuse1",
     "/v1/models"),
    ("pre-flight: silent (tight limits)", _silent, _not_found, TIGHT, "refuse1",
     "/v1/models"),
    ("pre-flight: trickled pings (tight)", _trickle, _not_found, TIGHT, "refuse1",
     "/v1/models"),
    ("pre-flight: 1 GB body (tight)", _json_gb, _not_found, TIGHT, "refuse1",
     "/v1/models"),
    ("stream: gzip garbage (lean)", _not_found, _gzip_garbage, [], "malformed", ""),
    ("stream: gzip garbage (aiohttp)", _not_found, _gzip_garbage, ["--client", "aiohttp"],
     "malformed", ""),
    ("stream: valid, closed (baseline)", _not_found, _chunked(START, BLOCK, DELTA, END),
     [], "ok", ""),
    ("stream: gzip bomb 256 MiB (lean)", _not_found, _gzip_bomb, [], "malformed", ""),
    ("stream: 1 GB with no line feed", _not_found, _no_line_feed, [], "malformed", ""),
    ("stream: 1 GB of deltas", _not_found, _delta_gb, [], "malformed", ""),
    ("stream: complete, never closed", _not_found, _chunked(START, BLOCK, DELTA, END,
                                                            close=False), [], "ok", ""),
    ("stream: HTTP/1.0, no length", _not_found, _http10, [], "ok", ""),
    ("stream: content-length > body", _not_found, _length_larger, [], "ok", ""),
    ("stream: deltas, no message_start", _not_found, _chunked(BLOCK, DELTA, END), [],
     "malformed", ""),
    ("stream: events out of order", _not_found, _chunked(START, DELTA, BLOCK, END), [],
     "malformed", ""),
    ("stream: message_stop first", _not_found,
     _chunked(_ev("message_stop", {"type": "message_stop"}), START, BLOCK, DELTA, END),
     [], "malformed", ""),
]

CHECK_CASES: list[tuple[str, Write, Write]] = [      # /v1/models answers; the rest lies
    ("check --timeout 10: complete, never closed", _models_ok,
     _chunked(START, BLOCK, DELTA, END, close=False)),
    ("check --timeout 10: HTTP/1.0, no length", _models_ok, _http10),
    ("check --timeout 10: content-length > body", _models_ok, _length_larger),
    ("check: 1 GB JSON body", _models_ok, _json_gb),
]


def resume_case(root: Path, tmp: Path) -> tuple[int | None, str, float]:
    s1, s2 = _scenario(tmp, turns=4), _scenario(tmp, turns=4, seed=9)
    outs = []
    for s in (s1, s2):
        _, out, _ = endurance(root, ["run", str(s), "--out", str(tmp / "rr"), "--quiet"])
        outs.append(Path(out.splitlines()[-1]))
    mine, other = outs
    m = json.loads((mine / "manifest.json").read_text())
    m["status"] = "interrupted"
    (mine / "manifest.json").write_text(json.dumps(m))
    for name in ("turns.jsonl", "history.jsonl"):
        keep = (mine / name).read_text().splitlines(keepends=True)[:2]
        foreign = (other / name).read_text().splitlines(keepends=True)[:1]
        (mine / name).write_text("".join(foreign + keep))
    (mine / "turns.parquet").unlink(missing_ok=True)
    return endurance(root, ["run", "--resume", str(mine), "--quiet"])


def label_case(root: Path, tmp: Path) -> str:
    s = _scenario(tmp)
    label = "a\n# injected\u202eevil<b>x</b>"
    _, out, _ = endurance(root, ["run", str(s), "--out", str(tmp / "rl"), "--quiet",
                                  "--label", label])
    run_dir = Path(out.splitlines()[-1])
    endurance(root, ["report", str(run_dir)])
    md = (run_dir / "report.md").read_text()
    page = (run_dir / "report.html").read_text()
    raw = "\u202e" in md + page or any(x.startswith("# injected") for x in md.splitlines())
    return "accepted" if raw or "<b>x</b>" in md else "clean"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=HERE)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    root = args.root.resolve()
    _BOMB.append(gzip.compress(b"\n" * (256 << 20), 6))     # 256 MiB from ~250 KB
    counts: dict[str, int] = {}

    def report(name: str, kind: str, rc: int | None, secs: float, out: str) -> None:
        counts[kind] = counts.get(kind, 0) + 1
        last = out.splitlines()[-1][:110] if out else ""
        print(f"{kind:9} rc={rc!s:4} {secs:5.1f}s  {name:44} {last}", flush=True)

    with tempfile.TemporaryDirectory(prefix="hostile-") as t:
        tmp = Path(t)
        for name, argv, expect, needle in cli_cases(tmp):
            if args.only and args.only not in name:
                continue
            rc, out, secs = endurance(root, argv)
            report(name, classify(rc, out, secs, expect, needle), rc, secs, out)
        for name, models, messages, extra, expect, needle in SERVER_CASES:
            if args.only and args.only not in name:
                continue
            with Server(models, messages) as srv:
                rc, out, secs = endurance(root, ["run", str(_scenario(tmp)), "--endpoint",
                                                 srv.url, "--out", str(tmp / "rs"),
                                                 "--quiet", *extra])
            report(name, classify(rc, out, secs, expect, needle), rc, secs, out)
        for name, models, messages in CHECK_CASES:
            if args.only and args.only not in name:
                continue
            with Server(models, messages) as srv:
                rc, out, secs = endurance(root, ["check", srv.url, "--timeout", "10"])
            report(name, classify(rc, out, secs, "fail1"), rc, secs, out)
        if not args.only or "resume" in args.only:
            rc, out, secs = resume_case(root, tmp)
            report("resume of a journal with another run's rows",
                   classify(rc, out, secs, "refuse2", "another run"), rc, secs, out)
        if not args.only or "label" in args.only:
            report("label with newline, RTL override, HTML", label_case(root, tmp), 0, 0.0,
                   "")
    print("counts:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
