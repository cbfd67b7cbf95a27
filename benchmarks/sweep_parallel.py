"""Parallel sweeps: `endurance sweep` wall time serial vs `--parallel K` on this machine.

Runs the same sweep of the bundled team scenario on the in-process twin (virtual time)
twice through the CLI (`python -m simulator sweep … --json`, results in a temporary
directory): once serially, once with `--parallel K` (local processes by default,
`--executor ray` for Ray tasks), prints both wall times and the speed-up, and checks
that the two JSON answers are identical apart from their run directories (the twin is
deterministic, so they must be). A control line times a pure CPU loop the same two
ways (`map_points`): where it does not speed up either, the machine has no idle core
to give (other processes hold them) and no parallel sweep can gain there.

    python benchmarks/sweep_parallel.py                     # 1,2,4,8 sessions, K = 2
    python benchmarks/sweep_parallel.py --sessions 1,2,4,8,16 --turns 30 --parallel 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "claude-code-team.yaml"


def _sweep(out: Path, sessions: str, turns: int, extra: list[str]) -> tuple[float, Any]:
    """(wall seconds, the sweep's JSON) of one CLI sweep."""
    cmd = [sys.executable, "-m", "simulator", "sweep", str(SCENARIO), "--sessions", sessions,
           "--turns", str(turns), "--json", "--out", str(out), *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"sweep failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return wall, json.loads(done.stdout)


def burn(n: int) -> int:
    """Pure CPU work for the control line (top level: picklable for spawned workers)."""
    x = 0
    for i in range(n):
        x += i * i
    return x


def _control(parallel: int) -> tuple[float, float]:
    """(serial s, parallel s) of the same CPU loops through `map_points`."""
    sys.path.insert(0, str(ROOT))
    from simulator.sweep.fanout import map_points
    items = [5_000_000] * (2 * parallel)
    t = time.perf_counter()
    map_points(burn, items, 1)
    serial = time.perf_counter() - t
    t = time.perf_counter()
    map_points(burn, items, parallel)
    return serial, time.perf_counter() - t


def _strip(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "run_dirs"} for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", default="1,2,4,8", help="comma-separated session counts")
    ap.add_argument("--turns", type=int, default=20, help="turns per session")
    ap.add_argument("--parallel", type=int, default=2, help="points at once")
    ap.add_argument("--executor", choices=["local", "ray"], default="local")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sweep-parallel-") as tmp:
        serial_s, serial = _sweep(Path(tmp) / "serial", args.sessions, args.turns, [])
        par_s, par = _sweep(Path(tmp) / "parallel", args.sessions, args.turns,
                            ["--parallel", str(args.parallel), "--executor", args.executor])
    same = _strip(serial) == _strip(par)
    c_serial, c_par = _control(args.parallel)
    print(f"sweep {SCENARIO.name}: sessions {args.sessions}, {args.turns} turns each, "
          f"on {os.cpu_count()} CPU(s)")
    print(f"  serial                           {serial_s:7.1f} s")
    print(f"  --parallel {args.parallel} --executor {args.executor:<5}   {par_s:7.1f} s"
          f"   (speed-up {serial_s / par_s:.2f}×)")
    print(f"  identical results: {'yes' if same else 'NO'}")
    print(f"  control, pure CPU loop: serial {c_serial:.1f} s, --parallel {args.parallel} "
          f"{c_par:.1f} s (speed-up {c_serial / c_par:.2f}×; load average "
          f"{os.getloadavg()[0]:.1f})")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
