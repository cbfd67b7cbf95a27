"""How much a transcript's real assistant text copies its context, and the twin knob
that reproduces it.

Each call's visible reply (text blocks and tool-use arguments; thinking is redacted in
the files, so it is not measured) is run through the reference n-gram meter
(`twin.predictability`) against the session's history so far (the user blocks, tool
results and earlier replies, cl100k). Per turn kind (the tool the reply calls, or
`text`) the measured tokens per pass become each replayed call's target
(`tokens_per_pass`): the twin paces its reply to it (`twin.serve.textgen`), whatever
the reply's length. The replay asks for the recorded output, hidden thinking included
(usage counts it, the file does not show it); by default (`match-visible`) the whole
reply runs at the visible text's rate, so the replay's tokens per pass are what the
visible text measures; `fresh` makes the hidden part fresh text (one token a pass):
target L / (visible / v + (L − visible)) for a reply of L tokens.

The open-loop knobs (`repeat_fraction` from the twin's copy curve, `edit_share`) are
still written for each call; a twin that reads the target ignores them. Fitted on the
visible length, a copy share overshoots on a longer reply (a copied run is hundreds of
tokens): 2.2 tokens per pass where the visible text measured 1.35 (issue 37).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

from simulator.importers.claude_code import RawBlock, RawCall, Transcript
from simulator.twin.spec_decode.predictability import (
    REFERENCE_LABEL,
    ReferenceMeter,
    copy_curve_for,
    edit_curve_for,
    edit_share_for,
    repeat_fraction_for,
)
from simulator.util import tokens

HiddenThinking = Literal["match-visible", "fresh", "like-visible"]   # like-visible:
#                                                 the earlier name of match-visible


SAMPLES_PER_KIND = 8          # calls per turn kind the in-context copy curve is run on
SAMPLE_CONTEXT_TOKENS = 8000  # the history tail kept for them (textgen copies from 6,000)


@dataclass(frozen=True, slots=True)
class CallMeasure:
    kind: str             # the tool the reply calls, or "text"
    visible: int          # cl100k tokens of the visible reply
    passes: int           # reference passes for them
    hidden_share: float   # recorded output not visible (thinking), 0..1
    context: tuple[int, ...] | None = None   # history tail: the first calls of a kind
    recorded: int = 0     # recorded output tokens (what the replay asks the twin for)


def _text(b: RawBlock) -> str:
    if b.kind == "tool_use":
        return json.dumps(b.args or {}, separators=(",", ":"))
    return b.text


def _kind(call: RawCall) -> str:
    return next((b.tool for b in call.assistant if b.kind == "tool_use" and b.tool), "text")


def measure(t: Transcript, scale: float = 1.0) -> list[list[CallMeasure]]:
    """Per session, per call: the visible reply's reference passes against its
    history. `scale` is the import's token scale (recorded tokens per cl100k token)."""
    out: list[list[CallMeasure]] = []
    sampled: dict[str, int] = defaultdict(int)
    for s in t.sessions:
        meter = ReferenceMeter(max_sessions=1)
        history: list[int] = []
        rows: list[CallMeasure] = []
        for call in s.calls:
            user = call.user
            if call.compaction is not None:
                history, user = [], call.user[call.compaction[2]:]
                meter = ReferenceMeter(max_sessions=1)
            for b in user:
                history += tokens.encode(_text(b))
            reply: list[int] = []
            for b in call.assistant:
                if b.kind != "thinking":
                    reply += tokens.encode(_text(b))
            passes = meter.passes(history, reply) or 0
            recorded = call.usage["output_tokens"] if call.usage else 0
            shown = len(reply) * scale
            hidden = max(0.0, 1.0 - shown / recorded) if recorded > 0 else 0.0
            kind = _kind(call)
            context = None
            if reply and sampled[kind] < SAMPLES_PER_KIND:
                sampled[kind] += 1
                context = tuple(history[-SAMPLE_CONTEXT_TOKENS:])
            rows.append(CallMeasure(kind, len(reply), passes, hidden, context, recorded))
            history += reply
        out.append(rows)
    return out


def _ratio(rows: list[CallMeasure]) -> float | None:
    passes = sum(r.passes for r in rows)
    return sum(r.visible for r in rows) / passes if passes else None


def by_kind(measures: list[list[CallMeasure]]) -> dict[str, float]:
    """Reference tokens/pass of the visible text per turn kind."""
    groups: dict[str, list[CallMeasure]] = defaultdict(list)
    for rows in measures:
        for r in rows:
            groups[r.kind].append(r)
    return {k: v for k, rows in sorted(groups.items()) if (v := _ratio(rows)) is not None}


def _samples(measures: list[list[CallMeasure]]) -> dict[str, list[tuple[tuple[int, ...], int]]]:
    """Per turn kind, its sampled calls' (history tail, visible length ≥ 16)."""
    samples: dict[str, list[tuple[tuple[int, ...], int]]] = defaultdict(list)
    for rows in measures:
        for r in rows:
            if r.context is not None:
                samples[r.kind].append((r.context, max(r.visible, 16)))
    return dict(sorted(samples.items()))


def targets(measures: list[list[CallMeasure]],
            hidden_thinking: HiddenThinking = "match-visible") -> list[list[float]]:
    """Per session, per call: the reference tokens per pass its replay is paced to. The
    call's kind's visible rate v (≥ 1; 1 for a kind with no visible text), for the whole
    reply by default; with `fresh`, hidden output one token a pass: L / (shown / v +
    L − shown), L the recorded output, shown its visible part (L × (1 − hidden))."""
    rate = by_kind(measures)

    def target(r: CallMeasure) -> float:
        v = max(1.0, rate.get(r.kind, 1.0))
        if hidden_thinking != "fresh" or r.recorded <= 0 or r.hidden_share <= 0:
            return round(v, 4)
        shown = r.recorded * (1.0 - r.hidden_share)
        return round(max(1.0, r.recorded / (shown / v + r.recorded - shown)), 4)
    return [[target(r) for r in rows] for rows in measures]


def copy_knobs(measures: list[list[CallMeasure]],
               hidden_thinking: HiddenThinking = "match-visible"
               ) -> tuple[list[list[float]], list[list[float | None]]]:
    """Per session, per call: the twin's (repeat_fraction, edit_share) that reproduce
    the measured predictability of its kind.

    The fraction comes from the kind's copy curve run on its own sampled calls (their
    history tails and visible lengths): the generic curve, on fresh 3,000-token
    contexts, mapped 3.9 tokens/pass to a share that replayed at 2.5 on 80-line files.
    Hidden thinking is fresh unless told otherwise. A kind that copies beyond the top
    of its copy curve also gets an edit_share: fewer copied lines edited, so longer
    verbatim runs, up to what runs of 20–60 lines allow. The other kinds get None,
    the twin's default."""
    samples = _samples(measures)
    frac: dict[str, float] = {}
    share: dict[str, float] = {}
    for k, v in by_kind(measures).items():
        if k not in samples:
            continue
        curve = copy_curve_for(samples[k])
        frac[k] = repeat_fraction_for(v, curve)
        if v > curve[-1][1]:
            share[k] = round(edit_share_for(v, edit_curve_for(samples[k])), 4)
    fractions = [[round(frac.get(r.kind, 0.0)
                        * (1.0 - r.hidden_share if hidden_thinking == "fresh" else 1.0), 4)
                  for r in rows] for rows in measures]
    return fractions, [[share.get(r.kind) for r in rows] for rows in measures]


def repeat_fractions(measures: list[list[CallMeasure]],
                     hidden_thinking: HiddenThinking = "match-visible") -> list[list[float]]:
    """The repeat_fraction half of `copy_knobs`."""
    return copy_knobs(measures, hidden_thinking)[0]


def summary(measures: list[list[CallMeasure]],
            hidden_thinking: HiddenThinking = "match-visible") -> dict[str, object]:
    """What the import prints: the transcript's measured predictability."""
    flat = [r for rows in measures for r in rows]
    overall = _ratio(flat)
    return {"ngram_reference": REFERENCE_LABEL,
            "ngram_reference_tokens_per_pass": None if overall is None else round(overall, 4),
            "ngram_reference_by_kind": {k: round(v, 4) for k, v in by_kind(measures).items()},
            "hidden_thinking": "match-visible" if hidden_thinking == "like-visible"
            else hidden_thinking,
            "hidden_output_share": round(sum(r.hidden_share for r in flat) / len(flat), 4)
            if flat else None}
