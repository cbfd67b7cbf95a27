"""Simulation speed: how fast the in-process twin runs the bundled endurance scenario.

For each session count N it runs `scenarios/claude-code-endurance.yaml` on the
in-process twin in virtual time (`simulator.run.execute.execute`, results in a temporary
directory) and prints simulated turns per wall second, simulated seconds per wall
second and the CPU seconds the run took. Turns per session default to the scenario's
553 at N = 1 and to ⌈budget / N⌉ (at most 553) above, so every point finishes in
reasonable time; pass `--turns` to fix them. The 553-turn single-session run is also
timed end to end through the CLI (`python -m simulator run … --quiet`: interpreter
start, imports, tokenizer load and run), which is what the ≤ 10 s target is about.

    python benchmarks/sim_speed.py                       # 1, 8, 32, 128 sessions
    python benchmarks/sim_speed.py --sessions 32 --turns 100 --no-cli
    python benchmarks/sim_speed.py --sessions 128 --no-cli --kv-offload-gib 0 256
                                     # the same points without and with a host KV tier
    python benchmarks/sim_speed.py --fleet --no-cli      # 4 H100 replicas × 256 × 10

`--fleet` times the fleet point of docs/fleet.md: 4 `h100` twin replicas behind a
router (`--router`, default prefix_aware) running 256 sessions × 10 turns (target
≤ 30 s wall on this machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCENARIO = ROOT / "scenarios" / "claude-code-endurance.yaml"
FULL_TURNS = 553
TARGET_WALL_S = 10.0
FLEET_TARGET_WALL_S = 30.0
FLEET_TWIN = "h100/qwen3-coder-30b-a3b-awq"


from machine import machine  # noqa: E402  (benchmarks/machine.py, beside this script)


def turns_for(sessions: int, budget: int) -> int:
    return FULL_TURNS if sessions == 1 else min(FULL_TURNS, math.ceil(budget / sessions))


def run_point(sessions: int, turns: int, offload_gib: float = 0.0,
              extra: tuple[str, ...] = (), twin: str | None = None) -> dict[str, Any]:
    """One run; wall and CPU seconds of `execute` only (imports are already paid)."""
    import pandas as pd

    from simulator.run.execute import execute
    from simulator.run.spec import RunSpec
    tier = [f"twin.kv_offload_gib={offload_gib:g}"] if offload_gib else []
    with tempfile.TemporaryDirectory() as tmp:
        spec = RunSpec(str(SCENARIO), overrides=[f"sessions={sessions}", f"turns={turns}",
                                                 *tier, *extra],
                       out_dir=Path(tmp), show_progress=False, twin=twin)
        t0, c0 = time.perf_counter(), time.process_time()
        result = execute(spec, echo=lambda _line: None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        df = pd.read_parquet(result.run_dir / "turns.parquet")
    done = int((df["request_kind"] == "turn").sum())
    sim_s = result.outcome.wall_window_s
    return {"sessions": sessions, "turns_per_session": turns, "status": result.status,
            "kv_offload_gib": offload_gib,
            "turns": done, "requests": len(df), "wall_s": wall, "cpu_s": cpu,
            "turns_per_wall_s": done / wall, "sim_s": sim_s, "sim_s_per_wall_s": sim_s / wall,
            "kv_usage_peak": result.summary.get("kv_usage_peak")}


def cli_run() -> dict[str, Any]:
    """The full single-session scenario through the CLI, timed from process start."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "simulator", "run", str(SCENARIO), "--quiet",
               "--out", tmp]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
    usage = os.times()
    return {"rc": proc.returncode, "wall_s": wall,
            "child_cpu_s": usage.children_user + usage.children_system}


def startup() -> float:
    """Seconds to import the run library and load the tokenizer (paid once per process)."""
    t0 = time.perf_counter()
    import simulator.run.execute  # noqa: F401
    from simulator.util import tokens
    tokens.encoding()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--turns", type=int, help="turns per session at every point")
    ap.add_argument("--budget", type=int, default=2048,
                    help="total turns per point above 1 session (default 2048)")
    ap.add_argument("--no-cli", action="store_true", help="skip the end-to-end CLI run")
    ap.add_argument("--json", action="store_true", help="also print one JSON line per point")
    ap.add_argument("--kv-offload-gib", type=float, nargs="+", default=[0.0],
                    help="host KV tier sizes to time each point at (0: off)")
    ap.add_argument("--fleet", action="store_true",
                    help=f"only the fleet point: 4 {FLEET_TWIN} replicas × 256 sessions × 10 turns")
    ap.add_argument("--router", default="prefix_aware", help="the fleet point's router")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    print(f"startup (imports + tokenizer load): {startup():.2f} s")
    if args.fleet:
        for replicas in (1, 4):
            p = run_point(256, 10, ("fleet.replicas=" + str(replicas),
                                    f"fleet.router={args.router}"), FLEET_TWIN)
            verdict = "ok" if p["wall_s"] <= FLEET_TARGET_WALL_S else "over"
            print(f"{replicas} × {FLEET_TWIN} ({args.router}), 256 sessions × 10 turns: "
                  f"{p['wall_s']:.2f} s wall, {p['cpu_s']:.2f} s CPU, {p['turns']} turns, "
                  f"{p['sim_s']:.0f} sim s, {p['status']}"
                  + (f" (target ≤ {FLEET_TARGET_WALL_S:.0f} s: {verdict})" if replicas > 1 else ""),
                  flush=True)
            if args.json:
                print(json.dumps(p))
        return
    if not args.no_cli:
        cli = cli_run()
        verdict = "ok" if cli["wall_s"] <= TARGET_WALL_S else "over"
        print(f"CLI end to end, 1 session × {FULL_TURNS} turns: {cli['wall_s']:.2f} s wall, "
              f"{cli['child_cpu_s']:.2f} s CPU (rc {cli['rc']}; target ≤ {TARGET_WALL_S:.0f} s "
              f"wall: {verdict})")
    print(f"{'sessions':>8} {'tier GiB':>8} {'turns/s':>8} {'turns':>7} {'wall s':>8} "
          f"{'CPU s':>7} {'sim s':>9} {'sim s/wall s':>12} {'KV peak':>8}  status")
    for n, gib in [(n, g) for n in args.sessions for g in args.kv_offload_gib]:
        p = run_point(n, args.turns or turns_for(n, args.budget), gib)
        peak = p["kv_usage_peak"]
        print(f"{n:>8} {gib:>8g} {p['turns_per_wall_s']:>8.1f} {p['turns']:>7} "
              f"{p['wall_s']:>8.2f} {p['cpu_s']:>7.2f} {p['sim_s']:>9.0f} "
              f"{p['sim_s_per_wall_s']:>12.0f} "
              f"{(f'{peak:.1%}' if peak is not None else '-'):>8}  {p['status']} "
              f"({p['turns_per_session']} turns/session)", flush=True)
        if args.json:
            print(json.dumps(p))


if __name__ == "__main__":
    main()
