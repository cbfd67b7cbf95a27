"""Recall probes as side requests: the context a turn was sent plus one question.

A probe repeats the turn's request (same prefix and messages, so it rides the prefix
cache) with a question appended to its last user message; the reply is recorded in
a `request_kind = probe` row and never enters the history, so later turns send
exactly what they would without probes. One attempt, no retry: a failed probe is a
row with `ok = false` and no verdict. The agent calls `after_turn` once per turn.
"""

from __future__ import annotations

import asyncio

from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest, LLMResponse
from simulator.protocol import facts as fx
from simulator.records.rows import TurnRecord, derive_rates
from simulator.session import recall
from simulator.session.compaction import summary_request_messages
from simulator.session.context import RunContext
from simulator.session.conversation import Conversation, Message, Prefix
from simulator.util.redact import redact_text

REPLY_CHARS = 200       # the reply is kept in the row up to this many characters


class Prober:
    """One session's facts and probes."""

    def __init__(self, ctx: RunContext, session_id: str, index: int, prefix: Prefix) -> None:
        spec = ctx.scenario.probes
        assert spec is not None
        self.ctx, self.spec, self.session_id, self.prefix = ctx, spec, session_id, prefix
        self.book = recall.FactBook(recall.plan_facts(
            spec, ctx.scenario.seed, session_id, index, ctx.scenario.turns))

    def note_turn(self, turn: int, compacted: bool) -> None:
        """Every turn, sent or replayed on resume: the compactions facts cross."""
        if compacted:
            self.book.compaction_turns.append(turn)

    async def after_turn(self, turn: int, sent: tuple[Message, ...], compacted: bool) -> None:
        """Probe turn `turn`'s context `sent` when the spec asks for it."""
        reason = recall.probe_reasons(self.spec, turn, self.ctx.scenario.turns - 1, compacted)
        if reason is None or not sent:
            return
        for fact, planted in self.book.askable(turn):
            if self.ctx.stop.is_set():
                return
            await self._ask(turn, sent, fact, planted, reason)

    async def _ask(self, turn: int, sent: tuple[Message, ...], fact: fx.Fact, planted: int,
                   reason: str) -> None:
        messages = probe_messages(sent, fact)
        req = LLMRequest(self.ctx.scenario.model, self.prefix, messages, self.spec.max_tokens,
                         self.spec.temperature, self.session_id,
                         {"turn-kind": "probe", "output-tokens": str(self.spec.max_tokens)})
        ctx_tokens = self.prefix.tokens_est + sum(m.tokens_est for m in messages)
        shared = self.prefix.tokens_est + sum(m.tokens_est for m in sent)
        base = dict(
            run_id=self.ctx.run_id, session_id=self.session_id, turn_index=turn,
            request_kind="probe", attempt=1, context_tokens_est=ctx_tokens,
            reusable_prefix_tokens=min(shared, ctx_tokens), max_tokens=self.spec.max_tokens,
            turn_kind="probe", think_time_s=0.0,
            fact_id=fact.fact_id, fact_kind=fact.kind, fact_turn=planted,
            fact_age_turns=turn - planted,
            fact_compactions_crossed=self.book.crossed(fact, planted, turn),
            fact_retained=recall.retention(fact, sent), probe_reason=reason,
            probe_expected=fact.value)
        async with self.ctx.limiter:
            wall, t_sent = self.ctx.clock.wall(), self.ctx.clock.monotonic()
            try:
                resp = await self.ctx.endpoint.send(req)
            except EndpointError as exc:
                self._failed(base, wall, t_sent, exc)
                return
            except asyncio.CancelledError:
                self._failed(base, wall, t_sent, EndpointError(
                    ErrorType.CANCELLED, "cancelled while in flight (stop or deadline)"))
                raise
        self._answered(base, wall, t_sent, resp, fact)

    def _answered(self, base: dict[str, object], wall: float, t_sent: float,
                  r: LLMResponse, fact: fx.Fact) -> None:
        t = r.timing
        n_out = r.usage.output_tokens if r.usage.output_tokens is not None else r.output_tokens_est
        ttft, decode, turn_rate, e2e = derive_rates(n_out, t.sent, t.first_token, t.last_token)
        if e2e is None and t.done is not None:
            e2e = t.done - t.sent
        text = r.text
        self.ctx.recorder.write(TurnRecord(
            **base, started_at=wall, started_mono_s=t_sent - self.ctx.t0,  # type: ignore[arg-type]
            input_tokens=r.usage.input_tokens, cache_read_tokens=r.usage.cache_read_input_tokens,
            cache_creation_tokens=r.usage.cache_creation_input_tokens,
            prompt_tokens=r.usage.prompt_tokens, output_tokens=n_out,
            output_tokens_est=r.output_tokens_est, ttft_s=ttft, decode_tok_s=decode,
            turn_tok_s=turn_rate, e2e_s=e2e, stop_reason=r.stop_reason, http_status=r.status,
            probe_reply=redact_text(text)[:REPLY_CHARS],
            probe_correct=fx.is_correct(text, fact.value)))

    def _failed(self, base: dict[str, object], wall: float, t_sent: float,
                exc: EndpointError) -> None:
        self.ctx.recorder.write(TurnRecord(
            **base, started_at=wall, started_mono_s=t_sent - self.ctx.t0,  # type: ignore[arg-type]
            ok=False, error_type=exc.error_type.value,
            error_message=redact_text(str(exc))[:300], http_status=exc.status,
            e2e_s=self.ctx.clock.monotonic() - t_sent))


def probe_messages(sent: tuple[Message, ...], fact: fx.Fact) -> tuple[Message, ...]:
    """The probe's messages: the turn's context with the question appended to its last
    user message (the same shape as a summary request, so the cached prefix is shared)."""
    return summary_request_messages(Conversation(sent), fx.question(fact.kind, fact.key))
