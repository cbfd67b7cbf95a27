"""A step's GEMMs are the dense layers and the routed experts a token activates; the input
embedding is a gather and costs no FLOPs.

`params.active` is counted two ways: an MoE profile's, as its model card gives it, is the
GEMMs + the LM head; a dense profile's is its total, embedding included. Priced from
`active`, a dense model's steps carried its embedding as a GEMM (Llama-3.1-70B 1.5%, Qwen3-32B
2.5%, Llama-3.1-8B 7.5%, SmolLM2-135M 26.7% of its GEMMs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.twin.core.types import StepShape
from simulator.twin.model.perf_model import RooflinePerfModel, build_perf_model
from simulator.twin.model.profiles import load_model

PROFILES = Path(__file__).resolve().parents[3] / "simulator/twin/model/profiles/models"
# one compute-bound prefill step: 8192 prompt tokens of one sequence
PREFILL = StepShape(num_seqs=1, num_tokens=8192, kv_tokens_read=8192, prefill_tokens=8192)


def _with_embedding(pm: RooflinePerfModel, extra: float) -> RooflinePerfModel:
    """The same twin with `extra` more input-embedding parameters (a larger vocabulary's
    table; the LM head kept), counted in `total`, and in `active` where the profile's
    `active` counts its embedding (a dense model's)."""
    p = pm.model.params
    dense = pm.model.experts is None
    params = p.model_copy(update={"embedding": p.embedding + extra, "total": p.total + extra,
                                  "active": p.active + (extra if dense else 0.0)})
    model = pm.model.model_copy(update={"params": params})
    return RooflinePerfModel(pm.hardware, model, pm.engine, pm.efficiency,
                             quantization=pm.quantization)


@pytest.mark.parametrize(("twin", "tp"), [("h100/llama-3.1-70b:fp8", 2),
                                          ("h100/llama-3.1-70b:fp8", 4),
                                          ("h100/qwen3-32b:fp8", 1),
                                          ("cpu-2core-fitted/smollm2-135m", 1),
                                          ("h100/gpt-oss-20b", 1), ("h100/gpt-oss-120b", 2)])
def test_a_larger_embedding_table_adds_no_compute(twin: str, tp: int) -> None:
    hw, model = twin.split("/")
    pm = build_perf_model(hw, model, overrides={"tensor_parallel_size": tp})
    bigger = _with_embedding(pm, 2e9)
    assert bigger.step_time(PREFILL) == pytest.approx(pm.step_time(PREFILL), rel=1e-12)


@pytest.mark.parametrize(("model", "counts_embedding"), [
    ("llama-3.1-70b", True), ("qwen3-32b", True), ("smollm2-135m", True),
    ("gpt-oss-20b", False), ("qwen3-coder-30b-a3b-awq", False), ("qwen3-235b-a22b", False)])
def test_gemm_parameters_are_active_less_head_and_any_embedding(model: str,
                                                               counts_embedding: bool) -> None:
    p = load_model(model).params
    want = p.active - p.lm_head - (p.embedding if counts_embedding else 0.0)
    assert load_model(model).gemm_params == pytest.approx(want, rel=1e-6)


def test_a_step_prices_the_gemm_parameters() -> None:
    pm = build_perf_model("h100", "llama-3.1-70b:fp8")
    p = pm.model.params
    assert pm._t_flop_tok == pytest.approx(
        2.0 * (p.active - p.lm_head - p.embedding) / (pm.efficiency.eta_c * pm.peak_flops),
        rel=1e-12)


def test_a_profile_whose_active_does_not_add_up_is_refused(tmp_path: Path) -> None:
    text = (PROFILES / "gpt-oss-20b.yaml").read_text()
    bad = tmp_path / "oss.yaml"
    bad.write_text(text.replace("active: 3608307264", "active: 1000000000"))
    with pytest.raises(InputError, match=r"^\S*oss\.yaml: params\.active 1e\+09 is neither "):
        load_model(str(bad))
