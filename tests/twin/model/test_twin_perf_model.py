"""Performance model: monotonicity, MoE expert coverage, capacity, calibration residuals."""

from __future__ import annotations

import itertools

import pytest

from simulator.errors import InputError
from simulator.twin.core.types import StepShape
from simulator.twin.model.fit import evaluate, load_points
from simulator.twin.model.perf_model import (
    build_perf_model,
    decode_tok_s,
    expected_distinct_experts,
    prefill_seconds,
    routing_probabilities,
)
from simulator.twin.model.profiles import PROFILE_DIR

HW, MODEL = "a40", "qwen3-coder-30b-a3b-awq"
POINTS = PROFILE_DIR / "calibration" / "a40-qwen3-coder-30b-a3b-awq.yaml"


@pytest.fixture(scope="module")
def pm():  # type: ignore[no-untyped-def]
    return build_perf_model(HW, MODEL)


def test_more_context_is_slower(pm) -> None:  # type: ignore[no-untyped-def]
    rates = [decode_tok_s(pm, b, c) for b in (1, 8) for c in (0, 1000, 10_000, 100_000)]
    for batch_rates in (rates[:4], rates[4:]):
        assert all(a > b for a, b in itertools.pairwise(batch_rates))


def test_more_sequences_raise_aggregate_up_to_a_plateau(pm) -> None:  # type: ignore[no-untyped-def]
    agg = [decode_tok_s(pm, b, 2000) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    assert all(a < b for a, b in itertools.pairwise(agg))
    gains = [b / a for a, b in itertools.pairwise(agg)]
    assert gains[0] > 1.5 and gains[-1] < 1.4          # doubling pays less and less
    assert all(a > b for a, b in itertools.pairwise(gains))
    per_seq = [a / b for a, b in zip(agg, (1, 2, 4, 8, 16, 32, 64, 128, 256), strict=True)]
    assert all(a > b for a, b in itertools.pairwise(per_seq))


@pytest.mark.parametrize("skew", [0.0, 0.5, 1.0, 1.5])
def test_expert_coverage(skew: float) -> None:
    probs = routing_probabilities(128, 8, skew)
    assert probs.sum() == pytest.approx(8.0, rel=1e-6) and probs.max() <= 1.0
    table = expected_distinct_experts(probs, 8192)
    assert table[0] == 0.0 and table[1] == pytest.approx(8.0, rel=1e-6)
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(table))
    assert table[8192] == pytest.approx(128.0, abs=0.5)


def test_uniform_routing_matches_closed_form() -> None:
    table = expected_distinct_experts(routing_probabilities(128, 8, 0.0), 64)
    assert table[32] == pytest.approx(128 * (1 - (1 - 8 / 128) ** 32), rel=1e-6)


def test_skew_touches_fewer_experts() -> None:
    flat = expected_distinct_experts(routing_probabilities(128, 8, 0.0), 32)[32]
    skewed = expected_distinct_experts(routing_probabilities(128, 8, 1.2), 32)[32]
    assert skewed < flat


def test_dense_model_weight_time_does_not_depend_on_batch() -> None:
    dense = build_perf_model("h100", "llama-3.1-8b")
    t1 = dense.step_time(StepShape(1, 1, 1))
    t32 = dense.step_time(StepShape(32, 32, 32))
    assert t32 / t1 < 1.2          # bandwidth-bound: 32× the tokens for ~the same time


def test_prefill_is_compute_bound_and_cache_helps(pm) -> None:  # type: ignore[no-untyped-def]
    cold = prefill_seconds(pm, 20_000)
    warm = prefill_seconds(pm, 20_000, cached=19_984)
    assert warm < cold / 50
    assert prefill_seconds(pm, 40_000) > 2 * cold         # attention FLOPs grow with context


def test_capacity_and_blocks(pm) -> None:  # type: ignore[no-untyped-def]
    assert pm.block_size == 16
    assert pm.kv_capacity_tokens() == pm.num_blocks * 16
    bigger = build_perf_model("h200", MODEL)
    assert bigger.kv_capacity_tokens() > 4 * pm.kv_capacity_tokens()
    bf16 = build_perf_model(HW, MODEL, overrides={"kv_dtype": "bf16"})
    assert bf16.kv_capacity_tokens() == pytest.approx(pm.kv_capacity_tokens() / 2, rel=0.01)


def test_hybrid_uses_larger_attention_blocks() -> None:
    hybrid = build_perf_model("h100", "qwen3.6-35b-a3b-nvfp4")
    assert hybrid.block_size > 16 and hybrid.block_size % 16 == 0
    assert hybrid.state_bytes_per_seq > 0
    more_state = hybrid.step_time(StepShape(64, 64, 64 * 100))
    assert more_state > hybrid.step_time(StepShape(1, 1, 100))


def test_model_that_does_not_fit_is_an_input_error() -> None:
    with pytest.raises(InputError, match="leaves no KV cache"):
        build_perf_model("rtx4090", "llama-3.1-70b")
    with pytest.raises(InputError, match="unknown setting"):
        build_perf_model(HW, MODEL, overrides={"warp_speed": 9})


def test_spec_and_describe(pm) -> None:  # type: ignore[no-untyped-def]
    spec = build_perf_model(HW, MODEL, spec="ngram:5")
    assert spec.spec is not None and spec.spec.num_speculative_tokens == 5
    assert pm.spec is None
    d = pm.describe()
    assert d["simulated"] is True and d["hardware"]["name"] == HW
    assert d["engine"]["kv_dtype"] == "fp8" and "fitted" in d["calibration_source"]
    assert build_perf_model("l40s", MODEL).describe()["calibration_source"].startswith(
        "estimate: terms borrowed from the a40 fit")


def test_calibration_residuals_within_ten_percent(pm) -> None:  # type: ignore[no-untyped-def]
    rows = evaluate(load_points(POINTS).points, pm)
    assert len(rows) >= 9
    for row in rows:
        assert abs(row.error_pct) < 10.0, (row.obs.label, row.predicted, row.obs.measured)
        if row.obs.low is not None and row.obs.high is not None:
            assert row.obs.low * 0.9 <= row.predicted <= row.obs.high * 1.1
