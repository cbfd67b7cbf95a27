"""n-gram speculative decoding (vLLM's "ngram" / prompt-lookup proposer).

Per sequence per step: take the last n tokens (n from `prompt_lookup_max` down to
`prompt_lookup_min`), find an earlier occurrence in the sequence (prompt + generated),
and propose the up to k tokens that followed it. The twin knows what it will emit, so
acceptance is computed from content: the accepted length is the common prefix of the
proposal and the planned next tokens, and the step emits accepted + 1 tokens.

Lookup is an index from n-gram key → earliest end position (vLLM takes the earliest
occurrence of the matched suffix: vLLM's v1/spec_decode/ngram_proposer.py; its KMP scan over the reversed
context keeps the last, i.e. earliest, position of an equally long match), built once
per sequence (vectorised) and extended one position per emitted token: a key already
indexed keeps its position. Two n are indexed, the longest and the shortest: a
longest-n hit is exactly what vLLM proposes (longest match); below that the earliest
shortest-n occurrence is used (vLLM would prefer the longest match of intermediate
length: a small, documented approximation that keeps the index cheap).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

BULK_MIN = 64        # positions from which indexing is vectorised


@dataclass(frozen=True, slots=True)
class NgramSpec:
    """Settings of the n-gram proposer (vLLM: num_speculative_tokens,
    prompt_lookup_min, prompt_lookup_max)."""

    num_speculative_tokens: int
    prompt_lookup_min: int = 5      # vLLM: both bounds 5 when neither is given
    prompt_lookup_max: int = 5
    max_batch_size: int | None = None   # the batch gate (`parse_spec`); None: always on

    def __post_init__(self) -> None:
        if self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        _check_gate(self.max_batch_size)
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
            raise ValueError("need 1 <= prompt_lookup_min <= prompt_lookup_max")


@dataclass(frozen=True, slots=True)
class ModelDraftSpec:
    """A drafter that is a model (vLLM `draft_model`, EAGLE-style `mtp`): it always
    proposes k tokens; the twin draws how many the target accepts from the profile's
    acceptance curve (conditional probability per position), seeded per request and
    position so a run is reproducible. Emitted text is the planned text either way."""

    kind: str                                  # "draft" | "mtp"
    num_speculative_tokens: int
    acceptance: tuple[float, ...] = ()         # P(accept position i | accepted i−1)
    max_batch_size: int | None = None          # the batch gate (`parse_spec`)

    def __post_init__(self) -> None:
        if self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        _check_gate(self.max_batch_size)
        if self.kind not in ("draft", "mtp"):
            raise ValueError(f"unknown drafter kind {self.kind!r}")

    def p_accept(self, pos: int) -> float:
        """Conditional acceptance of draft position `pos` (0-based); the curve's last
        value continues past its end."""
        if not self.acceptance:
            return 0.0
        return self.acceptance[min(pos, len(self.acceptance) - 1)]

    def accepted(self, rid: str, position: int, count: int) -> int:
        """Accepted draft tokens for request `rid` at sequence position `position`
        (deterministic: a hash of both seeds each draw)."""
        acc = 0
        seed = zlib.crc32(f"{rid}:{position}".encode())
        while acc < count:
            seed = (seed * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
            if (seed >> 11) / 2.0**53 >= self.p_accept(acc):
                break
            acc += 1
        return acc


Spec = NgramSpec | ModelDraftSpec
# vLLM's rejection sampler takes at most 32 draft tokens per request (vLLM's v1/sample/rejection_sampler.py,
# `vllm/v1/sample/rejection_sampler.py`); a larger K is refused rather than simulated
MAX_SPEC_TOKENS = 32
MAX_GATE = 1 << 16          # the batch gate's bound: vLLM's max_num_seqs bound here
SPEC_FORMS = (f"off, ngram:K, draft:K or mtp:K (1 <= K <= {MAX_SPEC_TOKENS}), each "
              f"optionally @N: drafting only while the batch holds at most N requests")


def _check_gate(n: int | None) -> None:
    if n is not None and not 1 <= n <= MAX_GATE:
        raise ValueError(f"the batch gate must be within 1 … {MAX_GATE}, got {n}")


def parse_spec(text: str | None) -> Spec | None:
    """`off` (or empty) → None; `ngram:K` → NgramSpec(K); `draft:K` / `mtp:K` →
    ModelDraftSpec without a curve (the perf model fills it from the model profile).

    `…@N` gates speculation by batch size: the proposer runs in a step only while the
    running batch holds at most N requests; above, every request decodes one token with
    no draft and no proposer work. It is what vLLM V1's dynamic speculative decoding
    expresses as `num_speculative_tokens_per_batch_size: [[1, N, K], [N+1, max, 0]]`
    (`vllm/v1/spec_decode/dynamic/utils.py`: K 0 for a batch-size range turns drafting
    off), vLLM V0's `speculative_disable_by_batch_size` did (PR 4592) and SGLang's
    n-gram fallback to plain decoding above a batch-size threshold (PR 13376).
    Raises ValueError otherwise, and for K above MAX_SPEC_TOKENS."""
    if text is None or text.strip().lower() in ("", "off", "none"):
        return None
    body, at, gate = text.strip().lower().partition("@")
    kind, _, k = body.partition(":")
    if (kind not in ("ngram", "draft", "mtp") or not (k.isascii() and k.isdigit())
            or not 1 <= int(k) <= MAX_SPEC_TOKENS
            or (at and not (gate.isascii() and gate.isdigit()
                            and 1 <= int(gate) <= MAX_GATE))):
        raise ValueError(f"speculative decoding must be one of {SPEC_FORMS}; "
                         f"got {text!r} (vLLM drafts at most {MAX_SPEC_TOKENS} tokens "
                         f"per request; the gate N is within 1 … {MAX_GATE})")
    n = int(gate) if at else None
    if kind == "ngram":
        return NgramSpec(int(k), max_batch_size=n)
    return ModelDraftSpec(kind, int(k), max_batch_size=n)


def drafting_slots(spec: Spec | None) -> int:
    """Budget slots a scheduled request takes beyond its scheduled tokens (vLLM
    `SpeculativeConfig.max_num_new_slots_for_drafting`, config/speculative.py): 0 for
    n-gram and MTP (the drafts are already part of the request's tokens), 1 for a
    sequential draft model (its extra drafter query). The scheduler charges
    `num_new_tokens + slots` to `max_num_batched_tokens` per request it schedules."""
    if isinstance(spec, ModelDraftSpec) and spec.kind == "draft":
        return 1
    return 0


def _key(tokens: Sequence[int], end: int, n: int) -> int:
    """Key of the n-gram tokens[end−n:end] (same as `_bulk_keys`)."""
    return hash(tuple(tokens[end - n:end]))


def _bulk_keys(arr: Sequence[int], n: int) -> list[int]:
    """Keys of every n-gram of `arr`, in order (key i covers arr[i:i+n]); C-speed."""
    return list(map(hash, zip(*(arr[d:] for d in range(n)), strict=False)))


class NgramIndex:
    """Per-sequence proposer state over the sequence's token list.

    `tokens` may extend beyond the known part (the twin stores prompt + planned
    output); only `tokens[:length]` is ever indexed or proposed from.
    """

    __slots__ = ("_idx_hi", "_idx_lo", "_upto", "k", "n_hi", "n_lo", "tokens")

    def __init__(self, spec: NgramSpec, tokens: Sequence[int], length: int) -> None:
        self.k = spec.num_speculative_tokens
        self.n_lo = spec.prompt_lookup_min
        self.n_hi = spec.prompt_lookup_max
        self.tokens = tokens
        # index n-grams ending at positions ≤ length − 1 (the current suffix excluded)
        upto = max(length - 1, 0)
        arr = tokens[:upto]
        self._idx_lo = self._build(arr, self.n_lo)
        self._idx_hi = self._build(arr, self.n_hi) if self.n_hi != self.n_lo else self._idx_lo
        self._upto = upto     # n-grams ending at positions ≤ _upto are indexed

    @staticmethod
    def _build(arr: Sequence[int], n: int) -> dict[int, int]:
        keys = _bulk_keys(arr, n)
        # reversed: a repeated key keeps its first (earliest) end position
        return dict(zip(reversed(keys), range(n + len(keys) - 1, n - 1, -1), strict=True))

    def adopt(self, tokens: Sequence[int], length: int) -> bool:
        """Take this index over for another sequence of `length` known tokens that
        starts with every token indexed here (a follow-up turn); False if it does not."""
        m = self._upto
        if m > length - 1 or tokens[:m] != self.tokens[:m]:
            return False
        self.tokens = tokens
        return True

    def _advance(self, length: int) -> None:
        """Index the n-grams ending at positions _upto+1 .. length−1."""
        if length - 1 - self._upto > BULK_MIN:
            self._advance_bulk(length)
            return
        toks, lo, hi = self.tokens, self._idx_lo, self._idx_hi
        n_lo, n_hi = self.n_lo, self.n_hi
        for end in range(self._upto + 1, length):
            if end >= n_lo:
                lo.setdefault(_key(toks, end, n_lo), end)
            if hi is not lo and end >= n_hi:
                hi.setdefault(_key(toks, end, n_hi), end)
        self._upto = max(self._upto, length - 1)

    def _advance_bulk(self, length: int) -> None:
        pairs = [(self.n_lo, self._idx_lo)]
        if self._idx_hi is not self._idx_lo:
            pairs.append((self.n_hi, self._idx_hi))
        for n, idx in pairs:
            s0 = max(self._upto + 1 - n, 0)
            arr = self.tokens[s0:length - 1]
            keys = _bulk_keys(arr, n)
            new = dict(zip(reversed(keys), range(s0 + n + len(keys) - 1, s0 + n - 1, -1),
                           strict=True))
            # positions already indexed are earlier: only keys not seen yet are added
            idx.update({key: new[key] for key in new.keys() - idx.keys()})
        self._upto = length - 1

    def propose(self, length: int) -> tuple[int, int]:
        """Draft for a sequence of `length` known tokens: (start, count) meaning
        tokens[start:start+count]; count 0 when nothing matches."""
        if length - 1 > self._upto:
            self._advance(length)
        toks = self.tokens
        if length >= self.n_hi:
            end = self._idx_hi.get(_key(toks, length, self.n_hi))
            if end is not None:
                return end, min(self.k, length - end)
        if length >= self.n_lo and self._idx_hi is not self._idx_lo:
            end = self._idx_lo.get(_key(toks, length, self.n_lo))
            if end is not None:
                return end, min(self.k, length - end)
        return 0, 0


def accepted_length(tokens: Sequence[int], start: int, count: int, length: int,
                    limit: int) -> int:
    """Common prefix of the draft tokens[start:start+count] and the actual next tokens
    tokens[length:], at most `limit` (planned tokens left after the bonus token)."""
    n = min(count, limit)
    i = 0
    while i < n and tokens[start + i] == tokens[length + i]:
        i += 1
    return i
