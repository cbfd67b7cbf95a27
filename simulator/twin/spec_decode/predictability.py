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

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np

from simulator.twin.serve import textgen
from simulator.twin.spec_decode.ngram import NgramIndex, NgramSpec, accepted_length
from simulator.util import tokens as tok

REFERENCE = NgramSpec(24)            # ngram:24, prompt lookup 5–5 (vLLM's default bounds)
REFERENCE_LABEL = "ngram:24"
MAX_SESSIONS = 8                     # sessions metered per run (bounds CPU and memory)


_MIX = np.uint64(0x9E3779B97F4A7C15)   # odd 64-bit multiplier of the n-gram key


def _keys(window: np.ndarray, n: int) -> list[int]:
    """A 64-bit key of every n-gram of `window`, in order (key i covers window[i:i+n]):
    a polynomial in the token ids modulo 2^64, so two n-grams share a key only by a
    collision (about 2^-64 a pair, as likely as the engine's tuple-hash index's)."""
    count = len(window) - n + 1
    if count <= 0:
        return []
    w = window.astype(np.uint64)
    h = w[:count].copy()
    for d in range(1, n):
        h *= _MIX
        h += w[d:d + count]
    out: list[int] = h.tolist()
    return out


class _Session:
    """One metered session's known tokens and its first-occurrence n-gram index."""

    __slots__ = ("first", "keys", "tokens", "upto")

    def __init__(self) -> None:
        self.tokens: array[int] = array("I")
        self.first: dict[int, int] = {}   # n-gram key → its earliest end position
        self.keys: array[int] = array("Q")  # the key ending at n + i, for i < len
        self.upto = 0                     # n-grams ending at positions ≤ upto are indexed


def _common(st: _Session, view: np.ndarray, p: int, n: int) -> int:
    """Keep the session's index for the n-grams inside the prefix the new sequence
    shares with the last one (a follow-up turn: all of it; a client whose rendering
    of the reply differs from the reply's tokens, or a compaction: part of it), drop
    the others; returns the position up to which the index stands."""
    m = min(st.upto, p)
    if m:
        diff = np.flatnonzero(np.frombuffer(st.tokens, dtype=np.uint32)[:m] != view[:m])
        if diff.size:
            m = int(diff[0])
    if m < st.upto:
        if m < st.upto // 2:                      # most of it changed: index afresh
            st.first, st.keys, m = {}, array("Q"), 0
        else:                                     # forget the n-grams ending after m
            cut = max(m + 1 - n, 0)
            first = st.first
            for e, key in enumerate(st.keys[cut:], cut + n):
                if first.get(key) == e:
                    del first[key]
            del st.keys[cut:]
    st.upto = m
    return m


class ReferenceMeter:
    """Forward passes a reply would take under the reference n-gram proposer.

    Counts what `IndexMeter` (the engine's own `NgramIndex`, replayed token by token)
    counts, at a fraction of its CPU: the n-grams of the new tokens are indexed in
    bulk (C-speed `map`/`dict`), since the draft at position L exists exactly when the
    suffix's n-gram first ended before L; the fresh stretches between drafts then
    cost one pass per token without a Python step each. One index per metered session,
    so a follow-up turn (whose prompt extends the earlier prompt + reply) indexes only
    its new tokens; only the first `max_sessions` sessions are metered (`passes`
    returns None for the others), which bounds what a run of thousands of sessions
    pays for the figure. Token ids must fit 32 bits (tiktoken's do)."""

    def __init__(self, spec: NgramSpec = REFERENCE, max_sessions: int = MAX_SESSIONS) -> None:
        if spec.prompt_lookup_min != spec.prompt_lookup_max:
            raise ValueError("the reference meter looks up one n-gram size (min = max)")
        self.spec = spec
        self.max_sessions = max_sessions
        self._sessions: dict[str, _Session] = {}

    def accepts(self, session: str) -> bool:
        """Whether `passes` meters this session (metered already, or room for it)."""
        return session in self._sessions or len(self._sessions) < self.max_sessions

    def passes(self, prompt: Sequence[int], reply: Sequence[int],
               session: str = "", known: int | None = None) -> int | None:
        """Forward passes that emit `reply` after `prompt` (0 for an empty reply), or
        None for a session beyond the metered ones. `known`: the count an earlier
        meter made of this very prompt and reply (it is theirs alone), returned as it
        is for a metered session; the session's index catches up at its next count."""
        st = self._sessions.get(session)
        if st is None:
            if len(self._sessions) >= self.max_sessions:
                return None
            st = self._sessions[session] = _Session()
        if not reply:
            return 0
        if known is not None:
            return known
        n, k = self.spec.prompt_lookup_min, self.spec.num_speculative_tokens
        p = len(prompt)
        toks = array("I", prompt)
        toks.extend(reply)
        t = len(toks)
        view = np.frombuffer(toks, dtype=np.uint32)
        m = _common(st, view, p, n)
        st.tokens = toks
        # the n-grams ending at s0+n .. t−1, in order, indexed by first occurrence
        s0 = max(m + 1 - n, 0)
        keys = _keys(view[s0:t - 1], n)
        first = st.first
        deque(map(first.setdefault, keys, range(s0 + n, s0 + n + len(keys))), maxlen=0)
        st.keys.extend(keys)
        st.upto = t - 1
        # positions base .. t−1 whose suffix n-gram ended earlier: where a draft exists
        base = p + 1
        lo = base - (s0 + n)
        # (a prompt shorter than n − 1 tokens: no draft before position n)
        firsts = list(map(first.__getitem__, keys[lo:])) if lo >= 0 else \
            [*range(base, min(n, t)), *map(first.__getitem__, keys)]
        drafts = (np.flatnonzero(np.array(firsts, dtype=np.int64)
                                 < np.arange(base, t, dtype=np.int64)) + base).tolist()
        passes, length = 1, base                    # the prefill pass samples one
        j, nd = 0, len(drafts)
        while length < t:
            j = bisect_left(drafts, length, j)
            if j == nd:                             # fresh to the end: a token a pass
                passes += t - length
                break
            at = drafts[j]
            passes += at - length                   # fresh up to the draft
            e = firsts[at - base]
            count = min(k, at - e, t - at - 1)
            acc = 0
            while acc < count and toks[e + acc] == toks[at + acc]:
                acc += 1
            length = at + min(acc + 1, t - at)
            passes += 1
        return passes


class IndexMeter:
    """The same count by replaying the engine's proposer (`spec_decode.NgramIndex`)
    pass by pass: the oracle `ReferenceMeter` is tested against, and the benchmark's
    before (`benchmarks/ngram_meter.py`)."""

    def __init__(self, spec: NgramSpec = REFERENCE, max_sessions: int = MAX_SESSIONS) -> None:
        self.spec = spec
        self.max_sessions = max_sessions
        self._index: dict[str, NgramIndex] = {}

    def passes(self, prompt: Sequence[int], reply: Sequence[int],
               session: str = "") -> int | None:
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
CONTEXT_FRACTIONS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)   # denser where transcripts sit


def copy_curve() -> list[tuple[float, float]]:
    """(repeat_fraction, reference tokens/pass) of the twin's own code-edit replies
    (textgen: 900-token replies after a fresh 3,000-token code context), computed once;
    the map from a measured predictability back to the twin's knob."""
    if not _CURVE:
        import random

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


Curve = list[tuple[float, float]]      # (knob value, reference tokens/pass), monotone


def _curve_in(samples: Sequence[tuple[Sequence[int], int]], knobs: Sequence[float],
              reply: Callable[[Sequence[int], int, int, float], list[int]],
              seeds: int) -> Curve:
    """(knob, Σ reply tokens / Σ passes) of `reply(context, n, seed, knob)` over the
    samples, `seeds` replies each; each figure at least the previous (for the inverse)."""
    curve: Curve = []
    for knob in knobs:
        out = passes = 0
        for i, (context, n) in enumerate(samples):
            for s in range(seeds):
                ids = reply(context, n, 1000 + 97 * i + s, knob)
                out += len(ids)
                passes += ReferenceMeter(max_sessions=1).passes(context, ids) or 0
        figure = out / passes if passes else 1.0
        curve.append((knob, max(figure, curve[-1][1]) if curve else figure))
    return curve


def copy_curve_for(samples: Sequence[tuple[Sequence[int], int]], seeds: int = 1) -> Curve:
    """(repeat_fraction, tokens/pass) of the twin's code-edit replies of the given
    lengths after the given contexts: the copy curve in a transcript's own contexts,
    whose line shapes and lengths change how a copy share turns into tokens per pass."""

    def reply(context: Sequence[int], n: int, seed: int, f: float) -> list[int]:
        return textgen.plan_reply(context, n, seed=seed, natural_tokens=n, code_edit=f > 0,
                                  repeat_fraction=f)[1]
    return _curve_in(samples, CONTEXT_FRACTIONS, reply, seeds)


EDIT_SHARES = (0.08, 0.04, 0.02, 0.01, 0.0)   # textgen's default first, then fewer edits


def edit_curve_for(samples: Sequence[tuple[Sequence[int], int]], seeds: int = 1) -> Curve:
    """(edit_share, tokens/pass) of the twin's replies that copy all they can
    (repeat_fraction 1) with fewer and fewer copied lines edited, after the given
    contexts: for a transcript that copies beyond the copy curve's top."""

    def reply(context: Sequence[int], n: int, seed: int, e: float) -> list[int]:
        return textgen.plan_reply(context, n, seed=seed, natural_tokens=n, code_edit=True,
                                  repeat_fraction=1.0, edit_share=e)[1]
    return _curve_in(samples, EDIT_SHARES, reply, seeds)


def _invert(curve: Sequence[tuple[float, float]], tokens_per_forward_pass: float) -> float:
    """The knob whose figure is this on `curve` (linear between its points; the first
    knob at or below its first figure, the last at or above its top)."""
    if tokens_per_forward_pass <= curve[0][1]:
        return curve[0][0]
    for (k0, t0), (k1, t1) in pairwise(curve):
        if tokens_per_forward_pass <= t1:
            return k0 if t1 <= t0 else k0 + (k1 - k0) * (tokens_per_forward_pass - t0) / (t1 - t0)
    return curve[-1][0]


def edit_share_for(tokens_per_forward_pass: float, curve: Sequence[tuple[float, float]]) -> float:
    """The edit_share whose all-copy replies give this tokens/pass on `curve` (the
    default at or below its first point, 0 at or above its top)."""
    return _invert(curve, tokens_per_forward_pass)


def repeat_fraction_for(tokens_per_forward_pass: float,
                        curve: Sequence[tuple[float, float]] | None = None) -> float:
    """The twin's `repeat_fraction` whose code-edit replies give this reference
    tokens/pass on `curve` (default: `copy_curve()`, the twin's own code-edit turns;
    linear between the curve's points; 0 at or below fresh text, 1 at or above the
    curve's top)."""
    return _invert(curve or copy_curve(), tokens_per_forward_pass)
