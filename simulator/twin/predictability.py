"""How predictable a reply is from its context: the tokens per forward pass that vLLM's
n-gram proposer would give it at a reference setting, speculation on or off.

"Should I turn speculation on?" depends on how much the agent's replies copy their
context; this meter makes that a measured property of every twin run (and of imported
transcripts' real text). It replays what the engine does for one sequence alone (no
batch budget): the prefill pass samples the first token, then each pass proposes from
the context + emitted tokens (`spec_decode.NgramIndex`), accepts the common prefix with
the actual next tokens (`accepted_length`) and emits accepted + 1. With `--spec` equal
to the reference and one stream, it counts the same passes as the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from simulator.twin.spec_decode import NgramIndex, NgramSpec, accepted_length

REFERENCE = NgramSpec(24)            # ngram:24, prompt lookup 5–5 (vLLM's default bounds)
REFERENCE_LABEL = "ngram:24"
MAX_SESSIONS = 8                     # sessions metered per run (bounds CPU and memory)


class ReferenceMeter:
    """Forward passes a reply would take under the reference n-gram proposer.

    Keeps one index per metered session, so a follow-up turn (whose prompt extends the
    earlier prompt + reply) indexes only its new tokens; only the first `max_sessions`
    sessions are metered (`passes` returns None for the others), which bounds what a
    run of thousands of sessions pays for the figure."""

    def __init__(self, spec: NgramSpec = REFERENCE, max_sessions: int = MAX_SESSIONS) -> None:
        self.spec = spec
        self.max_sessions = max_sessions
        self._index: dict[str, NgramIndex] = {}

    def passes(self, prompt: Sequence[int], reply: Sequence[int],
               session: str = "") -> int | None:
        """Forward passes that emit `reply` after `prompt` (0 for an empty reply), or
        None for a session beyond the metered ones."""
        index = self._index.get(session)
        if index is None and len(self._index) >= self.max_sessions:
            return None
        if not reply:
            return 0
        tokens = list(prompt) + list(reply)
        length, total = len(prompt) + 1, len(tokens)   # the prefill pass samples one
        if index is None or not index.adopt(tokens, length):
            index = NgramIndex(self.spec, tokens, length)
        self._index[session] = index
        n = 1
        while length < total:
            start, count = index.propose(length)
            acc = accepted_length(tokens, start, count, length, total - length - 1) \
                if count else 0
            length += min(acc + 1, total - length)
            n += 1
        return n


def tokens_per_pass(pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
                    spec: NgramSpec = REFERENCE) -> float | None:
    """Σ reply tokens / Σ passes over (context, reply) pairs taken in order; None when
    no reply has tokens."""
    meter = ReferenceMeter(spec)
    out = passes = 0
    for context, reply in pairs:
        out += len(reply)
        passes += meter.passes(context, reply) or 0
    return out / passes if passes else None


_CURVE: list[tuple[float, float]] = []
CURVE_FRACTIONS = tuple(i / 10 for i in range(11))
CURVE_SEEDS = 12


def copy_curve() -> list[tuple[float, float]]:
    """(repeat_fraction, reference tokens/pass) of the twin's own code-edit replies
    (textgen: 900-token replies after a fresh 3,000-token code context), computed once;
    the map from a measured predictability back to the twin's knob."""
    if not _CURVE:
        import random

        from simulator import tokens as tok
        from simulator.twin import textgen
        rng = random.Random(11)
        context: list[int] = tok.encoding().encode_ordinary(
            textgen._assemble(rng, 3000, [], 0.0))
        for f in CURVE_FRACTIONS:
            figures = []
            for seed in range(CURVE_SEEDS):
                _, ids = textgen.plan_reply(context, 900, seed=1000 + seed, natural_tokens=900,
                                            code_edit=f > 0, repeat_fraction=f)
                figures.append(tokens_per_pass([(context, ids)]) or 1.0)
            _CURVE.append((f, sum(figures) / len(figures)))
        for i in range(1, len(_CURVE)):               # monotone, for the inverse
            if _CURVE[i][1] < _CURVE[i - 1][1]:
                _CURVE[i] = (_CURVE[i][0], _CURVE[i - 1][1])
    return _CURVE


def repeat_fraction_for(tokens_per_forward_pass: float) -> float:
    """The twin's `repeat_fraction` whose code-edit replies give this reference
    tokens/pass (linear between the curve's points; 0 at or below fresh text, 1 at or
    above the curve's top)."""
    curve = copy_curve()
    if tokens_per_forward_pass <= curve[0][1]:
        return 0.0
    for (f0, t0), (f1, t1) in pairwise(curve):
        if tokens_per_forward_pass <= t1:
            return f0 if t1 <= t0 else f0 + (f1 - f0) * (tokens_per_forward_pass - t0) / (t1 - t0)
    return 1.0
