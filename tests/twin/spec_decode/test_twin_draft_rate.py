"""The n-gram proposer's draft rate on a (context, reply) pair (issue 48, item 4)."""

from __future__ import annotations

import random

from simulator.twin.spec_decode.draft_rate import DraftStats, draft_stats, total
from simulator.twin.spec_decode.ngram import NgramSpec
from simulator.twin.spec_decode.predictability import IndexMeter

SPEC = NgramSpec(5)


def _tokens(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(50_000) for _ in range(n)]


def test_fresh_reply_never_drafts_and_a_copy_drafts_almost_every_pass() -> None:
    context = _tokens(2000, 1)
    fresh = draft_stats(context, _tokens(300, 2), SPEC)
    assert fresh.passes == 299 and fresh.drafted == 0 and fresh.tokens_per_pass == 1.0
    copy = draft_stats(context, context[100:400], SPEC)
    assert copy.hit_rate > 0.9 and copy.tokens_per_pass > 4
    assert copy.accepted <= copy.draft_tokens <= copy.drafted * SPEC.num_speculative_tokens


def test_passes_agree_with_the_engine_replay_meter() -> None:
    """The prefill pass plus the decode passes are the reference meter's count."""
    context = _tokens(1500, 3)
    reply = _tokens(80, 4) + context[200:350] + _tokens(60, 5)
    stats = draft_stats(context, reply, SPEC)
    assert stats.passes + 1 == IndexMeter(SPEC).passes(context, reply)
    assert 0 < stats.hit_rate < 1


def test_total_adds_pairs() -> None:
    a, b = (_tokens(500, 6), _tokens(50, 7)), (_tokens(500, 8), _tokens(40, 9))
    assert total([a, b], SPEC) == draft_stats(*a, SPEC) + draft_stats(*b, SPEC)
    assert total([], SPEC) == DraftStats() and DraftStats().hit_rate == 0.0
