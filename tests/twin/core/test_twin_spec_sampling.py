"""What a request's sampling parameters cost under speculation (issue 48): the engine
counts the sampler's draft rows batch-wide, as vLLM 0.32 does, and the perf model prices
them as named terms."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.sampling import SamplingParams
from simulator.twin.core.types import EngineRequest, StepShape
from simulator.twin.model.perf_model import (
    PENALTY_BYTES_PER_VOCAB,
    TOPK_BYTES_PER_VOCAB,
    RooflinePerfModel,
    build_perf_model,
)

HW, MODEL = "a40", "qwen3-coder-30b-a3b-awq"
# Qwen3-Coder's generation_config.json, as vLLM's --generation-config auto applies it
QWEN = SamplingParams(temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05)


class Recording(RooflinePerfModel):
    """The roofline, keeping every step shape it times."""

    shapes: list[StepShape]

    def step_time(self, shape: StepShape) -> float:
        self.shapes.append(shape)
        return super().step_time(shape)


def _recording(spec: str = "ngram:5") -> Recording:
    pm = build_perf_model(HW, MODEL, spec=spec)
    pm.__class__ = Recording
    assert isinstance(pm, Recording)
    pm.shapes = []
    return pm


def _copying_requests(n: int, sampling: list[SamplingParams | None]) -> list[EngineRequest]:
    """n requests whose replies copy their prompt: the proposer drafts on every step."""
    rng = random.Random(7)
    out = []
    for i in range(n):
        prompt = [rng.randrange(50_000) for _ in range(2000)]
        out.append(EngineRequest(f"r{i}", prompt, prompt[500:500 + 300], 0.0,
                                 sampling=sampling[i]))
    return out


def _run(reqs: list[EngineRequest], spec: str = "ngram:5") -> tuple[float, Recording]:
    pm = _recording(spec)
    eng = TwinEngine(pm)
    for r in reqs:
        eng.submit(r)
    eng.run_until(float("inf"))
    return eng.now, pm


def test_a_penalty_makes_speculation_steps_slower() -> None:
    """The same copying requests, neutral vs Qwen3-Coder's generation config: the
    drafts and acceptances are the same (the twin's content decides them), the steps
    with drafts take longer by exactly the sampler terms."""
    neutral_t, neutral = _run(_copying_requests(4, [None] * 4))
    qwen_t, qwen = _run(_copying_requests(4, [QWEN] * 4))
    assert len(neutral.shapes) == len(qwen.shapes)
    assert qwen_t > neutral_t
    drafted = [s for s in qwen.shapes if s.draft_tokens]
    assert drafted and all(s.penalty_draft_rows > 0 and s.topk_draft_rows > 0
                           for s in drafted)
    assert all(s.penalty_draft_rows == 0 and s.topk_draft_rows == 0 for s in neutral.shapes)
    extra = sum(qwen._t_pen_row * s.penalty_draft_rows
                + qwen._t_pen_pad * s.penalty_pad_tokens
                + qwen._t_topk_row * s.topk_draft_rows for s in qwen.shapes)
    assert qwen_t - neutral_t == pytest.approx(extra, rel=1e-9)


def test_one_penalised_request_makes_every_draft_row_pay() -> None:
    """vLLM's no_penalties is batch-wide: one request with a penalty and the history is
    built (and padded to the longest output) for every drafting request's rows."""
    _, pm = _run(_copying_requests(3, [SamplingParams(repetition_penalty=1.1), None, None]))
    both = [s for s in pm.shapes if s.draft_tokens and s.num_seqs == 3]
    assert both
    for s in both:
        # 1 + drafts for each decode that drafted, whichever request carries the penalty
        assert s.draft_tokens < s.penalty_draft_rows <= s.draft_tokens + s.num_seqs
        assert s.penalty_pad_tokens % s.penalty_draft_rows == 0
        assert s.penalty_pad_tokens // s.penalty_draft_rows <= 300   # the longest output
        assert s.topk_draft_rows == 0                      # top_k 0, top_p 1: no sort


def test_greedy_skips_top_k_top_p_but_not_penalties() -> None:
    greedy = SamplingParams(temperature=0.0, top_k=20, top_p=0.8, frequency_penalty=0.5)
    _, pm = _run(_copying_requests(1, [greedy]))
    drafted = [s for s in pm.shapes if s.draft_tokens]
    assert drafted and all(s.topk_draft_rows == 0 < s.penalty_draft_rows for s in drafted)


def test_sampler_terms_are_their_formula() -> None:
    """Per draft row: the measured host cost plus the device bytes per vocabulary entry
    over the card's bandwidth; per padded history token: the measured host cost."""
    pm = build_perf_model(HW, MODEL, spec="ngram:5")
    vocab = pm.model.params.lm_head / pm.model.hidden_size
    bw = pm.hardware.bandwidth_bytes_s
    eff = pm.efficiency
    base = StepShape(8, 48, 8 * 3000, draft_tokens=40, spec_seqs=8)
    shape = replace(base, penalty_draft_rows=48, penalty_pad_tokens=48 * 700,
                    topk_draft_rows=48)
    want = (48 * (eff.penalty_row_s + PENALTY_BYTES_PER_VOCAB * vocab / bw)
            + 48 * 700 * eff.penalty_pad_tok_s
            + 48 * (eff.topk_row_s + TOPK_BYTES_PER_VOCAB * vocab / bw))
    assert want > 0
    assert pm.step_time(shape) - pm.step_time(base) == pytest.approx(want, rel=1e-9)
    # without speculation nothing is charged (vLLM's plain sampler is not a draft row)
    off = build_perf_model(HW, MODEL)
    assert off.step_time(shape) == off.step_time(base)
