"""What the twin predicts for "should I turn speculation on?" (issue 13's table).

Run: `python benchmarks/spec_whatif.py [HARDWARE MODEL]`. For code-edit turns (replies
copying the file just read) and fresh text, 1–32 sessions back to back, speculation off
vs ngram:5 vs ngram:24: per-session tok/s, N × per-session, and tokens per forward pass.
Not a timed test: simulated time only.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.spec_decode.whatif import run_sessions

SPECS = ("off", "ngram:5", "ngram:24")
COUNTS = (1, 2, 4, 8, 16, 32)


def main() -> None:
    hw, model = (sys.argv[1], sys.argv[2]) if len(sys.argv) > 2 else ("a40",
                                                                      "qwen3-coder-30b-a3b-awq")
    pms = {s: build_perf_model(hw, model, spec=s) for s in SPECS}
    print(f"twin {hw} × {model}: per-session tok/s (N × per-session) [tokens/pass]")
    print(f"{'content':<10}{'N':>4}  " + "  ".join(f"{s:>26}" for s in SPECS))
    for edit in (True, False):
        for n in COUNTS:
            cells = []
            for s in SPECS:
                w = run_sessions(pms[s], n, turns=2 if n > 8 else 6 if n < 4 else 3,
                                 code_edit=edit)
                cells.append(f"{w.per_session_tok_s:7.1f} ({w.aggregate_tok_s:6,.0f}) "
                             f"[{w.tokens_per_pass:5.2f}]")
            print(f"{'code edit' if edit else 'fresh':<10}{n:>4}  " + "  ".join(
                f"{c:>26}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
