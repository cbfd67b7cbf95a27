"""Digests of golden twin runs: a refactor or a speed-up must leave them bit-identical.

Run: `python benchmarks/golden_twin.py [--out FILE] [--check FILE] [--quick]`. Each case
is an `endurance` command on the in-process twin (virtual time, so deterministic); the
digest covers every turn row (all columns but the run id and the wall-clock label),
every figure of summary.json (less run id, paths and the time of day) and, for sweeps and
sizing searches, the JSON they write. It drives the CLI only (`python -m simulator`), so
it runs unchanged across a reorganisation of the package. `--check FILE` compares with
a saved digest and exits 1 naming each case that changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENDURANCE = [sys.executable, "-m", "simulator"]
_VOLATILE_ROW = {"run_id", "started_at"}
_VOLATILE_KEYS = {"run_id", "run_dir", "run_dirs", "unused_run_dirs", "started_at",
                  "finished_at", "created_at", "versions", "target"}

CASES: dict[str, list[str]] = {
    "endurance-block": ["run", "scenarios/claude-code-endurance.yaml", "--turns", "120"],
    "recall-none": ["run", "scenarios/claude-code-recall.yaml", "--turns", "60",
                    "--set", "compaction.kind=none"],
    "team-32": ["run", "scenarios/claude-code-team.yaml", "--sessions", "32", "--turns", "6"],
    "team-h100-ngram": ["run", "scenarios/claude-code-team.yaml", "--twin",
                        "h100/qwen3-coder-30b-a3b-awq", "--sessions", "16", "--turns", "5",
                        "--spec", "ngram:8"],
    "kimi-hybrid": ["run", "scenarios/claude-code-team.yaml", "--twin",
                    "a40/kimi-linear-48b-a3b-awq", "--sessions", "8", "--turns", "6"],
    "tier-64": ["run", "scenarios/claude-code-team.yaml", "--sessions", "24", "--turns", "6",
                "--kv-offload-gib", "64"],
    "fleet-2": ["run", "scenarios/claude-code-team.yaml", "--sessions", "16", "--turns", "5",
                "--replicas", "2", "--router", "prefix_aware"],
    "sweep-counts": ["sweep", "scenarios/claude-code-team.yaml", "--sessions", "1,4",
                     "--turns", "4", "--json"],
    "size-slo": ["size", "scenarios/claude-code-team.yaml", "--turns", "4", "--max-sessions",
                 "8", "--slo", "per_session_tok_s>=40", "--json"],
}
QUICK = ("endurance-block", "team-32", "sweep-counts")


def _clean(value: Any) -> Any:
    """JSON with the volatile keys dropped and path-like strings reduced to a marker."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in sorted(value.items()) if k not in _VOLATILE_KEYS}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str) and ("/results" in value or value.startswith("/tmp")):
        return "<path>"
    return value


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _run_digest(run_dir: Path) -> dict[str, str]:
    import pandas as pd
    turns = pd.read_parquet(run_dir / "turns.parquet")
    turns = turns.drop(columns=[c for c in _VOLATILE_ROW if c in turns.columns])
    rows = turns.to_dict(orient="records")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"rows": _digest(rows), "n_rows": str(len(rows)), "summary": _digest(_clean(summary))}


def run_case(name: str, args: list[str], out: Path) -> dict[str, str]:
    folder = out / name
    proc = subprocess.run([*ENDURANCE, *args, "--out", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{name}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    result: dict[str, str] = {}
    if args[0] == "run":
        run_dir = Path(proc.stdout.strip().splitlines()[-1])
        return _run_digest(run_dir)
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    result["json"] = _digest(_clean(data))
    # the points' own rows, as a set: their folders' names carry the time and a nonce
    points = sorted(_run_digest(p.parent)["rows"] for p in folder.rglob("summary.json"))
    result["points"] = _digest(points)
    result["n_points"] = str(len(points))
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the digests to this JSON file")
    ap.add_argument("--check", type=Path, help="compare with a saved digest file")
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    ns = ap.parse_args()
    names = QUICK if ns.quick else tuple(CASES)
    digests: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="endurance-golden-") as tmp:
        for name in names:
            t = time.monotonic()
            digests[name] = run_case(name, CASES[name], Path(tmp))
            print(f"{name:<18} {time.monotonic() - t:6.1f} s  {digests[name]}", flush=True)
    if ns.out:
        ns.out.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    if ns.check:
        saved = json.loads(ns.check.read_text())
        changed = [n for n in names if saved.get(n) != digests[n]]
        for n in changed:
            print(f"CHANGED {n}: {saved.get(n)} -> {digests[n]}")
        print("golden: identical" if not changed else f"golden: {len(changed)} changed")
        return 1 if changed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
