"""A CPU card's step adds its memory and compute times (`eta_overlap` 0); a GPU's step
is the longer of the two. Measured on vLLM CPU 0.32 (issue 48): the forward pass grows
by ~1.8 ms per token processed from 1 to 34 tokens, where the longer-of-two roofline kept
it flat below ~35 tokens and over-predicted speculation at 4 and 8 streams by 30-42%."""

from __future__ import annotations

import pytest

from simulator.twin.core.decode_burst import decode_terms
from simulator.twin.core.types import StepShape
from simulator.twin.model.perf_model import build_perf_model


def _decode(n: int, drafts: int = 0) -> StepShape:
    return StepShape(n, n + drafts, 500 * n + drafts, 0, 0.0, drafts, n)


def test_cpu_card_adds_compute_to_the_weights_read() -> None:
    pm = build_perf_model("cpu-2core-fitted", "smollm2-135m")
    one, many = pm.step_time(_decode(8)), pm.step_time(_decode(8, drafts=26))
    # 26 more tokens through the linear layers cost about 26 × their compute time
    per_tok = (many - one) / 26
    assert 0.8e-3 < per_tok < 3e-3, per_tok


def test_gpu_card_keeps_the_longer_of_the_two() -> None:
    pm = build_perf_model("a40", "llama-3.1-8b")
    # memory-bound: 8 more tokens at batch 8 cost far less than their compute alone
    one, more = pm.step_time(_decode(8)), pm.step_time(_decode(16))
    assert more - one < 0.05 * one


@pytest.mark.parametrize(("card", "inline"), [("cpu-2core-fitted", False), ("a40", True)])
def test_inline_decode_terms_only_where_they_are_the_roofline(card: str, inline: bool) -> None:
    """The engine's fast path computes `max(mem, comp)` inline; a card that adds them
    takes `step_time` instead (the terms are refused), so both paths agree."""
    model = "smollm2-135m" if card.startswith("cpu") else "llama-3.1-8b"
    pm = build_perf_model(card, model)
    assert (decode_terms(pm, 4) is not None) is inline
