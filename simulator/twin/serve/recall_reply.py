"""The twin's replies that depend on what the prompt says: probe answers and summaries.

A probe question at the end of a prompt is answered from the prompt itself, with the
grammar facts are written in (`simulator.protocol.facts`): the value its key's statement gives,
or "I don't know." — so on the twin a probe is right exactly when the fact's statement
is in the prompt it was sent (recall = retention, by construction; simulated). A
summary request's reply starts with the statements the twin's summaries keep (what the
user asked to be remembered and the decisions stated; not values seen only in tool
results, nor edited files' paths), then the usual synthetic text, cut to the same length.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.protocol import facts
from simulator.util import tokens

TAIL_TOKENS = 96          # a probe question ends the prompt: only this much is read first
SUMMARY_LEAD = "Facts to keep:\n"


def probe_answer(prompt: Sequence[int]) -> str | None:
    """The answer to the probe question that ends `prompt` (token ids), or None when
    the prompt does not end with one."""
    tail = tokens.decode(list(prompt[-TAIL_TOKENS:]))
    if facts.QUESTION_MARK not in tail:
        return None
    return facts.answer_from(tokens.decode(list(prompt)))


def summary_ids(prompt: Sequence[int], planned: list[int], limit: int) -> list[int]:
    """A summary reply's token ids: the kept statements first, then `planned`, cut to
    the planned length (never over `limit`): the timing is the summary's as before."""
    keeps = facts.summary_keeps(tokens.decode(list(prompt)))
    if not keeps:
        return planned
    text = SUMMARY_LEAD + "\n".join(keeps) + "\n" + tokens.decode(planned)
    return tokens.encode(text)[:min(limit, len(planned))]
