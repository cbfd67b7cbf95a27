"""The adversarial sets of issues 29 and 38 as one script: every case through the
`endurance` command in a child process (under an address-space cap), classified as

  clean     — one `error:` line and the right exit code (or, where the right outcome is
              a run, its rows right), within the case's bound; the seconds are printed
              (they include ~2-5 s of interpreter start-up and, for runs, finalizing)
  traceback — a Python traceback, or an exit code from a crash (134, 137, …)
  hang      — still running at the kill (30 s round 2, 70 s round 3)
  accepted / nonsense — exit 0 (or the wrong verdict) where it should refuse
  slow      — the right outcome, past the case's bound (10 s in round 3)
  other     — the wrong exit code, or data it must not touch touched

Run it against any checkout: `python benchmarks/hostile_cases.py [--root DIR] [--round
2|3] [--only NAME] [--group G]` (default: this repository, both rounds). Lying servers
are raw asyncio sockets on 127.0.0.1:0 in a thread of this process, the same ones the
tests use (`tests/lying_servers.py`). Round 3 (issue 38: traces, export, twin fit and
points, tier/fleet/recall options, --reset-prefix-cache, the pre-flight, resume, Ctrl-C,
counts) is `benchmarks/hostile_round3.py`; it ends with a table of verdicts by kind and
by group. Round 4 (issue 49: interrupted ramps, `watch` on hostile journals, `--ramp`
numbers, `--metrics-port`, /dev/full, Ctrl-C at import; lying `--scrape` targets, `twin
fit` inputs, `--from-twin`) is `benchmarks/hostile_round4.py` and `hostile_round4_lies.py`.
Round 5 (issue 57) is `hostile_round5_a.py` and `hostile_round5_b.py` (`--round 5`).
Measured, not asserted: the tests are in tests/.
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
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))      # the shared lying servers (tests/lying_servers.py)

from tests.lying_servers import (  # noqa: E402
    BLOCK,
    DELTA,
    END,
    SSE,
    START,
    Reply,
    chunk,
    chunked,
    ev,
    garbage_status,
    json_gb,
    lying_server,
    models_ok,
    not_found,
    silent,
    trickle,
)

CAP = 3 * 2**30
HANG_S = 30.0
Write = Reply
_chunk, _chunked, _ev = chunk, chunked, ev


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


_garbage_status, _silent, _trickle, _json_gb = garbage_status, silent, trickle, json_gb
_models_ok, _not_found = models_ok, not_found


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


def round2(root: Path, tmp: Path, only: str, report: Any) -> None:
    for name, argv, expect, needle in cli_cases(tmp):
        if only and only not in name:
            continue
        rc, out, secs = endurance(root, argv)
        report(name, classify(rc, out, secs, expect, needle), rc, secs, out)
    for name, models, messages, extra, expect, needle in SERVER_CASES:
        if only and only not in name:
            continue
        with lying_server(messages, models, every_get=True) as url:
            rc, out, secs = endurance(root, ["run", str(_scenario(tmp)), "--endpoint",
                                             url, "--out", str(tmp / "rs"),
                                             "--quiet", *extra])
        report(name, classify(rc, out, secs, expect, needle), rc, secs, out)
    for name, models, messages in CHECK_CASES:
        if only and only not in name:
            continue
        with lying_server(messages, models, every_get=True) as url:
            rc, out, secs = endurance(root, ["check", url, "--timeout", "10"])
        report(name, classify(rc, out, secs, "fail1"), rc, secs, out)
    if not only or "resume" in only:
        rc, out, secs = resume_case(root, tmp)
        report("resume of a journal with another run's rows",
               classify(rc, out, secs, "refuse2", "another run"), rc, secs, out)
    if not only or "label" in only:
        report("label with newline, RTL override, HTML", label_case(root, tmp), 0, 0.0, "")


# issue 38's triage of round 3 on 21cb8b4 (notes: issue38-cases.md), by kind
BEFORE = {"traceback": 38, "hang": 22, "nonsense": 46, "count": 1, "other": 14, "clean": 129}
KINDS = ("traceback", "hang", "nonsense", "count", "other", "slow", "clean")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=HERE)
    ap.add_argument("--round", choices=["2", "3", "4", "5", "all"], default="all")
    ap.add_argument("--only", default="")
    ap.add_argument("--group", default="",
                    help="rounds 3-5: one group (import, export, …; answers, telemetry, …)")
    args = ap.parse_args()
    root = args.root.resolve()
    counts: dict[str, int] = {}

    def report(name: str, kind: str, rc: int | None, secs: float, out: str) -> None:
        counts[kind] = counts.get(kind, 0) + 1
        last = out.strip().splitlines()[-1][:110] if out.strip() else ""
        print(f"{kind:9} rc={rc!s:4} {secs:5.1f}s  {name:44} {last}", flush=True)

    with tempfile.TemporaryDirectory(prefix="hostile-") as t:
        tmp = Path(t)
        if args.round in ("2", "all") and not args.group:
            _BOMB.append(gzip.compress(b"\n" * (256 << 20), 6))     # 256 MiB from ~250 KB
            round2(root, tmp, args.only, report)
            print("round 2 counts:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        if args.round in ("3", "all"):
            from benchmarks.hostile_round3 import run_all
            counts.clear()
            tally = run_all(root, tmp / "r3", args.only, args.group, report)
            print("\nround 3 (issue 38), by kind — before: the triage on 21cb8b4 (250 cases); "
                  "after: this run")
            print("| kind | before | after |\n|---|---|---|")
            for k in KINDS:
                print(f"| {k} | {BEFORE.get(k, 0)} | {tally.by_kind.get(k, 0)} |")
            print(f"| total | {sum(BEFORE.values())} | {sum(tally.by_kind.values())} |")
            print("\nby group: " + " · ".join(
                f"{g} " + "/".join(str(v.get(k, 0)) for k in KINDS)
                for g, v in tally.by_group.items()) + f"  ({'/'.join(KINDS)})")
        if args.round in ("4", "all"):
            from benchmarks.hostile_round4 import run_all as run_round4
            tally = run_round4(root, tmp / "r4", args.only, args.group, report)
            total = sum(tally.by_kind.values())
            print(f"\nround 4 (issue 49): {tally.by_kind.get('clean', 0)} of {total} clean; "
                  + ", ".join(f"{k} {v}" for k, v in sorted(tally.by_kind.items())))
            print("by group: " + " · ".join(
                f"{g} {v.get('clean', 0)}/{sum(v.values())}"
                for g, v in tally.by_group.items()) + "  (clean/total)")
        if args.round in ("5", "all"):
            round5(root, tmp / "r5", args.only, args.group, report)


def round5(root: Path, tmp: Path, only: str, group: str, report: Any) -> None:
    """Issue 57: part a's cases (`hostile_round5_a.py`, when present) and part b's."""
    import importlib
    parts = []
    for name in ("hostile_round5_a", "hostile_round5_b"):
        try:
            parts.append((name, importlib.import_module(f"benchmarks.{name}")))
        except ModuleNotFoundError as exc:
            if exc.name != f"benchmarks.{name}":
                raise
            print(f"round 5: {name}.py not in this checkout; its cases skipped")
    by_kind: dict[str, int] = {}
    by_group: dict[str, dict[str, int]] = {}
    for name, mod in parts:
        tally = mod.run_all(root, tmp / name, only, group, report)
        for k, v in tally.by_kind.items():
            by_kind[k] = by_kind.get(k, 0) + v
        for g, kinds in tally.by_group.items():
            into = by_group.setdefault(g, {})
            for k, v in kinds.items():
                into[k] = into.get(k, 0) + v
    total = sum(by_kind.values())
    print(f"\nround 5 (issue 57): {by_kind.get('clean', 0)} of {total} clean; "
          + ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items())))
    print("by group: " + " · ".join(f"{g} {v.get('clean', 0)}/{sum(v.values())}"
                                    for g, v in by_group.items()) + "  (clean/total)")


if __name__ == "__main__":
    main()
