"""How vLLM 0.32 runs a speculative step on each card (`twin.model.execution`), and the
step shape the engine builds for it (verification tiles, uniform batches, MLA demotion)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.twin.core.config import plain_config
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import EngineRequest, StepShape
from simulator.twin.model import execution as ex
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.spec_decode.ngram import NgramSpec


@pytest.mark.parametrize(("card", "kv", "mla", "backend"), [
    ((8, 6), "fp8", False, "flashinfer"),        # FA2 cannot read fp8 KV: FlashInfer
    ((8, 6), "bf16", False, "flash_attn_2"),
    ((9, 0), "fp8", False, "flash_attn_3"),      # FA3 reads fp8 KV on Hopper
    ((10, 0), "bf16", False, "flashinfer_trtllm"),
    ((12, 1), "bf16", False, "flash_attn_2"),
    ((8, 6), "bf16", True, "triton_mla"),
    ((12, 1), "bf16", True, "triton_mla"),
    ((9, 0), "bf16", True, "flash_attn_mla"),
    ((10, 0), "bf16", True, "flashinfer_mla"),
])
def test_backend_per_card_follows_vllm_priorities(card: tuple[int, int], kv: str, mla: bool,
                                                  backend: str) -> None:
    got = ex.attention_backend(card, kv, mla)
    assert got is not None and got.name == backend
    assert ex.attention_backend(None, kv, mla) is None       # a CPU: no CUDA backend


def test_verification_tiles() -> None:
    """FA2 computes 64 query rows per head whatever q (kBlockM 64, no GQA packing);
    FlashInfer packs the GQA group (8 here) into tiles of 16/64/128; FA3 into 128."""
    assert ex.FA2.verify_rows(6, 8) == 64
    assert ex.FA2.verify_rows(65, 8) == 128
    assert ex.FLASHINFER.verify_rows(2, 8) == 2           # 16 packed rows, one 16-tile
    assert ex.FLASHINFER.verify_rows(6, 8) == 8           # 48 rows → one 64-tile
    assert ex.FLASHINFER.verify_rows(25, 8) == 32         # 200 rows → two 128-tiles
    assert ex.FA3.verify_rows(6, 8) == 16


@given(q=st.integers(1, 40), g=st.sampled_from([1, 2, 4, 8, 16, 32]))
def test_tiles_never_compute_fewer_rows_than_queries(q: int, g: int) -> None:
    for b in (ex.FA2, ex.FA3, ex.FLASHINFER, ex.TRITON_MLA):
        assert b.verify_rows(q, g) >= q


def test_graph_mode_per_step() -> None:
    cc = (8, 6)
    ceiling = ex.capture_ceiling(64, 5, cc)
    assert ceiling == 512 and ex.capture_ceiling(64, 0, cc) == 128
    assert ex.capture_ceiling(64, 24, (10, 0)) == 1024          # data-center Blackwell
    assert ex.spec_mode("always", 200, ceiling, False) == "full"
    assert ex.spec_mode("uniform_batch", 200, ceiling, True) == "full"
    assert ex.spec_mode("uniform_batch", 200, ceiling, False) == "piecewise"
    assert ex.spec_mode("single_token", 200, ceiling, True) == "piecewise"
    assert ex.spec_mode("always", 600, ceiling, True) == "eager"  # past the ceiling
    assert ex.graph_support(ex.FA3, hybrid=True) == "uniform_batch"   # Mamba/GDN groups


def test_mode_cost_on_each_card() -> None:
    """A pure-decode step of unequal drafts: piecewise on GB10 (FA2), full on H100 (FA3);
    past the capture ceiling: eager everywhere."""
    gb10 = build_perf_model("gb10", "qwen3-coder-30b-a3b-awq", spec="ngram:5")
    h100 = build_perf_model("h100", "qwen3-coder-30b-a3b-awq", spec="ngram:5")
    shape = StepShape(8, 30, 8 * 3000, draft_tokens=22, spec_seqs=8)
    assert gb10.mode_time(shape) == gb10.efficiency.piecewise_step_s > 0
    assert h100.mode_time(shape) == 0.0
    big = StepShape(100, 600, 100 * 3000, draft_tokens=500, spec_seqs=100)
    assert h100.mode_time(big) == h100.efficiency.eager_step_s
    kimi = build_perf_model("a40", "kimi-linear-48b-a3b-awq", spec="ngram:5")
    assert kimi.mode_time(StepShape(1, 1, 3000)) == kimi.efficiency.eager_step_s


class _Perf:
    """A perf model that records the shapes it is asked to time."""

    def __init__(self, rows: tuple[float, ...]) -> None:
        self.shapes: list[StepShape] = []
        self.verify_rows = rows

    def step_time(self, shape: StepShape) -> float:
        self.shapes.append(shape)
        return 0.01

    def kv_capacity_tokens(self) -> int:
        return 1 << 20


def _run(prompts: list[list[int]], plans: list[list[int]], rows: tuple[float, ...]) -> _Perf:
    perf = _Perf(rows)
    eng = TwinEngine(perf, plain_config(perf, num_blocks=4000, spec=NgramSpec(4, 2, 2),
                                        verify_rows=perf.verify_rows))
    for i, (p, plan) in enumerate(zip(prompts, plans, strict=True)):
        eng.submit(EngineRequest(f"r{i}", p, plan, 0.0))
    while not eng.is_idle():
        eng.step()
    return perf


def test_engine_reports_verification_tiles_and_uniform_batches() -> None:
    """A sequence that repeats itself drafts; its step carries its tiles × context and
    is uniform when its draft is full (1 + k) and alone in the batch."""
    rep = [1, 2, 3, 4, 5, 6, 7, 8] * 8
    perf = _run([rep], [rep[:40]], tuple(float(64) for _ in range(40)))
    drafted = [s for s in perf.shapes if s.draft_tokens]
    assert drafted
    for s in drafted:
        assert s.verify_context > 0
        assert s.verify_pairs == pytest.approx(64 * (s.verify_context + (1 + s.draft_tokens) / 2))
        assert s.uniform_decode == (s.draft_tokens == 4)
    assert all(s.demoted_context == 0 for s in perf.shapes)     # one decode: nothing demoted


def test_engine_reports_decodes_an_mla_backend_demotes() -> None:
    """Two decodes of different lengths: the second is run on the prefill path by an
    MLA backend with uniform query lengths (split_decodes_and_prefills(require_uniform))."""
    rep = [1, 2, 3, 4, 5, 6, 7, 8] * 8
    fresh = list(range(100, 164))
    perf = _run([rep, fresh], [rep[:40], list(range(200, 240))], tuple(range(40)))
    mixed = [s for s in perf.shapes if s.num_seqs == 2 and s.draft_tokens
             and not s.prefill_tokens]
    assert mixed and all(s.demoted_context > 0 and not s.uniform_decode for s in mixed)
