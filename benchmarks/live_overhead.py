"""What watching a run costs the client: `endurance run` at N paced sessions with the
live dashboard and the exporter on vs off, side by side, and whether any recorded
figure changed.

Against `fake_server.py --mode paced` (one token per write at `--rate` tokens/s per
stream, pinned to one core), each rep runs the same scenario twice in a fresh client
process pinned to the other core, in ABBA order:

* **off**: `--progress off`;
* **on**: `--progress dashboard` on a pseudo-terminal (the dashboard really draws: a
  thread here reads and drops what it writes) and `--metrics-port`, scraped every 5 s
  as Prometheus would.

Client CPU per token is read from /proc (utime + stime of the client process) over the
middle of the run — from the moment 20% of its requests have been answered to 80%, so
start-up, the arrival ramp, the tail and the finalize are outside it — divided by the
output tokens of the requests answered meanwhile. The whole process's CPU per token is
printed beside it. The recorded rows of the two runs must be equal in every column that
does not measure time (sessions, turns, context sizes, reusable prefix, output tokens,
compactions); the in-process twin check (`--twin-check`) runs a twin scenario twice,
virtual time, and compares every column but the wall-clock label and the run id.

    python benchmarks/live_overhead.py --sessions 1000 --turns 6 --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from client_ceiling import start_server  # noqa: E402  (benchmarks/, beside this script)
from machine import machine  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
SAME = ["session_id", "turn_index", "request_kind", "attempt", "context_tokens_est",
        "reusable_prefix_tokens", "max_tokens", "output_tokens", "compaction",
        "compaction_tokens_removed", "ok", "error_type"]


def scenario(path: Path, sessions: int, turns: int, spread_s: float) -> None:
    """Sessions back to back (no think or tool time), their starts spread over one reply."""
    import yaml
    path.write_text(yaml.safe_dump({
        "name": "paced", "sessions": sessions, "turns": turns, "seed": 1,
        "system": {"tokens": 300}, "tools": {"count": 2, "tokens": 200},
        "first_prompt_tokens": 60, "user_prompt_tokens": 30, "think_time_s": 0.0,
        "arrival": {"pattern": "ramp", "interval_s": spread_s / sessions},
        "turn_templates": [{"name": "answer", "weight": 1, "output_tokens": 100}],
        "compaction": {"kind": "none"},
        "timeouts": {"total_s": 600},
    }))


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def one_run(mode: str, scen: Path, url: str, out: Path, cpu: int, expected: int
            ) -> dict[str, Any]:
    master, slave = pty.openpty()
    tail = bytearray()

    def drain() -> None:          # the terminal: read what the dashboard draws, keep its end
        while True:
            try:
                got = os.read(master, 65536)
            except OSError:
                break
            if not got:
                break
            tail.extend(got)
            del tail[:-65536]
    threading.Thread(target=drain, daemon=True).start()
    args = [sys.executable, "-m", "simulator", "run", str(scen), "--endpoint", url,
            "--out", str(out)]
    args += (["--progress", "dashboard", "--metrics-port", "127.0.0.1:0"] if mode == "on"
             else ["--progress", "off"])     # ENDURANCE_LIVE_CPU: the view times itself
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "LINES": "48",
           "ENDURANCE_LIVE_CPU": "1"}
    import resource
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, text=True, env=env,
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    os.close(slave)
    assert proc.stdout is not None
    scrapes = 0
    stop = threading.Event()
    if mode == "on":
        first = proc.stdout.readline()
        metrics_url = first.split()[1]

        def scrape() -> None:
            nonlocal scrapes
            while not stop.wait(5.0):
                try:
                    with urllib.request.urlopen(metrics_url, timeout=5) as r:
                        r.read()
                    scrapes += 1
                except OSError:
                    pass
        threading.Thread(target=scrape, daemon=True).start()
    journal: Path | None = None
    marks: dict[str, tuple[float, float, int]] = {}
    t0 = time.monotonic()
    while proc.poll() is None:
        if journal is None:
            found = [d for d in out.iterdir() if (d / "turns.jsonl").exists()]
            journal = found[0] / "turns.jsonl" if found else None
        else:
            n = lines(journal)
            for name, share in (("a", 0.2), ("b", 0.8)):
                if name not in marks and n >= share * expected:
                    marks[name] = (time.monotonic(), cpu_s(proc.pid), n)
        time.sleep(0.05)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    whole_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    stop.set()
    rest = proc.stdout.read()
    time.sleep(0.2)
    os.close(master)
    own = re.search(r"live view CPU: ([\d.]+) ms on the run's thread, ([\d.]+) ms serving "
                    r"scrapes, of ([\d.]+) ms", tail.decode(errors="replace"))
    view_share = (float(own.group(1)) + float(own.group(2))) / float(own.group(3)) \
        if own else None
    import pandas as pd
    run_dir = Path(rest.strip().splitlines()[-1])
    rows = pd.read_parquet(run_dir / "turns.parquet")
    summary = json.loads((run_dir / "summary.json").read_text())
    ends = (rows["started_mono_s"] + rows["e2e_s"]).to_numpy()
    (ta, ca, _), (tb, cb, _) = marks["a"], marks["b"]
    # the requests answered between the marks, by their end on the run's clock
    order = rows.assign(end=ends).sort_values("end").reset_index(drop=True)
    mid = order.iloc[marks["a"][2]:marks["b"][2]]
    mid_tokens = int(mid["output_tokens"].sum())
    return {"mode": mode, "rc": proc.returncode, "wall_s": wall, "mid_cpu_s": cb - ca,
            "mid_wall_s": tb - ta, "mid_tokens": mid_tokens,
            "mid_us_per_token": (cb - ca) / mid_tokens * 1e6,
            "all_us_per_token": whole_cpu / max(1, int(summary["output_tokens"])) * 1e6,
            "view_share": view_share,
            "tokens": int(summary["output_tokens"]), "requests": int(summary["requests"]),
            "p50_e2e_s": float(rows["e2e_s"].median()), "scrapes": scrapes,
            "rows": rows[SAME], "run_dir": str(run_dir)}


def _share(x: float | None) -> str:
    return "" if x is None else f"{x * 100:.2f}%"


def twin_check(tmp: Path) -> str:
    """The in-process twin (virtual time) with the view and exporter on vs off: every
    recorded column but the wall-clock label and the run id must be equal."""
    import pandas as pd
    dirs = {}
    for mode in ("off", "on"):
        out = tmp / f"twin-{mode}"
        args = [sys.executable, "-m", "simulator", "run",
                str(ROOT / "scenarios" / "claude-code-endurance.yaml"), "--sessions", "8",
                "--turns", "60", "--out", str(out)]
        args += (["--progress", "plain", "--progress-every", "0.1", "--metrics-port",
                  "127.0.0.1:0"] if mode == "on" else ["--progress", "off"])
        res = subprocess.run(args, capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        dirs[mode] = Path(res.stdout.strip().splitlines()[-1])
    a, b = (pd.read_parquet(dirs[m] / "turns.parquet").drop(columns=["started_at", "run_id"])
            for m in ("off", "on"))
    sa, sb = (json.loads((dirs[m] / "summary.json").read_text()) for m in ("off", "on"))
    differ = [k for k in sa if k != "run_id" and sa[k] != sb.get(k)]
    return (f"in-process twin, 8 sessions × 60 turns: rows equal: {a.equals(b)} "
            f"({len(a)} rows, every column but started_at/run_id); summary keys that "
            f"differ: {differ or 'none'} (run_id apart)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--twin-check", action="store_true")
    a = ap.parse_args(argv)
    print(f"machine: {machine()}")
    proc, url = start_server("paced", a.tokens, a.rate, a.server_cpu)
    results: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="endurance-live-") as tmp:
            scen = Path(tmp) / "paced.yaml"
            scenario(scen, a.sessions, a.turns, a.tokens / a.rate)
            expected = a.sessions * a.turns
            print(f"{a.sessions} sessions × {a.turns} turns, {a.tokens}-token replies at "
                  f"{a.rate:g} tok/s per stream; client on cpu {a.client_cpu}, server on "
                  f"cpu {a.server_cpu}")
            print(f"{'rep':>3} {'mode':<4} {'µs/tok mid':>10} {'µs/tok all':>10} "
                  f"{'wall s':>7} {'p50 e2e/ideal':>13} {'scrapes':>7} {'view CPU':>8} "
                  f"{'load':>10}")
            for rep in range(a.reps):
                order = ("off", "on") if rep % 2 == 0 else ("on", "off")
                pair = {}
                for mode in order:
                    l0 = os.getloadavg()[0]
                    out = Path(tmp) / f"r{rep}-{mode}"
                    out.mkdir()
                    r = one_run(mode, scen, url, out, a.client_cpu, expected)
                    r["load"] = (l0, os.getloadavg()[0])
                    print(f"{rep:>3} {mode:<4} {r['mid_us_per_token']:>10.2f} "
                          f"{r['all_us_per_token']:>10.2f} {r['wall_s']:>7.1f} "
                          f"{r['p50_e2e_s'] / (a.tokens / a.rate):>13.2f} {r['scrapes']:>7} "
                          f"{_share(r['view_share']):>8} "
                          f"{r['load'][0]:>4.1f}→{r['load'][1]:<4.1f}", flush=True)
                    pair[mode] = r
                    results.append(r)
                same = pair["off"]["rows"].sort_values(SAME[:4]).reset_index(drop=True).equals(
                    pair["on"]["rows"].sort_values(SAME[:4]).reset_index(drop=True))
                print(f"    rep {rep}: recorded rows equal (every column but times): {same}")
            for mode in ("off", "on"):
                v = [r["mid_us_per_token"] for r in results if r["mode"] == mode]
                print(f"{mode}: median {statistics.median(v):.2f} µs/token over {len(v)} "
                      f"runs ({', '.join(f'{x:.2f}' for x in v)})")
            off = [r["mid_us_per_token"] for r in results if r["mode"] == "off"]
            on = [r["mid_us_per_token"] for r in results if r["mode"] == "on"]
            ratios = [b / a_ for a_, b in zip(off, on, strict=True)]
            print(f"on / off, per rep: {', '.join(f'{x:.3f}' for x in ratios)}; median "
                  f"{statistics.median(ratios):.3f} "
                  f"({(statistics.median(ratios) - 1) * 100:+.1f}%)")
            shares = [r["view_share"] for r in results if r["view_share"] is not None]
            if shares:
                print(f"the view's own CPU (dashboard + exporter, measured inside the 'on' "
                      f"runs) / the process's CPU while it ran: median "
                      f"{statistics.median(shares) * 100:.2f}% "
                      f"({', '.join(_share(x) for x in shares)})")
            if a.twin_check:
                print(twin_check(Path(tmp)))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
