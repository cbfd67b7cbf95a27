"""The one-run ramp against the probe search, on the twin: same scenario, same SLOs.

Run: `python benchmarks/ramp_vs_search.py [--quick] [--out FILE]`. For each scenario ×
card it runs `endurance size SCENARIO --twin CARD --ramp --slo … --json` (the ramp, then
the probe search of the same scenario, each probe a 10-minute constant-load run from a
warm start, as `size --ramp` compares them) and prints one markdown row: both answers,
the difference, and the simulated minutes each spent (the GPU time a real card would
have spent). The twin is deterministic: the figures do not depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOS = ("per_session_tok_s>=30", "ttft_p95_s<=10")
CASES = [
    ("claude-code-team", ["--set", "load.warm_start=true"]),
    ("claude-code-endurance", ["--turns", "120", "--set", "load.warm_start=true"]),
    ("calibration/sessions-per-card", ["--turns", "12"]),
]
CARDS = ("a40/qwen3-coder-30b-a3b-awq", "h100/qwen3-coder-30b-a3b-awq")


def run(scenario: str, extra: list[str], card: str, max_sessions: int,
        out: Path) -> dict[str, object]:
    cmd = [sys.executable, "-m", "simulator", "size", f"scenarios/{scenario}.yaml",
           "--twin", card, "--ramp", "--max-sessions", str(max_sessions), *extra,
           "--json", "--out", str(out)]
    for s in SLOS:
        cmd += ["--slo", s]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=7200,
                          check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{scenario} on {card}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    data: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    data["wall_s"] = time.monotonic() - t0
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one scenario, one card")
    ap.add_argument("--max-sessions", type=int, default=64)
    ap.add_argument("--out", type=Path, help="append the table to this file")
    ap.add_argument("--skip", type=int, default=0,
                    help="skip the first N scenario × card rows (to finish a table)")
    ns = ap.parse_args()
    cases = CASES[:1] if ns.quick else CASES
    cards = CARDS[:1] if ns.quick else CARDS
    lines = ["| scenario | card | ramp answer | probe search | difference | ramp steps | "
             "ramp sim. min | search runs | search sim. min | ramp ÷ search |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory(prefix="endurance-ramp-bench-") as tmp:
        rows = [(sc, ex, card) for sc, ex in cases for card in cards][ns.skip:]
        for scenario, extra, card in rows:
            d = run(scenario, extra, card, ns.max_sessions, Path(tmp))
            ramp = d["ramp"]
            assert isinstance(ramp, dict)
            tier = ramp["tiers"][0]
            (cmp,) = d["compared"]  # type: ignore[misc]
            ramp_min = float(d["seconds"] or 0.0) / 60  # type: ignore[arg-type]
            search_min = float(cmp["seconds"]) / 60
            line = (f"| {scenario} | {card.split('/')[0]} | {tier['sessions']} | "
                    f"{cmp['sessions']} | {tier['sessions'] - cmp['sessions']:+d} | "
                    f"{len(ramp['steps'])} | {ramp_min:,.0f} | {cmp['probes']} | "
                    f"{search_min:,.0f} | {ramp_min / search_min:.0%} |")
            print(line, flush=True)
            lines.append(line)
    stamp = (f"\nSLOs {' and '.join(SLOS)}; ramp: 1*2..{ns.max_sessions}, each window 3 "
             "min; probe search: as `size` by default (one repeat with another seed), "
             "10-minute constant-load probes from a warm start.\n")
    print(stamp)
    if ns.out:
        with ns.out.open("a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n" + stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
