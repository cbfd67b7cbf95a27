"""What a server's "prompt is too long" error says about its context window.

Pure parsing: the agent's forced compaction aims at the limit the server reported, not
the scenario's `context_window_tokens` (262,144 by default), so a server with a smaller
window (vLLM `--max-model-len 32768`) is answered with one compaction that fits instead
of the same request sent again. Units: server tokens unless the name says `_est`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Each pattern captures the limit (and, where the server says it, the prompt size).
_LIMIT_PATTERNS = (
    # vLLM (OpenAI-style): "This model's maximum context length is 32768 tokens. However,
    # you requested 40000 tokens (39000 in the messages, 1000 in the completion)."
    re.compile(r"maximum context length is (\d+)"),
    # vLLM (newer): "... longer than the maximum context length of 32768 tokens"
    re.compile(r"maximum context length of (\d+)"),
    # Anthropic and the twin: "prompt is too long: 210000 tokens > 200000 maximum"
    re.compile(r"too long:\s*\d+\s*tokens?\s*>\s*(\d+)"),
    # llama.cpp: "the request exceeds the available context size (32768 tokens)" and
    # its JSON error fields {"n_prompt_tokens": 40000, "n_ctx": 32768}
    re.compile(r"available context size\s*\(?\s*(\d+)"),
    re.compile(r"\"n_ctx\"\s*:\s*(\d+)"),
    re.compile(r"max_model_len\D{0,20}(\d+)"),
)
_PROMPT_PATTERNS = (
    re.compile(r"prompt is too long:\s*(\d+)\s*tokens?"),
    re.compile(r"\((\d+) in the messages"),
    re.compile(r"\"n_prompt_tokens\"\s*:\s*(\d+)"),
    re.compile(r"your request has (\d+) input tokens"),
)


@dataclass(frozen=True, slots=True)
class Overflow:
    """The server's context limit and (when it said so) the prompt it counted."""

    limit_tokens: int | None
    prompt_tokens: int | None


def parse_overflow(message: str) -> Overflow:
    """Read the limit and prompt size out of an overflow error body (any case)."""
    low = message.lower().replace(",", "")
    return Overflow(_first(_LIMIT_PATTERNS, low), _first(_PROMPT_PATTERNS, low))


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for p in patterns:
        m = p.search(text)
        if m is not None and int(m.group(1)) > 0:
            return int(m.group(1))
    return None


def overflow_target(window_tokens: int, overflow: Overflow, context_tokens_est: int,
                    max_tokens: int, forced: int) -> int:
    """Client-side token estimate the forced compaction must bring the context under.

    Aims at half of the room the server leaves for the prompt (its limit, or the
    scenario's window when the server named none, minus the reply's `max_tokens`),
    converted into the client's estimate units by the server's own count of this prompt
    when it gave one; each further overflow of the same turn halves the target again, so
    the retries converge instead of sending the same request again.
    """
    limit = window_tokens if overflow.limit_tokens is None else min(window_tokens,
                                                                    overflow.limit_tokens)
    room = max(limit - max_tokens, limit // 4)
    target = room * 0.5 ** (forced + 1)
    if overflow.prompt_tokens and context_tokens_est > 0:
        target *= context_tokens_est / overflow.prompt_tokens
    return max(1, int(target))
