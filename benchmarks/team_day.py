"""Write a SYNTHETIC team day of Claude Code telemetry, as an OpenTelemetry Collector's
file exporter writes it, for the docs' end-to-end example (docs/team-telemetry.md):
import, replay and size. No real telemetry: sessions start around a morning peak,
each a growing conversation (an 18k-token system + tools prefix read from the cache,
a few hundred to a few thousand tokens added per request), tool runs and think time
between requests, a quarter with a sub-agent stream.

    python -m benchmarks.team_day --out /tmp/endurance-team-day [--sessions 80] [--proto]

`--hours` then imports the day whole and sizes it hour by hour (issue 58's goal: a
day of 100,000 requests, `--sessions 3900`, in ≤ 10 CPU-min), the intervals' search
only (`size --interval 1h` without the whole day's search after it), in a child
process bounded by `--timeout` (Ctrl-C at the bound: the intervals judged so far);
with `--base CHECKOUT` the same search on that checkout at the same time, side by
side (each its own CPU-seconds, from the child's rusage):

    python -m benchmarks.team_day --out /tmp/day100k --sessions 3900 --hours \\
        --base /tmp/base-checkout --timeout 840
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.otel_export import team_day, write_json_logs, write_proto_logs

ROOT = Path(__file__).resolve().parents[1]
SLOS = ("ttft_p95_s<=3", "decode_tok_s_median>=40")

# The child: the intervals' search of `size --interval 1h` as `sweep.api.team` runs it,
# without the whole day's search after it; Ctrl-C returns the intervals judged so far.
CHILD = r"""
import json, sys, time
from pathlib import Path
from simulator.analysis.slo import parse_slo
from simulator.analysis.team_hours import card_cap
from simulator.sweep import api, pipeline
from simulator.sweep.fanout import Serial
from simulator.sweep.team_hours import TeamHoursProfile
from simulator.sweep.team_size import team_scenario
scenario, out, result = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
slos = tuple(parse_slo(s) for s in sys.argv[4:])
t0 = time.process_time()
base = api._judged(api.search_base(scenario, out=out), slos)
spec, data = team_scenario(base)
read_cpu_s = time.process_time() - t0
prof = TeamHoursProfile(base, slos, spec, data, 3600.0, 300.0, "session_affinity",
                        card_cap(max(spec.team.day_profile, default=0)))
try:
    hours = pipeline.run_profile(prof, Serial())
except KeyboardInterrupt:
    hours = prof.result
    if hours is not None:
        hours.interrupted = True
got = hours.to_dict() if hours is not None else {}
result.write_text(json.dumps({"read_cpu_s": read_cpu_s, "hours": got}))
"""


def size_hours(checkout: Path, scenario: Path, out: Path) -> subprocess.Popen[str]:
    """The intervals' search (`CHILD`) on `checkout`, in its own process group."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    return subprocess.Popen(
        ["nice", "-n", "5", sys.executable, "-c", CHILD, str(scenario), str(out / "res"),
         str(out / "result.json"), *SLOS], cwd=checkout, env=env, text=True,
        stdout=(out / "stdout").open("w"), stderr=(out / "stderr").open("w"),
        start_new_session=True)


def wait_all(procs: dict[str, tuple[subprocess.Popen[str], Path]], timeout_s: float
             ) -> dict[str, dict[str, Any]]:
    """Each child's CPU-s (its own rusage), wall and result; Ctrl-C (SIGINT to its
    process group) at `timeout_s`, then what it judged so far."""
    t0 = time.perf_counter()
    done: dict[int, tuple[Any, float]] = {}
    stopped: set[int] = set()
    pids = {p.pid for p, _ in procs.values()}
    while len(done) < len(pids):
        pid, _status, usage = os.wait4(-1, os.WNOHANG)
        if pid in pids:
            done[pid] = (usage, time.perf_counter() - t0)
            continue
        if time.perf_counter() - t0 > timeout_s:
            for p, _ in procs.values():
                if p.pid not in done and p.pid not in stopped:
                    os.killpg(p.pid, signal.SIGINT)
                    stopped.add(p.pid)
        time.sleep(0.5)
    out: dict[str, dict[str, Any]] = {}
    for name, (p, folder) in procs.items():
        usage, wall = done[p.pid]
        res = folder / "result.json"
        got = json.loads(res.read_text()) if res.is_file() else {}
        out[name] = {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall,
                     "stopped": p.pid in stopped, "read_cpu_s": got.get("read_cpu_s"),
                     "hours": got.get("hours") or {}}
    return out


def show(name: str, r: dict[str, Any]) -> str:
    h = r["hours"]
    ivs = h.get("intervals") or []
    cards = ",".join("…" if not iv.get("judged") else str(iv.get("cards")) for iv in ivs)
    probes = sum(len(iv.get("probes") or []) for iv in ivs)
    early = sum(bool(p.get("early_verdict")) for iv in ivs for p in iv.get("probes") or [])
    state = (f"stopped at the bound, {sum(bool(iv.get('judged')) for iv in ivs)} of "
             f"{len(ivs)} interval(s) judged" if r["stopped"] or h.get("interrupted")
             else "finished" if h.get("status") == "complete" else "did not finish")
    read = f"{r['read_cpu_s']:.1f}" if r["read_cpu_s"] is not None else "n/a"
    return (f"{name}: {r['cpu_s']:,.1f} CPU-s ({read} reading the day), wall "
            f"{r['wall_s']:,.0f} s, {state}; cards per hour {cards or 'n/a'}; peak "
            f"{h.get('peak_cards')}; {probes} probe(s), {early} decided early")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder to write into")
    ap.add_argument("--sessions", type=int, default=80)
    ap.add_argument("--seed", type=int, default=52)
    ap.add_argument("--proto", action="store_true", help="format: proto instead of json")
    ap.add_argument("--hours", action="store_true",
                    help="then import the day whole and size it hour by hour (timed)")
    ap.add_argument("--base", type=Path, help="--hours: also on this checkout, side by side")
    ap.add_argument("--day", type=Path,
                    help="--hours: this imported day instead of writing and importing one")
    ap.add_argument("--timeout", type=float, default=840.0,
                    help="--hours: Ctrl-C each search after this many seconds (wall)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.day is not None:
        hours(a, a.day)
        return
    day = team_day(a.seed, a.sessions, requests=(10, 40))
    path = (write_proto_logs(a.out / "logs.pb", day, batch=200) if a.proto
            else write_json_logs(a.out / "logs.jsonl", day, batch=200))
    print(f"{path}: {len(day.requests):,} requests, {len(day.tools):,} tool runs, "
          f"{len(day.prompts):,} prompts in {a.sessions} sessions (SYNTHETIC)")
    if not a.hours:
        return
    scenario = a.out / "day.yaml"
    subprocess.run([sys.executable, "-m", "simulator", "import", "claude-code-otel",
                    str(path), "-o", str(scenario), "--force"], cwd=ROOT, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(f"imported whole: {scenario}")
    hours(a, scenario)


def hours(a: argparse.Namespace, scenario: Path) -> None:
    """Size `scenario` hour by hour on this checkout (and `--base`), side by side."""
    sides = {"after (this checkout)": ROOT} | ({f"before ({a.base})": a.base} if a.base else {})
    procs = {name: (size_hours(co, scenario, a.out / f"side-{i}"), a.out / f"side-{i}")
             for i, (name, co) in enumerate(sides.items())}
    print("pids: " + ", ".join(f"{n} {p.pid}" for n, (p, _f) in procs.items()), flush=True)
    for name, r in wait_all(procs, a.timeout).items():
        print(show(name, r), flush=True)


if __name__ == "__main__":
    main()
