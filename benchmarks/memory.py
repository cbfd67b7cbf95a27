"""Peak RSS of long twin runs: memory must stay flat however long a run goes.

Runs `scenarios/claude-code-endurance.yaml` on the in-process twin (virtual time) for
1 and 32 sessions × 553 turns (and 256 with --full), each in a fresh subprocess that
samples its own VmRSS every 0.2 s, and prints peak RSS plus the RSS at 25/50/75/100% of
the run's wall time (flat ⇒ no per-turn growth). Usage:

    python benchmarks/memory.py [--full] [--turns 553] [--sessions 1,32]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, threading, time
from pathlib import Path
from simulator.runs import RunSpec, execute

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0

samples, done = [], threading.Event()
def sample():
    t0 = time.monotonic()
    while not done.is_set():
        samples.append((time.monotonic() - t0, rss_mib()))
        done.wait(0.2)
threading.Thread(target=sample, daemon=True).start()
sessions, turns, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
t0 = time.monotonic()
res = execute(RunSpec(sys.argv[4], [f"sessions={sessions}", f"turns={turns}"], out_dir=out,
                      show_progress=False), echo=lambda s: None)
wall = time.monotonic() - t0
done.set()
samples.append((wall, rss_mib()))
at = {q: max(r for t, r in samples if t <= q * wall) for q in (0.25, 0.5, 0.75, 1.0)}
print(json.dumps({"sessions": sessions, "turns": turns, "status": res.status,
                  "requests": res.summary.get("requests"), "wall_s": wall,
                  "peak_rss_mib": max(r for _, r in samples),
                  "rss_at_mib": {f"{int(q * 100)}%": v for q, v in at.items()}}))
"""


def measure(sessions: int, turns: int) -> dict[str, object]:
    """One run in a fresh interpreter; returns its figures."""
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(sessions), str(turns), out,
             str(ROOT / "scenarios" / "claude-code-endurance.yaml")],
            cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"run of {sessions} sessions failed: {proc.stderr.strip()[-500:]}")
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="also 256 sessions")
    ap.add_argument("--turns", type=int, default=553)
    ap.add_argument("--sessions", default="1,32", help="comma-separated session counts")
    args = ap.parse_args()
    counts = [int(x) for x in args.sessions.split(",")] + ([256] if args.full else [])
    print(f"{'sessions':>8} {'turns':>6} {'requests':>9} {'wall s':>8} {'peak MiB':>9} "
          "  RSS MiB at 25/50/75/100% of the run")
    for n in counts:
        r = measure(n, args.turns)
        at = r["rss_at_mib"]
        assert isinstance(at, dict)
        print(f"{n:>8} {args.turns:>6} {r['requests']!s:>9} {r['wall_s']:>8.1f} "
              f"{r['peak_rss_mib']:>9.0f}   " + " / ".join(f"{v:.0f}" for v in at.values()),
              flush=True)


if __name__ == "__main__":
    main()
