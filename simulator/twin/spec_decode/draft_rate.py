"""How often vLLM's n-gram proposer drafts on a reply, and how much of it lands.

The calibration's 32-stream speculation cost depends on the draft rows a step carries,
and those depend on how often the proposer finds its suffix earlier in the context: on
agentic "fresh" text it still does wherever a few tokens recur (the system prompt, file
reads, the reply so far). This replays the proposer pass by pass on one (context, reply)
pair, as `predictability.IndexMeter` does, and counts the passes that drafted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simulator.twin.spec_decode.ngram import NgramIndex, NgramSpec, accepted_length


@dataclass(frozen=True, slots=True)
class DraftStats:
    """Decode passes after the prefill's first token, those that drafted, the draft
    tokens proposed and accepted."""

    passes: int = 0
    drafted: int = 0
    draft_tokens: int = 0
    accepted: int = 0

    def __add__(self, o: DraftStats) -> DraftStats:
        return DraftStats(self.passes + o.passes, self.drafted + o.drafted,
                          self.draft_tokens + o.draft_tokens, self.accepted + o.accepted)

    @property
    def hit_rate(self) -> float:
        """Share of decode passes with a draft (vLLM's num_drafts ÷ decode steps)."""
        return self.drafted / self.passes if self.passes else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return (self.passes + self.accepted) / self.passes if self.passes else 1.0


def draft_stats(context: Sequence[int], reply: Sequence[int], spec: NgramSpec) -> DraftStats:
    """The proposer replayed over `reply` after `context` (one sequence, no budget)."""
    if len(reply) < 2:
        return DraftStats()
    tokens = list(context) + list(reply)
    length, total = len(context) + 1, len(tokens)     # the prefill pass samples one
    index = NgramIndex(spec, tokens, length)
    passes = drafted = proposed = accepted = 0
    while length < total:
        start, count = index.propose(length)
        acc = 0
        if count:
            drafted += 1
            proposed += count
            acc = accepted_length(tokens, start, count, length, total - length - 1)
        accepted += acc
        passes += 1
        length += min(acc + 1, total - length)
    return DraftStats(passes, drafted, proposed, accepted)


def total(pairs: Iterable[tuple[Sequence[int], Sequence[int]]], spec: NgramSpec) -> DraftStats:
    out = DraftStats()
    for context, reply in pairs:
        out = out + draft_stats(context, reply, spec)
    return out
