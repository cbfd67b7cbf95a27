"""Replays one recorded session (`Scenario.replay`) with the agent's request machinery.

Same constructor and `run()` contract as `Agent`, whose `_request` (retries, records,
prefix tracking) and `_compact` (the scenario's compaction policy) it reuses. Each
recorded call: wait as recorded (think or tool time; a Task/Agent result instead waits
for the sub-agent sessions it started), append the recorded user blocks, compact —
as recorded (history := the summary that followed the boundary, after an optional
summary request) or by `scenario.compaction` — send the call with `max_tokens` = the
recorded output, and append the reply: the recorded assistant blocks (`recorded`) or
the server's text plus the recorded tool calls (`live`). Session index i replays
recorded session i mod n (copy i // n draws different synthetic text).

Resumed (`run --resume`), a stream keeps the clock of the run's first part: a call
already answered is replayed without its wait, the session's start is the one it had
(its first call's send less that call's offset, or its recorded start), and what is due
then goes at once, as a held-back request does (issue 57: taking the start again at
the resume sent every later request of a team day minutes late).
"""

from __future__ import annotations

import asyncio
import json
import random
import weakref
from dataclasses import dataclass, field

from simulator.importers.anonymize import SpanTexts
from simulator.protocol.messages import Block, Message, Prefix, TextBlock, ToolResultBlock, ToolUseBlock
from simulator.scenario import content
from simulator.scenario.model import TurnTemplate
from simulator.scenario.replay import ReplayArg, ReplayBlock, ReplayCall, ReplaySpec
from simulator.session import compaction as comp
from simulator.session.agent import Agent
from simulator.session.context import RunContext, SessionFailed
from simulator.session.conversation import Conversation
from simulator.session.prefix import with_nonce
from simulator.util import tokens

_EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})


@dataclass
class _Coordinator:
    """What the sessions of one run share: span texts and sub-agent start/done events."""

    texts: SpanTexts
    started: dict[int, asyncio.Event] = field(default_factory=dict)
    done: dict[int, asyncio.Event] = field(default_factory=dict)
    cancelled: set[int] = field(default_factory=set)
    spawned_at: dict[int, float] = field(default_factory=dict)   # sim. s a parent spawned it

    def event(self, table: dict[int, asyncio.Event], index: int) -> asyncio.Event:
        return table.setdefault(index, asyncio.Event())


_COORDINATORS: weakref.WeakKeyDictionary[asyncio.Event, _Coordinator] = weakref.WeakKeyDictionary()


def _coordinator(ctx: RunContext, spec: ReplaySpec) -> _Coordinator:
    """One per run, keyed by the run's stop event (RunContext itself is unhashable)."""
    co = _COORDINATORS.get(ctx.stop)
    if co is None:
        co = _Coordinator(SpanTexts(ctx.scenario.seed, spec.span_tokens, spec.span_kinds))
        _COORDINATORS[ctx.stop] = co
    return co


def session_prefix(base: Prefix, size: int, seed: str) -> Prefix:
    """A prefix of about `size` tokens for a session recorded with its own (a
    sub-agent's system prompt and tool subset): the run's tools while they fit in 80%,
    else the leading ones that do, and a synthetic system prompt for the rest."""
    tools = list(base.tools)
    while tools and content.tools_tokens(tuple(tools)) > 0.8 * size:
        tools.pop()
    t_tok = content.tools_tokens(tuple(tools))
    system = content.synth_text("prose", max(0, size - t_tok), random.Random(seed))
    return Prefix(system, tuple(tools), tokens.count(system), t_tok)


class ReplayAgent(Agent):
    def __init__(self, ctx: RunContext, index: int, prefix: Prefix) -> None:
        super().__init__(ctx, index, prefix)
        assert self.s.replay is not None, "ReplayAgent needs scenario.replay"
        self.spec: ReplaySpec = self.s.replay
        n = len(self.spec.sessions)
        self.index, self.rec, self.copy = index, index % n, index // n
        self.script = self.spec.sessions[self.rec]
        if self.script.prefix_tokens is not None:
            self.prefix = session_prefix(ctx.base_prefix, self.script.prefix_tokens,
                                         f"{self.s.seed}:prefix:{self.rec}")
            if self.s.cache_bust == "per_session":
                self.prefix = with_nonce(self.prefix, f"{self.s.seed:x}{index:06x}")
        self.co = _coordinator(ctx, self.spec)
        self.awaiting: dict[str, list[int]] = {}     # Task tool_use id → sub-agent indexes
        self._templates: dict[tuple[str, bool, float | None, float | None], TurnTemplate] = {}
        self._paced: dict[tuple[str, float, float | None], TurnTemplate] = {}
        self._began = 0.0       # when the session started (s since the run began)
        self._waited = 0.0      # timing "arrivals": the idle before the current call
        # resumed: when this session's stored replies were sent and answered (sim. s)
        self._answered = ctx.answered.get(self.session_id, {})
        self._resumed = bool(ctx.prior_attempts)
        self._last_end: float | None = None   # a replayed call's answer (recorded gaps)

    def _global(self, rec_index: int) -> int:
        return rec_index + self.copy * len(self.spec.sessions)

    async def run(self) -> None:
        try:
            if self.script.parent is not None and not await self._await_start():
                return
            offset = self.script.start_offset_s if self.script.parent is None \
                and self.spec.timing != "none" else 0.0
            # a trace session starts at its recorded time (resumed: of the first part)
            wait = offset - self._now() if self._resumed else offset
            if wait > 0 and await self._idle(wait):
                return
            self._began = self._origin(offset)
            for k, call in enumerate(self.script.calls[: self.s.turns]):
                if self.ctx.stop.is_set():
                    return
                if await self._wait_before(k, call):
                    return
                await self._turn(k, call)
        finally:
            self.co.event(self.co.done, self.index).set()
            for child in self._all_spawns():       # never leave a child waiting
                if not self.co.event(self.co.started, child).is_set():
                    self.co.cancelled.add(child)
                    self.co.event(self.co.started, child).set()

    def _origin(self, offset: float) -> float:
        """When this session started: now, or, resumed, when it started in the first
        part (its first call's send less that call's offset; its recorded start; for a
        sub-agent, its parent's spawning reply)."""
        if not self._resumed:
            return self._now()
        first = self._answered.get((0, "turn"))
        calls = self.script.calls
        if first is not None and calls and calls[0].at_s is not None:
            return first[0] - calls[0].at_s
        if self.script.parent is not None:
            return self.co.spawned_at.get(self.index, self._now())
        return min(offset, self._now())

    def _all_spawns(self) -> list[int]:
        return [self._global(c) for call in self.script.calls for c in call.spawns]

    async def _await_start(self) -> bool:
        ev = self.co.event(self.co.started, self.index)
        stop = asyncio.ensure_future(self.ctx.stop.wait())
        start = asyncio.ensure_future(ev.wait())
        try:
            await asyncio.wait({stop, start}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            start.cancel()
        return ev.is_set() and self.index not in self.co.cancelled and not self.ctx.stop.is_set()

    async def _wait_before(self, k: int, call: ReplayCall) -> bool:
        """Idle before the call; True when the run is stopping. A call answered before
        a resume is replayed at once (it was sent on the first part's clock)."""
        children = [c for b in call.user if b.kind == "tool_result" and b.id
                    for c in self.awaiting.pop(b.id, [])]
        if children:
            for c in children:
                await self.co.event(self.co.done, c).wait()
            return self.ctx.stop.is_set()
        self._waited = 0.0
        if (k, "turn") in self.replay:
            return False
        if self.spec.timing == "arrivals" and call.at_s is not None:
            # at the recorded start, or now if the previous reply came later than that
            self._waited = max(0.0, self._began + call.at_s - self._now())
            return self._waited > 0 and await self._idle(self._waited)
        if self.spec.timing == "none" or call.wait_s <= 0:
            return False
        wait = min(call.wait_s, self.spec.max_wait_s)
        if self._last_end is None:
            return await self._idle(wait)
        wait -= self._now() - self._last_end    # after a replayed call: what is left
        return wait > 0 and await self._idle(wait)

    def _now(self) -> float:
        """Simulated seconds since the run started (the rows' `started_mono_s`)."""
        return self.ctx.clock.to_sim(self.ctx.clock.monotonic() - self.ctx.t0)

    async def _turn(self, k: int, call: ReplayCall) -> None:
        stored = self._answered.get((k, "turn")) if (k, "turn") in self.replay else None
        event = await self._apply_compaction(k, call)
        if not self.conv.messages:   # a server answers 400; say why instead
            raise SessionFailed(f"{self.session_id} turn {k}: recorded call {k} of session "
                                f"{self.script.id} has no message to send")
        max_tokens = max(1, call.usage.output_tokens if call.usage else 1)
        template = self._template(call, max_tokens)
        # the wait this turn had (`_wait` caps it at max_wait_s), not the one recorded
        wait = min(call.wait_s, self.spec.max_wait_s) if self.spec.timing == "recorded" \
            else self._waited if self.spec.timing == "arrivals" else 0.0
        resp = await self._request(k, template, event, wait, self.conv.messages, "turn",
                                   max_tokens)
        self._append_recorded(call, resp.content if self.spec.mode == "live" else None)
        self._last_end = None if stored is None else stored[1]
        uses = [b.id for b in call.assistant if b.kind == "tool_use" and b.id
                and b.tool in ("Task", "Agent")]
        for j, child in enumerate(call.spawns):
            gid = self._global(child)
            if uses:
                self.awaiting.setdefault(uses[min(j, len(uses) - 1)], []).append(gid)
            self.co.spawned_at[gid] = self._now() if stored is None else stored[1]
            self.co.event(self.co.started, gid).set()
        if self.ctx.progress is not None:
            self.ctx.progress(resp.usage.output_tokens or resp.output_tokens_est)

    @property
    def _policy(self) -> bool:
        """Compact by the scenario's policy instead of as recorded."""
        mode = self.spec.compaction
        return mode == "policy" or (mode == "auto" and self.s.compaction.kind != "none")

    async def _apply_compaction(self, k: int, call: ReplayCall) -> comp.CompactionEvent | None:
        point = call.compaction
        if self._policy or point is None:
            user = [b for b in call.user if not b.summary]
            self._append_user(user)
            return await self._compact(k) if self._policy else None
        before = self.conv
        if self.spec.summary_request and before.messages:
            summary_tokens = sum(b.tokens for b in call.user[point.at:] if b.summary) or 1
            rng = random.Random(f"{self.s.seed}:{self.session_id}:{k}:summary")
            prompt = content.synth_text("prose", self.spec.summary_prompt_tokens, rng)
            msgs = comp.summary_request_messages(before, prompt)
            await self._request(k, None, None, 0.0, msgs, "summary", summary_tokens)
        self.conv = Conversation(pinned=before.pinned)
        if point.keep_messages:             # a trace's drop kept the history's head
            self.conv = self.conv.replace(before.messages[:point.keep_messages])
        self._append_user(list(call.user[point.at:]))
        return comp.CompactionEvent("recorded", len(before.messages), before.tokens_est
                                    + self.prefix.tokens_est, self.conv.tokens_est
                                    + self.prefix.tokens_est, True)

    def _template(self, call: ReplayCall, max_tokens: int) -> TurnTemplate:
        tool = next((b.tool for b in call.assistant if b.kind == "tool_use" and b.tool), None)
        name = tool or "text"
        if call.tokens_per_pass is not None:    # measured at import: paced to the real
            tpp = round(call.tokens_per_pass, 2)
            share = None if call.edit_share is None else round(call.edit_share, 3)
            pkey = (name, tpp, share)
            paced = self._paced.get(pkey)
            if paced is None:       # copied lines edited as the import says (verbatim
                paced = self._paced[pkey] = TurnTemplate(     # runs beyond the default)
                    name=name, weight=1, output_tokens=max_tokens, code_edit=True,
                    tokens_per_pass=tpp, edit_share=share)
            return paced
        if call.repeat_fraction is not None:    # measured at import: copy as the real did
            frac = round(call.repeat_fraction, 2)
            key: tuple[str, bool, float | None, float | None] = (
                name, frac > 0, frac,
                None if call.edit_share is None else round(call.edit_share, 3))
        else:
            key = (name, name in _EDIT_TOOLS, None, None)
        t = self._templates.get(key)
        if t is None:
            extra: dict[str, float] = {} if key[2] is None else {"repeat_fraction": key[2]}
            if key[3] is not None:
                extra["edit_share"] = key[3]
            t = TurnTemplate(name=name, weight=1, output_tokens=max_tokens, code_edit=key[1],
                             **extra)
            self._templates[key] = t
        return t

    # ------------------------------------------------------------------ history
    def _text(self, text: int | None, spans: str | None, numbered: int | None = None,
              numbered_lines: int | None = None) -> str:
        if text is not None:
            return self.spec.texts[text]
        return self.co.texts.text(spans or "", numbered, self.copy, numbered_lines)

    def _tool_id(self, raw: str | None) -> str:
        return f"{raw or 'toolu'}_{self.session_id}"

    def _args(self, args: tuple[ReplayArg, ...]) -> str:
        d = {a.key: a.value if a.value is not None else self._text(a.text, a.spans)
             for a in args}
        return json.dumps(d, separators=(",", ":"))

    def _block(self, b: ReplayBlock) -> Block | None:
        if b.kind == "tool_use":
            return ToolUseBlock(self._tool_id(b.id), b.tool or "tool", self._args(b.args))
        body = self._text(b.text, b.spans, b.numbered_from, b.numbered_lines)
        if b.kind == "tool_result":
            return ToolResultBlock(self._tool_id(b.id), body, b.is_error, b.tool or "",
                                   b.tokens + 6)
        if b.kind == "thinking" and not self.spec.thinking_in_context:
            return None
        return TextBlock(body, b.tokens)

    def _append_user(self, blocks: list[ReplayBlock]) -> None:
        made = [x for x in (self._block(b) for b in blocks) if x is not None]
        if not made:
            return
        last = self.conv.messages[-1] if self.conv.messages else None
        if last is not None and last.role == "user":   # merge: roles must alternate
            self.conv = self.conv.replace((*self.conv.messages[:-1],
                                           Message("user", (*last.blocks, *made))))
        else:
            self.conv = self.conv.append(Message("user", tuple(made)))

    def _append_recorded(self, call: ReplayCall, live: tuple[Block, ...] | None) -> None:
        blocks: list[Block]
        if live is None:
            blocks = [x for x in (self._block(b) for b in call.assistant) if x is not None]
        else:
            blocks = [b for b in live if isinstance(b, TextBlock) and b.text]
            blocks += [x for b in call.assistant if b.kind == "tool_use"
                       if (x := self._block(b)) is not None]
        if not blocks:
            blocks = [TextBlock("(empty reply)")]
        last = self.conv.messages[-1] if self.conv.messages else None
        if last is not None and last.role == "assistant":
            self.conv = self.conv.replace((*self.conv.messages[:-1],
                                           Message("assistant", (*last.blocks, *blocks))))
        else:
            self.conv = self.conv.append(Message("assistant", tuple(blocks)))
