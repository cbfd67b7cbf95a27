"""One synthetic coding agent: its turn loop, its retries and its records.

Each turn: build the next user message (first task, a new prompt after think time,
or the result of the tool the assistant called, after the tool's latency), apply the
compaction policy, send the request (retrying as the scenario says, every attempt
recorded), and append the reply to the history — the server's reply verbatim in
`live` mode, the scripted text in `scripted` mode — plus the scripted tool call.

Every random draw comes from a generator seeded by (seed, session, turn) and one
purpose (content, tool arguments, scripted reply text, back-off jitter per attempt), so
two runs of the same scenario and seed see the same turns whatever the server replies
and however many retries it forced: runs pair up turn by turn, and an interrupted run
resumes exactly.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from simulator.endpoints.base import EndpointError, ErrorType, LLMRequest, LLMResponse, Timing, Usage
from simulator.protocol.facts import edit_input
from simulator.protocol.messages import TOOL_USE_OVERHEAD_TOKENS
from simulator.records.rows import (
    TurnRecord,
    derive_rates,
    pd_columns,
    spec_columns,
    tier_columns,
)
from simulator.scenario import content
from simulator.scenario.model import RetryPolicy, Scenario, SummarizeCompaction, TurnTemplate
from simulator.session import compaction as comp
from simulator.session import recall
from simulator.session.context import (
    FatalEndpointError,
    RunContext,
    SessionFailed,
    SessionStopped,
)
from simulator.session.conversation import (
    Block,
    Conversation,
    Message,
    Prefix,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from simulator.session.overflow import overflow_target, parse_overflow
from simulator.session.prefix import with_nonce
from simulator.session.probing import Prober
from simulator.session.resume import ReplayKey, StoredReply, reply_row
from simulator.util import tokens
from simulator.util.ids import session_id
from simulator.util.numbers import is_number
from simulator.util.redact import redact_text

# Errors after which no retry can help and the whole run should stop.
FATAL_ERRORS = frozenset({ErrorType.AUTH, ErrorType.NOT_FOUND})


def backoff_delay(policy: RetryPolicy, attempt: int, u: float,
                  retry_after_s: float | None = None) -> float:
    """Pure: seconds to wait after failed attempt `attempt` (1-based) — backoff_s doubling
    per attempt, capped at backoff_max_s, times 1 ± jitter (`u` uniform in [0, 1)), and at
    least the server's retry-after."""
    delay = min(policy.backoff_max_s, policy.backoff_s * 2.0 ** min(attempt - 1, 64))
    delay *= 1 + policy.jitter * (2 * u - 1)
    if retry_after_s is not None:
        delay = max(delay, retry_after_s)
    return delay


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of one request: what its journal row says besides the outcome."""

    turn: int
    kind: str                        # turn | summary
    number: int                      # 1-based, continuing across resumes
    ctx_tokens: int
    reusable: int
    max_tokens: int
    event: comp.CompactionEvent | None
    template: TurnTemplate | None
    think_s: float
    lag_s: float | None = None       # sent − planned start (coordinated omission)


class ReplaySource:
    """Resume: the replies an earlier part of the run already received, handed out once
    each instead of sending the request again."""

    def __init__(self, stored: dict[ReplayKey, StoredReply]) -> None:
        self._stored = dict(stored)

    def __contains__(self, key: ReplayKey) -> bool:
        return key in self._stored

    def take(self, turn: int, kind: str) -> StoredReply | None:
        return self._stored.pop((turn, kind), None)


@dataclass(frozen=True)
class _Pending:
    """The tool call the previous reply ended with."""

    template: TurnTemplate
    tool_use_id: str
    last_read: str = ""


# Warm start's synthesised histories, shared by the runs of one process: session i's
# history depends on the scenario (its seed included), the session's prefix and its
# start turn, never on how many sessions run, so the probes of a `size` or `sweep`
# search run in this process synthesise each session once. Conversations, messages and
# `_Pending` are immutable. An LRU of WARM_HISTORIES sessions (≈ 0.2–0.5 MB each at
# 30–45k tokens of history).
WARM_HISTORIES = 256
_WarmKey = tuple[str, str, int, str, str, int]
_warm: OrderedDict[_WarmKey, tuple[Conversation, _Pending | None, str]] = OrderedDict()
_scenario_json: list[tuple[Scenario, str]] = []        # the last scenario's, once


# Live turns' draws, shared by the runs of one process like `_warm`: a turn's user
# message, wait, template and output size come from the (seed, session, turn) generator
# and, for a tool result, from the tool call the previous reply ended with (its
# template and id), never from timing or the server's replies, so session i's turn t
# is drawn once for a whole search (the probes of `size` replay the same sessions at
# other counts). The same Message object comes back: the prompt builder finds its ids
# by identity (`PromptTokenizer`). Not with probes (planted facts), nor on resume. An
# LRU bounded by the messages' estimated tokens (their text is shared with the
# tokenizer's caches while those hold it): a 10-minute probe of 256 sessions draws
# ≈ 10M tokens of user and tool text, and an LRU smaller than a probe misses all of
# the next one (it evicts the early turns that probe asks for first). At 16M the fleet
# search took 280 CPU-s against 325 at 4M, its peak RSS the same (1.6 GB).
LIVE_DRAW_TOKENS = 16_000_000
# (scenario, session, turn, pending template's index or -1, pending tool_use_id or "")
_DrawKey = tuple[str, str, int, int, str]


@dataclass(frozen=True, slots=True)
class _Draw:
    """What a live turn draws before its request, and its `last_read` (None: kept)."""

    message: Message
    wait_s: float
    template_index: int
    max_tokens: int
    last_read: str | None


_draws: OrderedDict[_DrawKey, _Draw] = OrderedDict()
_draws_held = [0]                                        # tokens_est in _draws

# Live turns' replies as history, shared the same way: what `_append_reply` appends
# (and the tool call it leaves pending) follows from the reply's content, the turn's
# template, the (seed, session, turn) generator and, for an edit's input, the start of
# `last_read`; the twin replies alike to the same request in every run, so the same
# assistant Message objects come back and the prompt builder finds their ids by
# identity. Keyed by value (the content's blocks), so any endpoint is safe; only with
# live history, not with probes nor on resume. An LRU bounded like `_draws`.
LIVE_REPLY_TOKENS = 4_000_000
# (scenario, session, turn, template's index, reply content, the edit's `last_read` start)
_ReplyKey = tuple[str, str, int, int, tuple[Block, ...], str]
# the messages appended, and the pending tool call's id (None: nothing pending)
_replies: OrderedDict[_ReplyKey, tuple[tuple[Message, ...], str | None]] = OrderedDict()
_replies_held = [0]                                      # tokens_est in _replies


# What no session reads: runs that differ only here draw the same sessions (a size
# search's counts, a fleet search's replica counts and router)
_NOT_DRAWN_FROM = frozenset({"sessions", "fleet"})


def _scenario_key(s: Scenario) -> str:
    """The scenario as JSON but for what no session reads (memoised for the last one)."""
    if not _scenario_json or _scenario_json[0][0] is not s:
        _scenario_json[:] = [(s, s.model_dump_json(exclude=set(_NOT_DRAWN_FROM)))]
    return _scenario_json[0][1]


class Agent:
    def __init__(self, ctx: RunContext, index: int, prefix: Prefix, *,
                 start_turn: int = 0, first_wait_share: float = 0.0,
                 retire: asyncio.Event | None = None) -> None:
        self.ctx = ctx
        # a ramp's step down: the session ends at its next turn boundary (the request in
        # flight completes); set together with the run's stop (`session/ramp.py`)
        self.retire = retire
        self.start_turn = start_turn     # warm start: turns before it are synthesised
        # primed warm start: the share of its first turn's think/tool time still to wait
        self.first_wait_share = first_wait_share
        self.s = ctx.scenario
        self._temperature, self._sampling = self.s.wire_sampling()   # what requests send
        self.session_id = session_id(index)
        self.prefix = prefix
        self.conv = Conversation()
        self.pending: _Pending | None = None
        self.last_read = ""
        self._read_ids: tuple[str, list[int]] | None = None   # last_read's ids, once
        self.replay = ReplaySource(ctx.replay.get(self.session_id, {}))
        self._due: float | None = None   # planned start of the next request (monotonic)
        # planted facts and recall probes (scenario `probes:`), None when off
        self.prober = Prober(ctx, self.session_id, index, prefix) \
            if ctx.scenario.probes is not None else None
        self._probe_s = 0.0              # seconds the last turn's probes took
        self._forced = 0                 # compactions an overflow forced in this turn

    def rng(self, turn: int, purpose: str = "") -> random.Random:
        """The generator for one purpose of one turn: independent streams, so draws for
        one purpose (e.g. back-off jitter) never shift another's (e.g. tool arguments)."""
        key = f"{self.s.seed}:{self.session_id}:{turn}"
        return random.Random(f"{key}:{purpose}" if purpose else key)

    # ------------------------------------------------------------------ turn loop
    async def run(self) -> None:
        try:
            await self._turns()
        except SessionStopped:
            return

    async def _turns(self) -> None:
        self._warm_start()
        for turn in range(self.start_turn, self.s.turns):
            replaying = (turn, "turn") in self.replay
            if self.ctx.stop.is_set() or (self.retire is not None and self.retire.is_set()):
                return
            user_msg, wait_s, template, max_tokens = self._live_draw(turn)
            if turn == self.start_turn > 0:
                # a warm-started session sends its first request at once, or (primed)
                # after the rest of the idle gap it was met in
                wait_s *= self.first_wait_share
            # the last turn's probes ran in this wait: it starts when the reply came
            clock = self.ctx.clock
            now = clock.monotonic()
            self._due = now - self._probe_s + clock.to_loop(wait_s)
            idle, self._probe_s = self._due - now, 0.0
            if idle > 0 and not replaying and await self._idle(clock.to_sim(idle)):
                return
            self.conv = self.conv.append(user_msg)
            self._forced = 0
            event = await self._compact(turn)
            resp = await self._request(turn, template, event, wait_s, self.conv.messages,
                                       "turn", max_tokens)
            sent = self.conv.messages
            self._append_live_reply(resp, template, turn)
            if self.ctx.progress is not None and not replaying:
                self.ctx.progress(resp.usage.output_tokens or resp.output_tokens_est)
            if self.prober is not None:
                # the policy's compaction or one an overflow forced: either is crossed
                compacted = event is not None or self._forced > 0
                self.prober.note_turn(turn, compacted)   # resumed turns too
                if not replaying:
                    started = self.ctx.clock.monotonic()
                    await self.prober.after_turn(turn, sent, compacted)
                    self._probe_s = self.ctx.clock.monotonic() - started

    def _warm_start(self) -> None:
        """Synthesise the turns before `start_turn` (none without a warm start), or take
        the history a run in this process synthesised for the same session before (not
        with probes: the prober keeps its own notes of planted facts)."""
        if not self.start_turn:
            return
        key: _WarmKey | None = None
        if self.prober is None:
            p = self.prefix
            key = (_scenario_key(self.s), self.session_id, self.start_turn,
                   p.system_digest, p.tools_digest, p.tokens_est)
            hit = _warm.get(key)
            if hit is not None:
                _warm.move_to_end(key)
                self.conv, self.pending, self.last_read = hit
                return
        for turn in range(self.start_turn):
            self._synthesise_turn(turn)
        if key is not None:
            _warm[key] = (self.conv, self.pending, self.last_read)
            if len(_warm) > WARM_HISTORIES:
                _warm.popitem(last=False)

    def _draw_key(self, turn: int) -> _DrawKey | None:
        """The key of this turn's draws in `_draws`: everything `_next_user_message`,
        `_draw_template` and `_max_tokens` read besides the generator's (seed, session,
        turn), which the scenario and session give; None where they read more (planted
        facts) or the run resumes."""
        if self.prober is not None or self.ctx.replay:
            return None
        pending = None if turn == 0 else self.pending
        if pending is None:
            return (_scenario_key(self.s), self.session_id, turn, -1, "")
        # by identity, or by value for a warm history's (an earlier run's scenario's)
        ts = self.s.turn_templates
        i = next((i for i, t in enumerate(ts) if t is pending.template), None)
        if i is None:
            i = next((i for i, t in enumerate(ts) if t == pending.template), None)
        return None if i is None else \
            (_scenario_key(self.s), self.session_id, turn, i, pending.tool_use_id)

    def _live_draw(self, turn: int) -> tuple[Message, float, TurnTemplate, int]:
        """A live turn's user message, wait (s), template and max_tokens, drawn as
        `_next_user_message` etc. do or taken from a run in this process that drew the
        same turn of the same session from the same state (`_draws`)."""
        key = self._draw_key(turn)
        hit = _draws.get(key) if key is not None else None
        if key is not None and hit is not None:
            _draws.move_to_end(key)
            if hit.last_read is not None:
                self.last_read = hit.last_read
            return (hit.message, hit.wait_s, self.s.turn_templates[hit.template_index],
                    hit.max_tokens)
        rng = self.rng(turn)
        reads = key is not None and key[3] >= 0 and \
            self.pending is not None and self.pending.template.tool is not None and \
            self.pending.template.tool.kind == "read"
        user_msg, wait_s = self._next_user_message(turn, rng)
        template = self._draw_template(rng)
        max_tokens = self._max_tokens(template, rng)
        if key is not None:
            index = next(i for i, t in enumerate(self.s.turn_templates) if t is template)
            _draws[key] = _Draw(user_msg, wait_s, index, max_tokens,
                                self.last_read if reads else None)
            _draws_held[0] += user_msg.tokens_est
            while _draws_held[0] > LIVE_DRAW_TOKENS and len(_draws) > 1:
                _draws_held[0] -= _draws.popitem(last=False)[1].message.tokens_est
        return user_msg, wait_s, template, max_tokens

    def _append_live_reply(self, resp: LLMResponse, template: TurnTemplate,
                           turn: int) -> None:
        """`_append_reply`, or the messages a run in this process appended for the same
        reply to the same turn of the same session (`_replies`)."""
        key: _ReplyKey | None = None
        if self.s.history == "live" and self.prober is None and not self.ctx.replay:
            index = next(i for i, t in enumerate(self.s.turn_templates) if t is template)
            tool = template.tool
            edit_old = self.last_read[:160] if tool is not None and tool.kind == "edit" else ""
            key = (_scenario_key(self.s), self.session_id, turn, index, resp.content, edit_old)
            hit = _replies.get(key)
            if hit is not None:
                _replies.move_to_end(key)
                messages, pending_id = hit
                self.conv = self.conv.append(*messages)
                self.pending = None if pending_id is None else _Pending(template, pending_id)
                return
        before = len(self.conv.messages)
        self._append_reply(resp, template, turn)
        if key is not None:
            added = self.conv.messages[before:]
            _replies[key] = (added, None if self.pending is None else self.pending.tool_use_id)
            _replies_held[0] += sum(m.tokens_est for m in added)
            while _replies_held[0] > LIVE_REPLY_TOKENS and len(_replies) > 1:
                _replies_held[0] -= sum(m.tokens_est for m in _replies.popitem(last=False)[1][0])

    def _synthesise_turn(self, turn: int) -> None:
        """Warm start: build turn `turn`'s history as the live loop would — same draws
        from the same (seed, session, turn) generator — without sending anything; the
        reply is the scripted text of the drawn output size (an exact token count)."""
        rng = self.rng(turn)
        user_msg, _ = self._next_user_message(turn, rng)
        template = self._draw_template(rng)
        self.conv = self.conv.append(user_msg)
        policy = self.s.compaction
        out = comp.apply_policy(policy, self.conv, self.prefix.tokens_est)
        if out.summary_needed and isinstance(policy, SummarizeCompaction):
            text = content.synth_text("prose", policy.summary_max_tokens,
                                      self.rng(turn, "summary"))
            out = comp.finish_summary(policy, self.conv, text, self.prefix.tokens_est)
        self.conv = out.conversation
        if self.prober is not None:
            self.prober.note_turn(turn, out.event is not None)
        n = self._max_tokens(template, rng)
        # live history appends the reply's content; scripted makes its own text of n tokens
        blocks = (self._scripted_text(template, n, self.rng(turn, "reply")),) \
            if self.s.history == "live" else ()
        reply = LLMResponse(blocks, "end_turn", Usage(output_tokens=n), Timing(sent=0.0), n)
        self._append_reply(reply, template, turn)

    async def _idle(self, seconds: float) -> bool:
        """Think time / tool latency (simulated seconds); True when the run is stopping
        (or, in a ramp, this session retiring: its event is also set at the run's stop)
        meanwhile."""
        return await self.ctx.clock.wait(self.retire or self.ctx.stop, seconds)

    def _draw_template(self, rng: random.Random) -> TurnTemplate:
        ts = self.s.turn_templates
        return rng.choices(ts, weights=[t.weight for t in ts])[0]

    def _max_tokens(self, template: TurnTemplate, rng: random.Random) -> int:
        return max(1, int(round(template.output_tokens.sample(rng))))

    def _next_user_message(self, turn: int, rng: random.Random) -> tuple[Message, float]:
        if turn == 0 or self.pending is None:
            dist = self.s.first_prompt_tokens if turn == 0 else self.s.user_prompt_tokens
            n = max(1, int(round(dist.sample(rng))))
            text = content.synth_text("prose", n, rng)
            think = 0.0 if turn == 0 else self.s.think_time_s.sample(rng)
            due = self._facts_due("user_value", turn)
            if due:
                return Message("user", (TextBlock(recall.plant_in_prompt(text, due)),)), think
            return Message("user", (TextBlock(text, n),)), think
        tool = self.pending.template.tool
        assert tool is not None
        size = content.cap_tool_result(tool.kind, max(1, int(round(tool.result_tokens.sample(rng)))))
        is_error = rng.random() < tool.error_rate
        body = content.tool_result_text(tool.kind, size, rng)
        due = self._facts_due("tool_value", turn) if tool.kind == "read" else []
        if due:
            body = recall.plant_in_file(body, due, self.rng(turn, "facts"))
        if tool.kind == "read":
            self.last_read = body
        block = ToolResultBlock(self.pending.tool_use_id, body, is_error, tool.kind,
                                -1 if due else size + 6)
        return Message("user", (block,)), tool.latency_s.sample(rng)

    def _facts_due(self, kind: recall.FactKind, turn: int,
                   limit: int | None = None) -> list[recall.Fact]:
        """The planted facts this turn carries (none when probes are off)."""
        return [] if self.prober is None else self.prober.book.due(kind, turn, limit)

    # ------------------------------------------------------------------ compaction
    async def _compact(self, turn: int) -> comp.CompactionEvent | None:
        policy = self.s.compaction
        out = comp.apply_policy(policy, self.conv, self.prefix.tokens_est)
        if out.summary_needed and isinstance(policy, SummarizeCompaction):
            msgs = comp.summary_request_messages(self.conv, policy.prompt)
            resp = await self._request(turn, None, None, 0.0, msgs, "summary",
                                       policy.summary_max_tokens)
            out = comp.finish_summary(policy, self.conv, resp.text, self.prefix.tokens_est)
        self.conv = out.conversation
        return out.event

    # ------------------------------------------------------------------ requests
    def _build(self, messages: tuple[Message, ...], max_tokens: int,
               template: TurnTemplate | None) -> LLMRequest:
        hints = {"turn-kind": ("edit" if template.code_edit else template.name) if template else "summary",
                 "output-tokens": str(max_tokens)}
        if template is not None and template.code_edit:
            hints["repeat-fraction"] = f"{template.repeat_fraction:.2f}"
            if template.edit_share is not None:
                hints["edit-share"] = f"{template.edit_share:.3f}"
        if template is not None and template.tokens_per_pass is not None:
            hints["tokens-per-pass"] = f"{template.tokens_per_pass:.3f}"
        prefix = self.prefix
        if self.s.cache_bust == "per_request":
            prefix = with_nonce(self.ctx.base_prefix, f"{self.session_id}-{len(messages)}-"
                                f"{self.ctx.clock.monotonic():.6f}")
        wire_max = max_tokens if self.s.output_control == "max_tokens" else self.s.max_tokens
        return LLMRequest(self.s.model, prefix, messages, wire_max, self._temperature,
                          self.session_id, hints, self._sampling)

    async def _request(self, turn: int, template: TurnTemplate | None,
                       event: comp.CompactionEvent | None, think_s: float,
                       messages: tuple[Message, ...], kind: str,
                       max_tokens: int) -> LLMResponse:
        stored = self.replay.take(turn, kind)
        if stored is not None:
            return self._replayed(stored, kind, messages)
        return await self._send(turn, template, event, think_s, messages, kind, max_tokens)

    async def _send(self, turn: int, template: TurnTemplate | None,
                    event: comp.CompactionEvent | None, think_s: float,
                    messages: tuple[Message, ...], kind: str, max_tokens: int) -> LLMResponse:
        """Send until success, retrying as the scenario says; every attempt is recorded."""
        retry = self.s.retry
        number = self.ctx.prior_attempts.get((self.session_id, turn, kind), 0)
        forced = 0
        targets: list[int] = []  # forced-compaction targets, kept for resume
        while True:
            number += 1
            req = self._build(messages, max_tokens, template)
            reusable = self.ctx.tracker.observe(self.session_id, req.prefix, req.messages,
                                                self.ctx.tools_text)
            ctx_tokens = req.prefix.tokens_est + sum(m.tokens_est for m in messages)
            att = Attempt(turn, kind, number, ctx_tokens, reusable, max_tokens, event,
                          template, think_s)
            due = self.ctx.clock.monotonic() if self._due is None else self._due
            self._due = None        # a later request (after a summary) is due when built
            async with self.ctx.limiter:
                started_wall = self.ctx.clock.wall()
                sent = self.ctx.clock.monotonic()
                att = replace(att, lag_s=max(0.0, sent - due))
                try:
                    resp = await self.ctx.endpoint.send(req)
                except EndpointError as exc:
                    self._record_failure(att, started_wall, sent, exc)
                    err: EndpointError | None = exc
                except asyncio.CancelledError:
                    self._record_failure(att, started_wall, sent, EndpointError(
                        ErrorType.CANCELLED, "cancelled while in flight (stop or deadline)"))
                    raise
                else:
                    if self.ctx.ngram_meter is not None:     # after the reply's last token
                        resp = self.ctx.ngram_meter.annotate(req, resp)
                    # History first, carrying the turn row: a crash between the two
                    # lines replays this reply on resume instead of sending the turn
                    # twice, and resume writes the row back from the history line.
                    self.ctx.recorder.write_success(reply_row(
                        self.session_id, turn, kind, forced, resp,
                        self.s.history == "live" or kind == "summary", targets),
                        self._success_row(att, started_wall, sent, resp))
                    if resp.content:
                        self.ctx.tracker.extend(self.session_id, Message("assistant", resp.content))
                    return resp
            assert err is not None
            event = None  # the compaction is recorded on the first attempt only
            if err.error_type in FATAL_ERRORS:
                raise FatalEndpointError(f"{err.error_type.value}: {err}")
            if err.error_type == ErrorType.CONTEXT_OVERFLOW and kind == "turn" \
                    and number < retry.max_attempts:
                target = overflow_target(self.s.context_window_tokens, parse_overflow(str(err)),
                                         ctx_tokens, max_tokens, forced)
                out = comp.force_compaction(self.conv, self.prefix.tokens_est, target,
                                            self.s.compaction.kind)
                self.conv, event = out.conversation, out.event
                messages = self.conv.messages
                forced += 1
                self._forced += 1
                targets.append(target)
                continue
            if not err.error_type.retryable or number >= retry.max_attempts:
                raise SessionFailed(f"{self.session_id} turn {turn}: {err.error_type.value} "
                                    f"after {number} attempt(s): {err}")
            u = self.rng(turn, f"{kind}:jitter:{number}").random()
            delay = backoff_delay(retry, number, u, err.retry_after_s)
            self._due = self.ctx.clock.monotonic() + self.ctx.clock.to_loop(delay)
            if await self._idle(delay):
                raise SessionStopped(f"{self.session_id}: stopped while backing off")

    def _replayed(self, stored: StoredReply, kind: str,
                  messages: tuple[Message, ...]) -> LLMResponse:
        """Resume: rebuild the state a stored reply left (forced compactions included)
        and feed the prefix tracker as the original request did, without sending."""
        if kind == "turn":
            targets = stored.forced_targets or \
                (int(self.s.context_window_tokens * 0.5),) * stored.forced_compactions
            for target in targets:
                out = comp.force_compaction(self.conv, self.prefix.tokens_est, target,
                                            self.s.compaction.kind)
                self.conv = out.conversation
                self._forced += 1
            messages = self.conv.messages
        req = self._build(messages, 1, None)
        self.ctx.tracker.observe(self.session_id, req.prefix, req.messages, self.ctx.tools_text)
        resp = stored.response()
        if resp.content:
            self.ctx.tracker.extend(self.session_id, Message("assistant", resp.content))
        return resp

    def _row(self, a: Attempt, started_wall: float, sent: float, **kw: Any) -> TurnRecord:
        ev, tpl = a.event, a.template
        return TurnRecord(
            run_id=self.ctx.run_id, session_id=self.session_id, turn_index=a.turn,
            request_kind="summary" if a.kind == "summary" else "turn", attempt=a.number,
            started_at=started_wall,
            started_mono_s=sent - self.ctx.t0, context_tokens_est=a.ctx_tokens,
            reusable_prefix_tokens=a.reusable, max_tokens=a.max_tokens,
            turn_kind=tpl.name if tpl else "summary", think_time_s=a.think_s,
            compaction=ev.kind if ev else None,
            compaction_messages_removed=ev.messages_removed if ev else 0,
            compaction_tokens_removed=ev.tokens_removed if ev else 0,
            schedule_lag_s=a.lag_s, **kw)

    def _success_row(self, b: Attempt, wall: float, sent: float, r: LLMResponse) -> TurnRecord:
        t = r.timing
        n_out = r.usage.output_tokens if r.usage.output_tokens is not None else r.output_tokens_est
        ttft, decode, turn_rate, e2e = derive_rates(n_out, t.sent, t.first_token, t.last_token)
        if e2e is None and t.done is not None:
            e2e = t.done - t.sent
        chunk = t.first_chunk if t.first_chunk is not None else t.first_token
        return (self._row(
            b, wall, sent, input_tokens=r.usage.input_tokens,
            cache_read_tokens=r.usage.cache_read_input_tokens,
            cache_creation_tokens=r.usage.cache_creation_input_tokens,
            prompt_tokens=r.usage.prompt_tokens, output_tokens=n_out,
            output_tokens_est=r.output_tokens_est, ttft_s=ttft, decode_tok_s=decode,
            turn_tok_s=turn_rate, e2e_s=e2e, stop_reason=r.stop_reason, http_status=r.status,
            first_chunk_s=chunk - t.sent if chunk is not None else None,
            queue_s=_opt_float(r.extra.get("queue_s")), replica=r.extra.get("replica"),
            **spec_columns(r.extra), **tier_columns(r.extra), **pd_columns(r.extra)))

    def _record_failure(self, b: Attempt, wall: float, sent: float,
                        exc: EndpointError) -> None:
        t = exc.timing
        now = self.ctx.clock.monotonic()
        ttft = (t.first_token - t.sent) if t is not None and t.first_token is not None else None
        self.ctx.recorder.write(self._row(
            b, wall, sent, ok=False, error_type=exc.error_type.value,
            error_message=redact_text(str(exc))[:300], http_status=exc.status, ttft_s=ttft,
            output_tokens=exc.partial_output_tokens or None, e2e_s=now - sent,
            replica=exc.replica))

    # ------------------------------------------------------------------ history
    def _append_reply(self, resp: LLMResponse, template: TurnTemplate, turn: int) -> None:
        if self.s.history == "live":
            blocks: list[Block] = [b for b in resp.content
                                   if isinstance(b, TextBlock | ToolUseBlock) and
                                   (not isinstance(b, TextBlock) or b.text)]
        else:
            n = resp.usage.output_tokens or resp.output_tokens_est or 1
            blocks = [self._scripted_text(template, n, self.rng(turn, "reply"))]
        server_tools = [b for b in blocks if isinstance(b, ToolUseBlock)]
        decisions = self._facts_due("decision", turn)
        if decisions:
            blocks.insert(len(blocks) - len(server_tools), TextBlock(recall.decision_text(decisions)))
        self.pending = None
        if template.tool is not None and not server_tools:
            tid = f"toolu_{self.session_id}_{turn:05d}"
            tool_input = self._tool_input(template, self.rng(turn, "tool"))
            edited = self._facts_due("edited_path", turn, 1) if template.tool.kind == "edit" else []
            if edited:
                tool_input = json.dumps(edit_input(edited[0].key, edited[0].value),
                                        separators=(",", ":"))
            # a read's, grep's, bash's… input is one of a few hundred: its count is
            # memoised (`tokens.piece_ids`); an edit's carries the file's text: counted
            counted = -1 if template.tool.kind == "edit" or edited else \
                len(tokens.piece_ids(tool_input)) + TOOL_USE_OVERHEAD_TOKENS
            blocks.append(ToolUseBlock(tid, _tool_name(template.tool.kind), tool_input, counted))
            self.pending = _Pending(template, tid)
        elif server_tools and template.tool is not None:
            # The model asked for tools itself: answer the first one with this template's
            # result size, the others with short results (every tool_use gets an answer).
            self.pending = _Pending(template, server_tools[0].id)
        if not blocks:
            blocks = [TextBlock("(empty reply)")]
        self.conv = self.conv.append(Message("assistant", tuple(blocks)))
        if server_tools and template.tool is None:
            self.pending = None
            self.conv = self.conv.append(Message("user", tuple(
                ToolResultBlock(b.id, "ok", False, b.name) for b in server_tools)))
            self.conv = self.conv.append(Message("assistant", (TextBlock("Done."),)))

    def _scripted_text(self, template: TurnTemplate, n: int, rng: random.Random) -> TextBlock:
        """The scripted reply of n tokens as a block, with its exact token count (the
        synthesised part's is known without encoding it again: `synth_text_counted`;
        a newline before a line ends a pretoken, so the two parts count apart)."""
        if template.code_edit and self.last_read:
            ids = self._last_read_ids()
            k = min(len(ids), int(n * template.repeat_fraction))
            start = rng.randint(0, max(0, len(ids) - k))
            # the copied lines' ids are the file's but for the first and last
            copied, copied_ids = tokens.encode_cut(ids, start, start + k, "\n")
            text, count = content.synth_text_counted("code", max(1, n - k), rng)
            reply = copied + text
            known = tokens.known(text)
            if known is not None:           # the next prompt frames it: its ids
                tokens.remember(reply, [*copied_ids, *known])
            return TextBlock(reply, len(copied_ids) + count)
        text, count = content.synth_text_counted("code", n, rng)
        return TextBlock(text, count)

    def _last_read_ids(self) -> list[int]:
        """cl100k ids of `last_read`, encoded once per file read (edits reuse them)."""
        if self._read_ids is None or self._read_ids[0] is not self.last_read:
            # a synthesised file's ids are known but for its ends (`tokens.known`)
            self._read_ids = (self.last_read, tokens.encode_pieces([self.last_read]))
        return self._read_ids[1]

    def _tool_input(self, template: TurnTemplate, rng: random.Random) -> str:
        assert template.tool is not None
        kind = template.tool.kind
        path = f"src/{rng.choice(('core', 'api', 'engine', 'utils'))}/module_{rng.randint(1, 60)}.py"
        args: dict[str, str] = {"read": {"file_path": path},
                                "grep": {"pattern": f"def {rng.choice(('load', 'parse', 'run'))}",
                                         "path": "src"},
                                "glob": {"pattern": "**/*.py"},
                                "bash": {"command": f"pytest -q tests/test_{rng.randint(1, 40)}.py"},
                                "write": {"file_path": path, "content": "..."},
                                }.get(kind, {"description": kind})
        if kind == "edit":
            old = self.last_read[:160] if self.last_read else "pass"
            args = {"file_path": path, "old_string": old, "new_string": old.replace("self", "ctx")}
        return json.dumps(args, separators=(",", ":"))


def _tool_name(kind: str) -> str:
    return {"read": "Read", "grep": "Grep", "glob": "Glob", "bash": "Bash", "edit": "Edit",
            "write": "Write", "task": "Task", "todo": "TodoWrite", "web": "WebFetch"}[kind]


def _opt_float(x: object) -> float | None:
    """A float from an endpoint's extras (None when it did not report one)."""
    return float(x) if is_number(x) else None
