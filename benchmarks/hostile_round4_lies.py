"""Issue 49's hostile cases, second part of round four (run with the first by
`benchmarks/hostile_cases.py --round 4`): telemetry that lies, `twin fit` with hostile
spec_replay points and profiles, and `--from-twin` as typed.

  telemetry  a real `endurance run --endpoint <the HTTP twin> --scrape <a liar>`: the
             run completes (exit 0), one `telemetry: TARGET: STATUS (REASON)` line names
             the target, manifest.json and summary.json hold the same `telemetry` block,
             and a target that lied gives no energy figure (one GPU exposed twice: `ok`,
             its duplicate named, counted once)
  fits       `twin fit` on one spec_replay point (the files of tests/twin/model/
             test_twin_fit_replay_inputs.py) or with a binary --model/--hardware: one
             `error:` line and nothing else, exit 2; a clean point still fits (exit 0)
  from-twin  `size --from-twin VALUE`: one line naming --from-twin (never --twin), exit
             2, no results folder

Liars are raw asyncio servers on 127.0.0.1 port 0 in a thread of the benchmark,
started before their case and stopped after it (`tests.lying_servers.lying_server`);
every loop in them is bounded by the case's kill. The twin endpoint runs in-thread too
(`tests.reliability_twin.TwinThread`, time ×1000).
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from benchmarks.hostile_round3 import Case
from benchmarks.hostile_round3 import verdict as verdict3
from tests.lying_servers import (
    Reply,
    byte_a_second,
    garbage_status,
    html_200,
    json_gb,
    long_line,
    power_text,
    prom,
    silent,
)

TEL_BOUND_S = 30.0     # a run of the twin with its finalize, and a scrape timeout or two

TWICE = power_text(180.0, 70.0, 180.0, uuids=("GPU-a", "GPU-b", "GPU-a"))
LIARS: dict[str, Reply | None] = {
    "non-utf8": prom(b"\xff\xfe" + power_text(100.0)),
    "negative-power": prom(power_text(-350.0)),
    "inf-power": prom(power_text(math.inf)),
    "nan-power": prom(power_text(100.0, math.nan)),
    "gpu-exposed-twice": prom(TWICE),
    "garbage": garbage_status,
    "html": html_200,
    "http-500": prom(b"oops", "500 Internal Server Error"),
    "never-answers": silent,
    "1-byte-a-second": byte_a_second,
    "closed-port": None,
    "1GB-body": json_gb,
    "64MB-line": long_line,
}
# what the console line must say: status, a piece of the reason
TELEMETRY: dict[str, tuple[str, str]] = {
    "non-utf8": ("failed", "not UTF-8"), "negative-power": ("invalid", "-350 (negative)"),
    "inf-power": ("invalid", "inf (not finite)"), "nan-power": ("invalid", "nan (not finite)"),
    "gpu-exposed-twice": ("ok", "duplicate series counted once"),
    "garbage": ("failed", "scrape failed"), "html": ("failed", "not Prometheus"),
    "http-500": ("failed", "HTTP 500"), "never-answers": ("failed", "TimeoutError"),
    "1-byte-a-second": ("failed", "TimeoutError"), "closed-port": ("failed", "scrape failed"),
    "1GB-body": ("failed", "1,000,000,000 bytes announced"), "64MB-line": ("failed", "body over"),
}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def servers(spec: str | None) -> Iterator[dict[str, str]]:
    """The case's servers: `scrape:LIAR` is the HTTP twin (URL) and the liar (SCRAPE)."""
    if spec is None or not spec.startswith("scrape:"):
        yield {}
        return
    from tests.lying_servers import lying_server
    from tests.reliability_twin import TwinThread
    liar = LIARS[spec.removeprefix("scrape:")]
    with ExitStack() as stack:
        twin = stack.enter_context(TwinThread(time_scale=1000.0))
        target = (stack.enter_context(lying_server(liar)) if liar is not None
                  else f"http://127.0.0.1:{_closed_port()}")
        yield {"URL": twin.url, "SCRAPE": target + "/metrics"}


# ---------------------------------------------------------------- fixtures
FIT_HEAD = "hardware: cpu-2core\nmodel: smollm2-135m\nfit: [spec_step_s]\npoints:\n"
POINT = ("  - {{kind: spec_replay, spec: '{spec}', prompt_lookup_min: {lo}, "
         "prompt_lookup_max: {hi}, exchanges: {ex}, measured: 50, unit: {unit}, "
         "batch: {batch}}}\n")
GOOD = [[list(range(40)), [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4]]] * 2
# name: (overrides of the point, what the one line says); "ok": the clean point fits
FITS: dict[str, tuple[dict[str, Any], str]] = {
    "negative-token": ({"exchanges": [[[1, 2], [3, -5]]]}, "-5 is not a token id"),
    "fractional-token": ({"exchanges": [[[1, 2.5], [3]]]}, "is not a whole-number token id"),
    "deep-json": ({"raw": b"[" * 100_000 + b"]" * 100_000}, "nested deeper than"),
    "exchanges-dev-zero": ({"ex": "/dev/zero"}, "a device, not a regular exchanges file"),
    "exchanges-fifo": ({"ex": "fifo.json", "fifo": True}, "a FIFO, not a regular exchanges"),
    "1.2M-token-reply": ({"exchanges": [[[1], list(range(1000)) * 1200]]},
                         "1,200,001 tokens of prompt and reply"),
    "ngram-0": ({"spec": "ngram:0"}, "speculative decoding must be one of"),
    "ngram-abc": ({"spec": "ngram:abc"}, "speculative decoding must be one of"),
    "lookup-min-above-max": ({"lo": 6, "hi": 4}, "prompt_lookup_min 6 is above"),
    "batch-1048576": ({"batch": 1048576}, "1,048,576 streams: at most 1,024"),
    "lookup-1e12": ({"hi": 10**12}, "points.0.prompt_lookup_max"),
    "lookup-1e12-text": ({"hi": "1e12"}, "points.0.prompt_lookup_max"),   # YAML: a string
    "unit-seconds": ({"unit": "s"}, "measured in tok_s, not s"),
    "ok": ({}, ""),
}
BINARY = bytes(range(128, 256)) * 8


def make_fixtures(fx: Path) -> None:
    """One folder per fit case (p.yaml beside its exchanges), and a binary profile."""
    fx.mkdir(parents=True, exist_ok=True)
    (fx / "bin.yaml").write_bytes(BINARY)
    for name, (kw, _) in FITS.items():
        d = fx / "fit" / name
        d.mkdir(parents=True, exist_ok=True)
        ex = str(kw.get("ex", "ex.json"))
        if kw.get("fifo"):
            os.mkfifo(d / ex)
        elif ex == "ex.json":
            raw = kw.get("raw")
            (d / ex).write_bytes(raw if isinstance(raw, bytes)
                                 else json.dumps(kw.get("exchanges", GOOD)).encode())
        (d / "p.yaml").write_text(FIT_HEAD + POINT.format(
            spec=kw.get("spec", "ngram:4"), lo=kw.get("lo", 2), hi=kw.get("hi", 4), ex=ex,
            unit=kw.get("unit", "tok_s"), batch=kw.get("batch", 1)), encoding="utf-8")


# ---------------------------------------------------------------- cases
def cases() -> list[Case]:
    out: list[Case] = []
    for name in LIARS:
        out.append(Case(f"scrape-{name}", "telemetry",
                        "$E run $F/s.yaml --endpoint $URL --scrape $SCRAPE --out $T/o "
                        "--progress off", "telemetry", server=f"scrape:{name}",
                        bound_s=TEL_BOUND_S, needle=name))
    for name, (_, needle) in FITS.items():
        out.append(Case(f"twin-fit-{name}", "fits", f"$E twin fit $F/fit/{name}/p.yaml",
                        "ok" if name == "ok" else "refuse2", needle=needle))
    for opt in ("--model", "--hardware"):
        out.append(Case(f"twin-fit{opt}-binary", "fits",
                        f"$E twin fit $F/fit/ok/p.yaml {opt} $F/bin.yaml", "refuse2",
                        needle="bin.yaml: not UTF-8 text"))
    size = ("$E size $ROOT/scenarios/calibration/twin-vs-vllm-cpu.yaml --endpoint "
            "http://127.0.0.1:9 --ramp 1,2 --slo 'per_session_tok_s>=9' --out $T/o "
            "--from-twin ")
    for name, value, needle in (
            ("blank", "''", "--from-twin '': give the twin as HARDWARE/MODEL"),
            ("spaces", "'  '", "--from-twin ' ': give the twin as HARDWARE/MODEL"),
            ("no-model", "a40", "--from-twin must look like HARDWARE/MODEL"),
            ("two-slashes", "a40/q/x", "--from-twin must look like HARDWARE/MODEL"),
            ("unknown-model", "a40/nonexistent", "--from-twin a40/nonexistent: unknown"),
            ("binary-hardware", "$F/bin.yaml/smollm2-135m", "not UTF-8 text"),
            ("binary-model", "cpu-2core/$F/bin.yaml", "not UTF-8 text")):
        out.append(Case(f"from-twin-{name}", "from-twin", size + value, "refuse2",
                        needle=needle))
    return out


# ---------------------------------------------------------------- verdicts
def verdict(case: Case, rc: int | None, out: str, secs: float, t: Path, fx: Path,
            factor: float = 1.0) -> str:
    """`refuse2`: one line in all, `error: …` naming the needle (never `--twin `), exit
    2, no results folder; `telemetry`: as the module says."""
    kind = verdict3(Case(case.name, case.group, case.cmd, "ok", bound_s=1e9), rc, out,
                    secs, t, fx)
    if kind in ("hang", "traceback"):
        return kind
    good = _telemetry_right(case.needle, out, t) if case.expect == "telemetry" else (
        rc == 2 and [x for x in out.splitlines() if x.strip()] == [x for x in out.splitlines()
                                                                  if x.startswith("error: ")]
        and out.count("error: ") == 1 and case.needle in out and "--twin " not in out
        and not (t / "o").exists())
    if not good:
        return "nonsense" if rc == 0 else "other"
    return "clean" if secs <= case.bound_s * factor else "slow"


def _telemetry_right(liar: str, out: str, t: Path) -> bool:
    status, reason = TELEMETRY[liar]
    lines = [x for x in out.splitlines() if x.startswith("telemetry: ")]
    runs = list(t.glob("o/*/manifest.json"))
    if "\nerror: " in "\n" + out or len(lines) != 1 or len(runs) != 1:
        return False
    line = lines[0]
    said = f": {status}" in line and reason in line and (
        line.endswith("; no energy figures from it") == (status != "ok"))
    manifest = json.loads(runs[0].read_text())
    summary_path = runs[0].with_name("summary.json")
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    block = summary.get("telemetry") or []
    recorded = (manifest.get("telemetry") == block and len(block) == 1
                and block[0].get("status") == status)
    power = summary.get("gpu_power_mean_w")
    energy = (power is not None and abs(power - 250.0) < 0.01 if status == "ok"
              else power is None and summary.get("energy_wh") is None)
    return said and recorded and energy and manifest.get("status") == "completed"
