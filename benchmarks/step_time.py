"""Cost of one performance-model step estimate (`perf_model.step_time`), in µs per call.

The twin calls `step_time` once per engine step, so its cost bounds how fast virtual
time runs; this figure used to be a timed unit test (< 50 µs per call), which a loaded
CI machine could fail for no fault of the code.

    python benchmarks/step_time.py                  # a40 / qwen3-coder-30b-a3b-awq
    python benchmarks/step_time.py --calls 200000 --hardware h100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.twin.core.types import StepShape
from simulator.twin.model.perf_model import build_perf_model

TARGET_US = 50.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hardware", default="a40")
    ap.add_argument("--model", default="qwen3-coder-30b-a3b-awq")
    ap.add_argument("--calls", type=int, default=20_000)
    args = ap.parse_args()
    pm = build_perf_model(args.hardware, args.model)
    shape = StepShape(32, 32, 32 * 3000, 0, 0.0)     # 32 decodes at 3000 tokens of context
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(args.calls):
            pm.step_time(shape)
        best = min(best, (time.perf_counter() - start) / args.calls * 1e6)
    verdict = "ok" if best <= TARGET_US else "over"
    print(f"step_time ({args.hardware}/{args.model}, 32 decodes × 3000 tokens): "
          f"{best:.2f} µs per call, best of 5 × {args.calls} (target ≤ {TARGET_US:.0f} µs: {verdict})")


if __name__ == "__main__":
    main()
