"""Peak RSS of long twin runs: memory must stay flat however long a run goes.

Runs `scenarios/claude-code-endurance.yaml` on the in-process twin (virtual time) for
1 and 32 sessions × 553 turns (and 256 with --full), each in a fresh subprocess that
samples its own VmRSS every 0.2 s, and prints peak RSS plus the RSS at 25/50/75/100% of
the run's wall time (flat ⇒ no per-turn growth). `--journal ROWS` instead measures the
end of a run alone, side by side: turning a ROWS-row `turns.jsonl` into the turns
DataFrame the old way (a dict per row) and the current way (Arrow's JSON reader), each
in a fresh interpreter. Usage:

    python benchmarks/memory.py [--full] [--turns 553] [--sessions 1,32]
    python benchmarks/memory.py --journal 141568
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from machine import machine  # noqa: E402  (benchmarks/machine.py, beside this script)

CHILD = r"""
import json, sys, threading, time
from pathlib import Path
from simulator.run.spec import RunSpec
from simulator.run.execute import execute

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


JOURNAL_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
import pandas, pyarrow.json
from simulator.records.recorder import read_journal, turns_frame, turns_frame_from_journal
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
path, how = Path(sys.argv[1]), sys.argv[2]
t0 = time.perf_counter()
df = turns_frame(read_journal(path)) if how == "dicts" else turns_frame_from_journal(path)
wall = time.perf_counter() - t0
print(json.dumps({"rows": len(df), "wall_s": wall, "frame_mib":
                  float(df.memory_usage(deep=True).sum()) / 2**20, "above_imports_mib":
                  resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base}))
"""


def journal(rows: int) -> None:
    """A real twin journal (8 sessions × 200 turns) repeated to `rows` rows, converted
    both ways; prints peak RSS above the imports and seconds for each."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        subprocess.run([sys.executable, "-m", "simulator", "run",
                        str(ROOT / "scenarios" / "claude-code-endurance.yaml"), "--sessions",
                        "8", "--turns", "200", "--quiet", "--out", str(out / "runs")],
                       cwd=ROOT, capture_output=True, check=True)
        src = next((out / "runs").glob("*/turns.jsonl")).read_bytes()
        lines = src.splitlines(keepends=True)
        big = out / "turns.jsonl"
        with big.open("wb") as f:
            for i in range(rows):
                f.write(lines[i % len(lines)])
        print(f"{rows} rows, {big.stat().st_size / 2**20:.0f} MiB of journal")
        got = {}
        for how in ("dicts", "arrow"):
            proc = subprocess.run([sys.executable, "-c", JOURNAL_CHILD, str(big), how],
                                  cwd=ROOT, capture_output=True, text=True, check=True)
            got[how] = json.loads(proc.stdout.strip().splitlines()[-1])
            r = got[how]
            print(f"{how:>6}: {r['wall_s']:6.2f} s, peak {r['above_imports_mib']:6.0f} MiB above "
                  f"the imports (the frame itself: {r['frame_mib']:.0f} MiB)")
        d, a = got["dicts"], got["arrow"]
        print(f"arrow / dicts: {a['above_imports_mib'] / d['above_imports_mib']:.2f}× the memory, "
              f"{a['wall_s'] / d['wall_s']:.2f}× the time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="also 256 sessions")
    ap.add_argument("--turns", type=int, default=553)
    ap.add_argument("--sessions", default="1,32", help="comma-separated session counts")
    ap.add_argument("--journal", type=int, metavar="ROWS",
                    help="only measure converting a ROWS-row journal, old way vs new")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    if args.journal:
        journal(args.journal)
        return
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
