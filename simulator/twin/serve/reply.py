"""What the twin replies to a request: shared by the in-process endpoint and the
HTTP server so both give the same reply to the same request.

Both fronts admit a request the same way: `check_window` (refuse a prompt that fills
the context window) and then `plan_for` (hints, the window-capped limit, the planned
reply); each maps `PromptTooLong` to its own error form (HTTP 400 / EndpointError).
"""

from __future__ import annotations

import hashlib
import random
from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from simulator.twin.serve import recall_reply, textgen
from simulator.util import tokens


@dataclass(frozen=True, slots=True)
class PlannedReply:
    token_ids: list[int]
    stop_reason: str          # end_turn | max_tokens
    text: str | None = None   # decode(token_ids) when the plan had it at hand


def reply_seed(seed: int, prompt: Sequence[int], max_tokens: int) -> int:
    """A seed from the request content: same prompt and max_tokens → same reply."""
    data = prompt if isinstance(prompt, array) and prompt.typecode == "I" \
        else array("I", prompt)         # the prompt's uint32 bytes, not copied twice
    h = hashlib.blake2b(data, digest_size=8, key=f"{seed}:{max_tokens}".encode())
    return int.from_bytes(h.digest(), "little")


def parse_hints(headers: Mapping[str, str]) -> tuple[bool, float, int | None]:
    """(code_edit, repeat_fraction, natural output tokens) from `x-endurance-*` hints
    (keys given with or without the `x-endurance-` prefix)."""
    def get(key: str) -> str | None:
        return headers.get(f"x-endurance-{key}", headers.get(key))
    edit = (get("turn-kind") or "").strip().lower() == "edit"
    try:
        frac = min(1.0, max(0.0, float(get("repeat-fraction") or "0.6")))
    except ValueError:
        frac = 0.6
    natural: int | None = None
    raw = get("output-tokens")
    if raw is not None and raw.strip().isdigit():
        natural = max(1, int(raw))
    return edit, frac, natural


def parse_edit_share(headers: Mapping[str, str]) -> float:
    """The `x-endurance-edit-share` hint (share of copied lines edited), textgen's
    default when absent or unreadable."""
    raw = headers.get("x-endurance-edit-share", headers.get("edit-share"))
    try:
        return textgen.EDIT_LINE_PROB if raw is None else min(1.0, max(0.0, float(raw)))
    except ValueError:
        return textgen.EDIT_LINE_PROB


def parse_tokens_per_pass(headers: Mapping[str, str]) -> float | None:
    """The `x-endurance-tokens-per-pass` hint (the reference predictability to pace the
    reply to, ≥ 1), None when absent or unreadable."""
    raw = headers.get("x-endurance-tokens-per-pass", headers.get("tokens-per-pass"))
    try:
        value = None if raw is None else float(raw)
    except ValueError:
        return None
    return min(1000.0, max(1.0, value)) if value is not None and value == value else None


# Planned replies' text and ids, shared by the runs of one process: the probes of a
# `size` or `sweep` search replay the same sessions, whose requests repeat turn by turn
# (only their timing differs), so each reply is planned once a search. `plan_reply` is
# a pure function of its arguments, the prompt read only in its last
# SOURCE_WINDOW_TOKENS and only when the reply copies from it: the key holds every
# other argument as `plan_reply` reads it (code_edit and repeat_fraction as the copy
# share) and that tail as a 128-bit digest (b"" when not read). An LRU bounded by the
# ids held (≈ 8 bytes a token with the text).
PLANNED_TOKENS = 4_000_000
# (seed, limit, natural tokens, copy share, edit share, tokens per pass, tail digest)
_PlanKey = tuple[int, int, int, float, float, float | None, bytes]
_planned: OrderedDict[_PlanKey, tuple[str, array[int]]] = OrderedDict()
_planned_held = [0]                                    # ids in _planned


def _tail_digest(prompt: Sequence[int], copy_share: float,
                 tokens_per_pass: float | None) -> bytes:
    """The digest of the prompt's tail `plan_reply` copies from, b"" when it copies
    nothing (as `plan_reply` decides)."""
    if tokens_per_pass is None and not copy_share > 0:
        return b""
    tail = prompt[-textgen.SOURCE_WINDOW_TOKENS:]
    data = tail if isinstance(tail, array) and tail.typecode == "I" else array("I", tail)
    return hashlib.blake2b(data, digest_size=16).digest()


def _plan_reply(prompt: Sequence[int], limit: int, *, seed: int, natural_tokens: int,
                code_edit: bool, repeat_fraction: float, edit_share: float,
                tokens_per_pass: float | None) -> tuple[str, list[int]]:
    """`textgen.plan_reply`, or the reply a run in this process planned with the same
    arguments (`_planned`): the same text object, a fresh list of its ids."""
    share = textgen.copy_share(code_edit, repeat_fraction)
    key = (seed, limit, natural_tokens, share, edit_share, tokens_per_pass,
           _tail_digest(prompt, share, tokens_per_pass))
    hit = _planned.get(key)
    if hit is not None:
        _planned.move_to_end(key)
        return hit[0], hit[1].tolist()
    text, ids = textgen.plan_reply(prompt, limit, seed=seed, natural_tokens=natural_tokens,
                                   code_edit=code_edit, repeat_fraction=repeat_fraction,
                                   edit_share=edit_share, tokens_per_pass=tokens_per_pass)
    _planned[key] = (text, array("I", ids))
    _planned_held[0] += len(ids)
    while _planned_held[0] > PLANNED_TOKENS and len(_planned) > 1:
        _planned_held[0] -= len(_planned.popitem(last=False)[1][1])
    return text, ids


def plan(prompt: Sequence[int], max_tokens: int, limit: int, *, seed: int, code_edit: bool,
         repeat_fraction: float, natural_tokens: int | None,
         edit_share: float = textgen.EDIT_LINE_PROB,
         tokens_per_pass: float | None = None) -> PlannedReply:
    """Reply tokens for a request; `limit` is max_tokens capped by the context window."""
    rseed = reply_seed(seed, prompt, max_tokens)
    natural = natural_tokens if natural_tokens is not None else \
        textgen.natural_length(random.Random(rseed))
    text, ids = _plan_reply(prompt, limit, seed=rseed, natural_tokens=natural,
                            code_edit=code_edit, repeat_fraction=repeat_fraction,
                            edit_share=edit_share, tokens_per_pass=tokens_per_pass)
    # plan_reply's ids are its text's, no more than `limit` of them
    return PlannedReply(ids, "max_tokens" if natural >= limit else "end_turn", text)


class PromptTooLong(ValueError):
    """The prompt leaves no room for output in the context window."""


def check_window(prompt_tokens: int, context_window: int) -> None:
    """Refuse (PromptTooLong) a prompt of `prompt_tokens` that fills the window (tokens)."""
    if prompt_tokens >= context_window:
        raise PromptTooLong(f"prompt is too long: {prompt_tokens} tokens > "
                            f"{context_window} maximum")


def plan_for(prompt: Sequence[int], max_tokens: int, hints: Mapping[str, str], *,
             context_window: int, seed: int) -> PlannedReply:
    """The reply to an admitted request: `max_tokens` capped by the room left in the
    context window, shaped by the request's `x-endurance-*` hints."""
    edit, frac, natural = parse_hints(hints)
    limit = min(max_tokens, context_window - len(prompt))
    answer = recall_reply.probe_answer(prompt)
    if answer is not None:         # a recall probe: answered from the prompt
        ids = tokens.encode(answer)
        if len(ids) > limit:
            return PlannedReply(ids[:limit], "max_tokens")
        return PlannedReply(ids, "end_turn", answer)
    planned = plan(prompt, max_tokens, limit, seed=seed, code_edit=edit,
                   repeat_fraction=frac, natural_tokens=natural,
                   edit_share=parse_edit_share(hints),
                   tokens_per_pass=parse_tokens_per_pass(hints))
    kind = hints.get("x-endurance-turn-kind", hints.get("turn-kind", ""))
    if kind.strip().lower() == "summary":
        return PlannedReply(recall_reply.summary_ids(prompt, planned.token_ids, limit),
                            planned.stop_reason)
    return planned
