"""Twin predictions next to every figure of the A40 calibration measurements, with the error.

Run: `python benchmarks/calibration.py`. Not a timed test: it prints what the fitted
performance model (and, if the engine imports, a closed-loop engine simulation) predicts
for the A40 + Qwen3-Coder-30B-A3B AWQ measurements, and the assumptions behind each
mapping (listed in simulator/twin/profiles/calibration/a40-qwen3-coder-30b-a3b-awq.yaml).
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from simulator.twin.fit import evaluate, load_points
from simulator.twin.perf_model import (
    RooflinePerfModel,
    build_perf_model,
    decode_tok_s,
)
from simulator.twin.profiles import PROFILE_DIR
from simulator.twin.types import StepShape

POINTS = PROFILE_DIR / "calibration" / "a40-qwen3-coder-30b-a3b-awq.yaml"
HW, MODEL, CTX = "a40", "qwen3-coder-30b-a3b-awq", 3000
Line = tuple[str, float, str, str]   # label, predicted, measured text, error text


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _err(pred: float, measured: float) -> str:
    return f"{100 * (pred / measured - 1):+.1f}%"


def _range(pred: float, lo: float, hi: float) -> str:
    if lo <= pred <= hi:
        return "in range"
    return f"{_err(pred, lo if pred < lo else hi)} outside range"


def fitted_points() -> list[Line]:
    pm = build_perf_model(HW, MODEL)
    out: list[Line] = []
    for row in evaluate(load_points(POINTS).points, pm):
        o = row.obs
        meas = f"{_num(o.measured)} {o.unit}"
        err = _err(row.predicted, o.measured)
        if o.low is not None and o.high is not None:
            meas = f"{o.low:,.0f}–{o.high:,.0f} {o.unit}"
            err = f"{err} of mid; {_range(row.predicted, o.low, o.high)}"
        out.append((o.label, row.predicted, meas, err))
    return out


def pruned_model(pm: RooflinePerfModel) -> RooflinePerfModel:
    """The expert-pruned variant: 103 of 128 experts (the least used dropped), 12.9 GiB."""
    m = pm.model
    assert m.experts is not None
    q = m.quant().model_copy(update={"checkpoint_bytes": 12.9 * 2**30})
    pruned = m.model_copy(update={"experts": m.experts.model_copy(update={"total": 103}),
                                  "quantizations": {m.quantization: q}})
    return RooflinePerfModel(pm.hardware, pruned, pm.engine, pm.efficiency)


def cross_checks() -> list[Line]:
    """Figures not used in the fit: predictions, not residuals."""
    pm = build_perf_model(HW, MODEL)
    out: list[Line] = []
    pr = pruned_model(pm)
    for n in (1, 8, 32):
        ratio = decode_tok_s(pr, n, CTX) / decode_tok_s(pm, n, CTX)
        out.append((f"expert-pruned / full, {n} sessions", ratio, "same (1.00)",
                    _err(ratio, 1.0)))
    agg = decode_tok_s(pm, 32, CTX)
    usd = pm.hardware.usd_per_hour / (agg * 3600) * 1e6
    out.append(("$/1M output tokens at 32 sessions", usd, "0.105 $", _err(usd, 0.105)))
    spec = build_perf_model(HW, MODEL, spec="ngram:5")
    t6 = spec.step_time(StepShape(num_seqs=1, num_tokens=6, kv_tokens_read=CTX + 6))
    out.append(("n-gram depth 5, 3.41 tokens/step, single stream", 3.41 / t6,
                "259 tok/s", _err(3.41 / t6, 259)))
    kimi = build_perf_model(HW, "kimi-linear-48b-a3b-awq", overrides={"kv_dtype": "bf16"})
    cap = kimi.kv_capacity_tokens()
    out.append(("Kimi-Linear KV capacity (bf16 KV), A40", cap, "1,416,566–1,505,550",
                _range(cap, 1_416_566, 1_505_550)))
    gb10 = build_perf_model("gb10", MODEL)
    bytes_tok = gb10.weights.dense_read + 48 * 8 * gb10.weights.per_expert
    out.append(("GB10 MoE cap, bandwidth / bytes per token", 273e9 / bytes_tok,
                "~140 (from ~2 GB/token)", _err(273e9 / bytes_tok, 140)))
    return out


def engine_simulation(sessions: int, turns: int) -> tuple[float, float, float] | None:
    """Closed-loop engine run: each session's prompt grows by its reply and a tool result.
    Returns (aggregate tok/s in simulated time, simulated s per wall s, turns per wall s)."""
    try:
        from simulator.twin.engine import TwinEngine
        from simulator.twin.types import EngineRequest
    except ImportError:
        return None
    rng = random.Random(7)
    engine = TwinEngine(build_perf_model(HW, MODEL))
    system = [rng.randrange(50_000) for _ in range(2484)]
    prompts = {s: list(system) for s in range(sessions)}
    done_turns, out_tokens, wall0 = dict.fromkeys(range(sessions), 0), 0, time.perf_counter()

    def submit(s: int) -> None:
        plan = [rng.randrange(50_000) for _ in range(700)]
        rid = f"s{s}t{done_turns[s]}"
        engine.submit(EngineRequest(rid, tuple(prompts[s]), tuple(plan), engine.now))
        prompts[s] += plan + [rng.randrange(50_000) for _ in range(300)]

    for s in range(sessions):
        submit(s)
    while not engine.is_idle():
        for rid in engine.run_until(engine.now + 3600.0):
            out_tokens += len(engine.pop_result(rid).token_times)
            s = int(rid[1:].split("t")[0])
            done_turns[s] += 1
            if done_turns[s] < turns:
                submit(s)
    wall = time.perf_counter() - wall0
    return out_tokens / engine.now, engine.now / wall, sessions * turns / wall


def main() -> None:
    console = Console(width=150)
    table = Table(title=f"twin vs the calibration measurements ({HW} × {MODEL})")
    for col in ("figure", "twin", "measured", "error"):
        table.add_column(col, justify="left" if col in ("figure", "measured") else "right")
    for label, pred, meas, err in fitted_points():
        table.add_row(label, _num(pred), meas, err)
    table.add_section()
    for label, pred, meas, err in cross_checks():
        table.add_row(f"(cross-check) {label}", _num(pred), meas, err)
    console.print(table)
    for line in load_points(POINTS).assumptions:
        console.print(f"  assumption: {line}", highlight=False)
    sim = Table(title="engine simulation (closed loop, 2,484-token shared system prompt, "
                      "+700 reply +300 tool tokens per turn)")
    for col in ("sessions", "turns each", "aggregate tok/s", "sim s / wall s", "turns / wall s"):
        sim.add_column(col, justify="right")
    for sessions, turns in ((1, 12), (8, 12), (32, 6)):
        res = engine_simulation(sessions, turns)
        if res is None:
            console.print("engine not available: skipped the engine simulation")
            break
        sim.add_row(str(sessions), str(turns), f"{res[0]:,.0f}", f"{res[1]:,.0f}",
                    f"{res[2]:,.1f}")
    console.print(sim)


if __name__ == "__main__":
    main()
