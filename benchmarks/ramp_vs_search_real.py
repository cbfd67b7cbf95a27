"""The one-run ramp against the probe search on real servers: llama.cpp and vLLM CPU
serving SmolLM2-135M-Instruct on this machine, same scenario, same SLOs.

Run: `python benchmarks/ramp_vs_search_real.py [--engine llamacpp|vllm]`. It starts the
server (engines from the cache, `.ci/real_engines.sh` installs them), runs `endurance size
… --endpoint URL --ramp` and `endurance size … --endpoint URL --duration D` (the probe
search) one after the other, and prints both answers and both wall times. The SLOs put
the boundary between 2 and 8 sessions on an idle 2-core machine; CPU figures move with
the machine's load, which is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.engines.install import (  # noqa: E402  (after the sys.path insert)
    SMOLLM2_CONTEXT,
    ensure_llamacpp,
    ensure_smollm2,
    ensure_vllm,
)
from simulator.engines.server import EngineServer, serve_llamacpp, serve_vllm  # noqa: E402

SCENARIO = ROOT / "scenarios" / "calibration" / "twin-vs-vllm-cpu.yaml"
# per engine: the SLOs, the ramp's steps and hold, the probe search's probe duration
SETTINGS: dict[str, dict[str, Any]] = {
    "llamacpp": {"slos": ["window_ttft_p95_s<=4"], "steps": "1*2..8", "hold": "40s",
                 "duration": "90s"},
    "vllm": {"slos": ["per_session_tok_s>=9"], "steps": "1*2..8", "hold": "40s",
             "duration": "90s"},
}
OVERRIDES = ["--turns", "12", "--set", "load.warm_start=true"]


def server(engine: str, log_dir: Path) -> AbstractContextManager[EngineServer]:
    if engine == "llamacpp":
        smol = ensure_smollm2(hf=False)
        return serve_llamacpp(replace(ensure_llamacpp(), gguf=smol.gguf), log_dir, slots=2,
                              ctx_tokens=SMOLLM2_CONTEXT, threads=1, model_name="smol",
                              ignore_eos=False)
    smol = ensure_smollm2()
    assert smol.hf_dir is not None
    return serve_vllm(ensure_vllm(), log_dir, model_dir=smol.hf_dir, model_name="smol",
                      max_model_len=SMOLLM2_CONTEXT, extra_args=("--dtype", "float32"))


def size(url: str, out: Path, extra: list[str], slos: list[str]) -> tuple[dict[str, Any], float]:
    cmd = [sys.executable, "-m", "simulator", "size", str(SCENARIO), "--endpoint", url,
           "--max-sessions", "8", *OVERRIDES, *extra, "--json", "--out", str(out)]
    for s in slos:
        cmd += ["--slo", s]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=7200,
                          check=False)
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"exit {proc.returncode}: {proc.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=sorted(SETTINGS), action="append")
    ns = ap.parse_args()
    engines = ns.engine or sorted(SETTINGS)
    print("| engine | SLOs | ramp answer | ramp wall min | probe search | search probes | "
          "search wall min | ramp ÷ search | load (1-min) |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="endurance-ramp-real-") as tmp:
        for engine in engines:
            cfg = SETTINGS[engine]
            with server(engine, Path(tmp) / f"{engine}-log") as srv:
                ramp, ramp_s = size(srv.base_url, Path(tmp) / f"{engine}-ramp",
                                    ["--ramp", cfg["steps"], "--hold", cfg["hold"]], cfg["slos"])
                search, search_s = size(srv.base_url, Path(tmp) / f"{engine}-search",
                                        ["--duration", cfg["duration"], "--repeats", "0"],
                                        cfg["slos"])
            tier = ramp["ramp"]["tiers"][0]
            probes = len(search["probes"]) + len(search.get("unused_run_dirs") or [])
            load = os.getloadavg()[0]
            print(f"| {engine} | {' and '.join(cfg['slos'])} | {tier['sessions']} | "
                  f"{ramp_s / 60:,.1f} | {search['sessions']} | {probes} | "
                  f"{search_s / 60:,.1f} | {ramp_s / search_s:.0%} | {load:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
