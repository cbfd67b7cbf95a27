"""What n-gram speculation would see, measured by the client for real servers.

A real server reports no per-request forward passes, so the client replays the
reference proposer (`twin.predictability.ReferenceMeter`, ngram:24, lookup 5) over its
own tokens of what it sent and got: the request rendered and tokenised as the twin does
(`twin.prompt`, cl100k, each message's ids cached by identity, so a turn tokenises only
its new messages) and the reply's text and tool calls. The server's tokenizer differs,
so the figure is an estimate: each metered row carries the client's token count of the
reply (`ngram_ref_tokens`) beside the passes, and the summary divides the two (never
the server's output tokens by client passes). It runs once per reply, after the last
token (no per-token work), for the first `MAX_SESSIONS` sessions only, like the
twin's own meter; `benchmarks/ngram_meter.py --client` measures its CPU per request.
"""

from __future__ import annotations

import dataclasses
from array import array

from simulator.endpoints.base import LLMRequest, LLMResponse, ReplyExtra
from simulator.twin.serve.prompt import PromptError, PromptTokenizer, render_reply
from simulator.twin.spec_decode.predictability import MAX_SESSIONS, ReferenceMeter
from simulator.util import tokens

_HISTORY_TOKENS = 4_000_000      # the metered sessions' histories, 16 MB of ids


def prompt_ids(tokenizer: PromptTokenizer, request: LLMRequest) -> array[int]:
    """The request's prompt ids as the twin renders them (PromptError when malformed);
    the prefix and messages are immutable, so their ids are found by identity."""
    def head() -> tuple[object, object]:
        kw = dataclasses.replace(request, messages=()).to_api_kwargs()
        return kw["system"], kw.get("tools")
    return tokenizer.encode_objects(request.prefix, head, request.messages)


class ClientMeter:
    """`ngram_ref_passes` and `ngram_ref_tokens` for a real server's replies."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.meter = ReferenceMeter(max_sessions=max_sessions)
        self.tokenizer = PromptTokenizer(max_tokens=_HISTORY_TOKENS)

    def extra(self, request: LLMRequest, response: LLMResponse) -> ReplyExtra:
        """The two columns for this reply; {} for a session beyond the metered ones, a
        reply the endpoint measured itself, or a request the renderer refuses."""
        if response.extra.get("ngram_ref_passes") is not None \
                or not self.meter.accepts(request.session_id):
            return {}
        try:
            prompt = prompt_ids(self.tokenizer, request)
            text = render_reply([b.to_api() for b in response.content])
        except PromptError:
            return {}
        reply = tokens.encoding().encode_ordinary(text)
        passes = self.meter.passes(prompt, reply, request.session_id)
        return {} if passes is None else {"ngram_ref_passes": passes,
                                          "ngram_ref_tokens": len(reply)}

    def annotate(self, request: LLMRequest, response: LLMResponse) -> LLMResponse:
        """The response with the two columns in its extras (itself when unmetered)."""
        more = self.extra(request, response)
        return dataclasses.replace(response, extra={**response.extra, **more}) if more \
            else response
