"""Card terms and kernel-family terms (issue 56): what a twin borrows is said, what a card
has of its own is used, and a card with none keeps the numbers it had."""

from __future__ import annotations

import pytest

from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.model.profiles import (
    CardTerms,
    FamilyTerms,
    efficiency_for,
    kernel_family,
    load_hardware,
    load_model,
)


@pytest.mark.parametrize(("model", "quant", "family"), [
    ("qwen3-coder-30b-a3b-awq", None, "w4a16-moe"), ("llama-3.1-70b", "fp8", "fp8-dense"),
    ("gpt-oss-120b", None, "fp4-moe"), ("llama-3.1-8b", None, "bf16-dense")])
def test_kernel_family(model: str, quant: str | None, family: str) -> None:
    assert kernel_family(load_model(model), quant) == family


def test_a40_on_its_own_family_keeps_its_fit_and_label() -> None:
    hw = load_hardware("a40")
    assert hw.efficiency is not None
    eff, label = efficiency_for(hw, "w4a16-moe")
    assert eff == hw.efficiency and label == hw.efficiency.source


def test_another_family_on_a40_is_an_estimate() -> None:
    eff, label = efficiency_for(load_hardware("a40"), "fp8-dense")
    assert label.startswith("estimate: fp8-dense kernel terms borrowed from the a40 "
                            "w4a16-moe fit")
    assert eff.eta_c == load_hardware("a40").efficiency.eta_c  # type: ignore[union-attr]


def test_card_and_family_terms_are_used_and_named() -> None:
    base = load_hardware("l40s")
    hw = base.model_copy(update={
        "card_terms": CardTerms(t0_s=0.004, mixed_step_s=0.001, source="test fit"),
        "families": {"fp8-dense": FamilyTerms(eta_c=0.6, eta_w=0.8, source="test fit")}})
    eff, label = efficiency_for(hw, "fp8-dense")
    assert (eff.t0_s, eff.mixed_step_s, eff.eta_c, eff.eta_w) == (0.004, 0.001, 0.6, 0.8)
    assert "fp8-dense kernel terms eta_c, eta_w fitted on l40s" in label
    assert "card terms t0_s, mixed_step_s fitted on l40s" in label
    # card terms not fitted are said to be borrowed
    assert label.startswith("estimate: card terms t_seq_s")
    other, other_label = efficiency_for(hw, "w4a16-moe")
    a40 = load_hardware("a40").efficiency
    assert a40 is not None and other.eta_c == a40.eta_c and other.t0_s == 0.004
    assert "w4a16-moe kernel terms borrowed from the a40 fit" in other_label


def test_the_mixed_step_costs_only_steps_with_prefill() -> None:
    from simulator.twin.core.types import StepShape
    plain = build_perf_model("a40", "qwen3-coder-30b-a3b-awq")
    mixed = build_perf_model("a40", "qwen3-coder-30b-a3b-awq",
                             overrides={"mixed_step_s": 0.002, "mixed_seq_s": 1e-4})
    decode = StepShape(num_seqs=8, num_tokens=8, kv_tokens_read=8000)
    prefill = StepShape(num_seqs=8, num_tokens=520, kv_tokens_read=8512, prefill_tokens=512,
                        attn_token_pairs=512 * 256.0)
    assert mixed.step_time(decode) == plain.step_time(decode)
    assert mixed.step_time(prefill) == pytest.approx(plain.step_time(prefill) + 0.002 + 8e-4)
    assert "mixed_step_s" not in plain.describe()["efficiency"]


def test_tensor_parallel_shards_and_adds_the_fitted_all_reduce_residual() -> None:
    one = build_perf_model("h200", "llama-3.1-70b:fp8")
    two = build_perf_model("h200", "llama-3.1-70b:fp8",
                           overrides={"tensor_parallel_size": 2, "allreduce_s": 1e-5})
    bare = build_perf_model("h200", "llama-3.1-70b:fp8",
                            overrides={"tensor_parallel_size": 2, "allreduce_s": 0.0})
    assert two.hardware.memory_bytes == one.hardware.memory_bytes      # one card's, sharded
    assert two.comm_time(1) - bare.comm_time(1) == pytest.approx(1e-5 * 160)  # 80 layers × 2
    assert two.kv_capacity_tokens() > 2 * one.kv_capacity_tokens()   # weights paid once
    assert "tensor_parallel_size" not in one.describe()["engine"]
    assert two.describe()["engine"]["tensor_parallel_size"] == 2
