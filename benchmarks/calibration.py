"""Twin predictions next to every figure of the A40 calibration measurements, with the error.

Run: `python benchmarks/calibration.py`. Not a timed test: it prints what the fitted
performance model predicts for the A40 + Qwen3-Coder-30B-A3B AWQ measurements (and the
GB10 ones), and the assumptions behind each mapping (listed in
simulator/twin/model/profiles/calibration/a40-qwen3-coder-30b-a3b-awq.yaml).

Two kinds of row: closed-form ones (decode and prefill of one step shape, bytes per pass,
KV capacity: `perf_model` arithmetic, nothing to run) and scenario ones, each an
`endurance run` of a scenario under scenarios/calibration/ (`sweep.calibration.run_calibration`;
the row names the scenario), so a user running that scenario gets the printed figure.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from simulator.sweep.calibration import RUNS, PointRun
from simulator.twin.model.fit import evaluate, load_points
from simulator.twin.model.perf_model import (
    RooflinePerfModel,
    build_perf_model,
    decode_tok_s,
    prefill_seconds,
)
from simulator.twin.model.profiles import PROFILE_DIR

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
    kimi = build_perf_model(HW, "kimi-linear-48b-a3b-awq", overrides={"kv_dtype": "bf16"})
    cap = kimi.kv_capacity_tokens()
    out.append(("Kimi-Linear KV capacity (bf16 KV), A40", cap, "1,416,566–1,505,550",
                _range(cap, 1_416_566, 1_505_550)))
    ratio = _warm_rate(kimi, 300) / _warm_rate(pm, 300)
    out.append(("Kimi-Linear ÷ Qwen3-Coder warm prefill rate, 300-token step on a 20k "
                "prefix (mean over where the prefix ends in Kimi's block)", ratio,
                "about half (issue 28's source; not in calibration.md)",
                _range(ratio, 0.4, 0.6)))
    gb10 = build_perf_model("gb10", "qwen3.6-35b-a3b-nvfp4")
    bytes_tok = gb10.weights.dense_read + 40 * 8 * gb10.weights.per_expert
    out.append(("GB10 MoE cap, bandwidth / bytes per token", 273e9 / bytes_tok,
                "~140 (from ~2 GB/token)", _err(273e9 / bytes_tok, 140)))
    return out


def _warm_rate(pm: RooflinePerfModel, new_tokens: int) -> float:
    """Prompt tokens / prefill time of a 20k-token prompt whose first `new_tokens` back
    are new, averaged over 32 offsets across a Kimi block (1,888 tokens on the A40): a
    hybrid resumes at its last block boundary, so where the prefix ends decides its cost."""
    rates = [(20_000 + o) / prefill_seconds(pm, 20_000 + o, 20_000 + o - new_tokens)
             for o in range(0, 1_888, 59)]
    return sum(rates) / len(rates)


EXPLAINED = (
    "expert-pruned / full ≈ +6–9%: the twin reads fewer expert bytes (103 of 128 experts "
    "by rank popularity); the measured 'same throughput' suggests the pruned experts were "
    "rarely touched even at 32 sessions, i.e. a stronger skew than the fitted 1.24",
    "Kimi-Linear KV −15%: 0.9 × 48 GB − 28.4 GiB weights − the Qwen-fitted 3.2 GB reserve "
    "leaves 9.8 GB; the logged 1.42–1.51M tokens need 11.4–12.1 GB (a utilisation of "
    "0.94–0.95 or a smaller reserve for this model; not in the data)",
    "ngram:5 / ngram:24 accepted per draft above the measured 3.41 / 17.16 and ngram:12 "
    "high (the rows give the twin's): the three measured runs had different replies "
    "(depth 12 accepted only 3.23 per draft, 26.9%; depth 5's 68% against depth 24's 71.5% "
    "cannot come from one reply, as a deeper draft wastes more of each broken run); the "
    "twin has one code-edit content (textgen.py: copied runs of 20–60 lines, 8% of lines "
    "edited in place) and spec_step_s / spec_seq_s are fitted to the three rates and the "
    "32-stream ratio through these scenario runs (the minimax of the errors), so its "
    "per-draft figures sit above the measured ones",
    "ngram:24 isolated turn at 20k: one 900-token turn, so its content decides it (the row "
    "gives the range over 8 seeds; the mean is shown); the measured turn is one draw, and "
    "the twin's code-edit replies copy more than it did",
    "32 streams aggregate, 32 × the run's median: fresh-text.yaml's prompts (2.5k system + "
    "1.5k read + 0.9k reply per turn) are longer than the ~3k steady state of the measured "
    "off figure, so speculation off gives less than 1,165.6 there too; the ratio is what "
    "the fit takes",
    "GB10 Qwen3.8-27B prefill +26%: GB10 has no fit of its own; it borrows the A40's "
    "efficiency terms (prefill MFU 0.27 fitted on bf16) and applies them to the FP4 "
    "datasheet peak (500 TFLOPS dense); the measured 2,088 tok/s means ~113 TFLOPS "
    "effective, 23% of that peak. One point, so no FP4 efficiency of its own is fitted",
    "GB10 Qwen3.8-27B single stream: 10.0 tok/s is 86% of the 11.7 tok/s bandwidth "
    "roofline (η_w 0.9 plus the per-step overhead t0); calibration.md gives the "
    "roofline (~12), not a measurement",
    "GB10 Qwen3.8-27B KV: the profile's bytes per token come from this capacity (the "
    "shape of its 16 full-attention layers is not published; the estimated shape gave "
    "65.5 KB per token and −28%)",
)


def _decode(p: PointRun) -> float:
    if p.decode_tok_s_median is None:
        raise RuntimeError("a calibration run decoded nothing")
    return p.decode_tok_s_median


def speculation_rows() -> list[Line]:
    """calibration.md's n-gram rows, each run through the product's path
    (`sweep.calibration.run_calibration`: `endurance run` on a scenario of
    scenarios/calibration/, `sweep.calibration.RUNS`; the figure is the summary's median
    decode rate), so a user running the named scenario gets these figures."""
    out: list[Line] = []
    for spec, meas, acc in (("ngram:5", 259.2, "68% / 3.41"),
                            ("ngram:12", 363.9, "27% / 3.23"),   # budget 16384
                            ("ngram:24", 574.7, "72% / 17.16")):
        p = RUNS[f"code-edit {spec}"].run()
        s = p.summary
        rate = _decode(p)
        out.append((f"{spec} single-stream code edit, code-edit-single-stream.yaml (twin "
                    f"acceptance {100 * (s.get('spec_acceptance_share') or 0):.0f}% / "
                    f"{(s.get('spec_mean_acceptance_length') or 1) - 1:.2f} per draft; "
                    f"measured {acc}; {p.tokens_per_forward_pass or 0:.2f} tokens/pass)",
                    rate, f"{meas} tok/s", _err(rate, meas)))
    iso = [_decode(RUNS[f"isolated-20k seed {seed}"].run()) for seed in range(1, 9)]
    one = sum(iso) / len(iso)
    out.append((f"ngram:24 one isolated code-edit turn at ~20k context, "
                f"code-edit-isolated-20k.yaml (mean of seeds 1–8: {min(iso):.0f}–"
                f"{max(iso):.0f})", one, "421 tok/s", _err(one, 421)))
    spec32, off32 = RUNS["fresh 32 streams ngram:5"].run(), RUNS["fresh 32 streams off"].run()
    ratio = _decode(spec32) / _decode(off32)
    out.append(("32 streams ngram:5 ÷ off, fresh-text.yaml --sessions 32 --turns 2", ratio,
                "0.254 (296.1 / 1,165.6)", _err(ratio, 296.1 / 1165.6)))
    agg = 32 * _decode(spec32)
    out.append(("32 streams ngram:5 aggregate (32 × the run's median decode rate)", agg,
                "296.1 tok/s", _err(agg, 296.1)))
    agg = ratio * decode_tok_s(build_perf_model(HW, MODEL), 32, CTX)
    out.append(("32 streams ngram:5 aggregate (the ratio × the fitted 32-session off "
                "figure)", agg, "296.1 tok/s", _err(agg, 296.1)))
    for n in (1, 8):
        k_off, k_on = RUNS[f"kimi {n} off"].run(), RUNS[f"kimi {n} ngram:5"].run()
        slow = _decode(k_off) / _decode(k_on)
        out.append((f"Kimi-Linear ngram:5 slowdown, {n} session(s), CUDA graphs off, "
                    f"fresh-text.yaml --sessions {n} --turns 1", slow, "3–4×",
                    _range(slow, 3.0, 4.0)))
    fresh = _decode(RUNS["fresh 1 stream ngram:5"].run())
    base = _decode(RUNS["fresh 1 stream off"].run())
    out.append(("single stream fresh text, ngram:5 ÷ off, fresh-text.yaml", fresh / base,
                "< 1 (a net loss)", "ok" if fresh < base else "WRONG DIRECTION"))
    return out


def gb10_rows() -> list[Line]:
    """calibration.md's GB10 section: KV budget 36 GiB, max 16 sequences."""
    out: list[Line] = []
    kv = 36 * 2**30

    def gb10(model: str, spec: str = "off", **over: object) -> RooflinePerfModel:
        pm = build_perf_model("gb10", model, spec=spec,
                              overrides={"max_num_seqs": 16, **over})
        hw = pm.hardware.model_copy(update={"kv_cache_bytes": kv})
        return RooflinePerfModel(hw, pm.model, pm.engine, pm.efficiency,
                                 quantization=pm.quantization)

    moe = gb10("qwen3.6-35b-a3b-nvfp4")
    assert moe.model.experts is not None
    per_pass = (moe.weights.dense_read
                + moe.model.experts.moe_layers * moe.model.experts.active
                * moe.weights.per_expert)
    out.append(("GB10 Qwen3.6-35B-A3B W4A16: bytes read per pass (batch 1)", per_pass / 1e9,
                "~2.0 GB", _err(per_pass / 1e9, 2.0)))
    out.append(("GB10 Qwen3.6-35B-A3B: checkpoint size", moe.weights.total / 2**30,
                "21.8 GiB", _err(moe.weights.total / 2**30, 21.8)))
    rate = 12_000 / prefill_seconds(moe, 12_000)
    out.append(("GB10 Qwen3.6-35B-A3B: prefill of a 12K prompt", rate, "~6,600 tok/s",
                _err(rate, 6600)))
    cap = moe.kv_capacity_tokens()
    out.append(("GB10 Qwen3.6-35B-A3B: KV capacity at 36 GiB", cap, "1,837,064 tokens",
                _err(cap, 1_837_064)))
    dense = gb10("qwen3.8-27b-awq", quantization="nvfp4")
    out.append(("GB10 Qwen3.8-27B NVFP4: bytes read per token", dense.weights.dense_read / 1e9,
                "23.4 GB", _err(dense.weights.dense_read / 1e9, 23.4)))
    rate = 12_000 / prefill_seconds(dense, 12_000)
    out.append(("GB10 Qwen3.8-27B: prefill of a 12K prompt", rate, "~2,088 tok/s",
                _err(rate, 2088)))
    cap = dense.kv_capacity_tokens()
    out.append(("GB10 Qwen3.8-27B: KV capacity at 36 GiB", cap, "813,427 tokens",
                _err(cap, 813_427)))
    off = decode_tok_s(dense, 1, CTX)
    roof = dense.hardware.bandwidth_bytes_s / dense.weights.dense_read   # 273 / 23.4 GB
    out.append(("GB10 Qwen3.8-27B: single stream, no speculation (a bound: calibration.md "
                "gives the bandwidth roofline, not a measured rate)", off,
                f"≤ ~12 (roofline {roof:.1f})",
                f"{_err(off, roof)} of the roofline; "
                + ("below it (ok)" if off <= roof else "ABOVE THE ROOFLINE")))
    drafted = RUNS["gb10 draft:7"].run()   # the scenario's twin: GB10, draft:7
    rate = _decode(drafted)
    acc = (drafted.summary.get("spec_mean_acceptance_length") or 1) - 1
    out.append((f"GB10 Qwen3.8-27B draft:7 single stream, gb10-draft-single-stream.yaml "
                f"(twin {acc:.2f} accepted/step, measured ~3.9)", rate, "34.8 tok/s",
                _err(rate, 34.8)))
    return out


def per_card_rows() -> list[Line]:
    """calibration.md's sessions-per-card figures (N × the mean per-session rate) against
    N × the median decode rate of sessions-per-card.yaml --turns 2 (the fitted rows take
    the same figures closed form at an assumed 3,000-token mean context)."""
    out: list[Line] = []
    for n, meas in ((1, 123.0), (32, 1160.0)):
        agg = n * _decode(RUNS[f"per-card {n}"].run())
        out.append((f"{n} agentic session(s), aggregate decode, sessions-per-card.yaml "
                    f"--sessions {n} --turns 2", agg, f"{meas:,.0f} tok/s", _err(agg, meas)))
    return out


def sessions_per_card(sessions: int, turns: int) -> tuple[PointRun, float]:
    """sessions-per-card.yaml with `sessions` × `turns`, through the product's path; with
    the wall seconds the run took (records, summary and all)."""
    wall0 = time.perf_counter()
    p = RUNS[f"per-card {sessions} x{turns}"].run()
    return p, time.perf_counter() - wall0


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
    for label, pred, meas, err in per_card_rows():
        table.add_row(f"(cross-check) {label}", _num(pred), meas, err)
    table.add_section()
    for label, pred, meas, err in speculation_rows():
        table.add_row(f"(speculation) {label}", _num(pred), meas, err)
    table.add_section()
    for label, pred, meas, err in gb10_rows():
        table.add_row(f"(GB10) {label}", _num(pred), meas, err)
    console.print(table)
    for line in load_points(POINTS).assumptions:
        console.print(f"  assumption: {line}", highlight=False)
    for line in EXPLAINED:
        console.print(f"  explained: {line}", highlight=False)
    sim = Table(title="longer sessions per card through `endurance run` "
                      "(sessions-per-card.yaml: 2,484-token shared system prompt, +700 "
                      "reply +300 tool tokens per turn, speculation off), and its speed")
    for col in ("sessions", "turns each", "N × median decode tok/s",
                "output ÷ window tok/s", "sim s / wall s", "turns / wall s"):
        sim.add_column(col, justify="right")
    for sessions, turns in ((1, 12), (8, 12), (32, 6)):
        p, wall = sessions_per_card(sessions, turns)
        window = p.summary.get("wall_window_s") or 0.0
        sim.add_row(str(sessions), str(turns), f"{sessions * _decode(p):,.0f}",
                    f"{p.summary.get('aggregate_tok_s') or 0:,.0f}", f"{window / wall:,.0f}",
                    f"{sessions * turns / wall:,.1f}")
    console.print(sim)


if __name__ == "__main__":
    main()
