"""The live side of a stepped ramp: slots of closed-loop sessions, and the controller
that sets their count step by step, holds each step until its window is long enough,
judges it and decides the next (`analysis/ramp.py` has the rules, pure).

Slot j runs sessions j, j + M, j + 2M, … (M slots: the ramp's bound), one after another:
a session that ends is replaced at once, fresh, as under constant load. A slot that joins
a step starts primed — its first session at a seeded turn with its history synthesised
and its first request after a seeded share of that turn's think time, as the warm start
does — so a step does not begin with a herd of cold prefills at t = 0 of the step. A step
down retires the slots above it: their sessions end at their next turn boundary (the
request in flight completes). Each step's verdict goes to `events.jsonl` as it is made
(a resumed ramp continues after the last one); the run's summary recomputes every step
from the rows at the end (`analysis/ramp.py`, the same functions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pandas as pd

from simulator.analysis.goodput import GoodputSlo
from simulator.analysis.ramp import (
    RampPlan,
    StepVerdict,
    covers,
    step_figures,
    transient_end,
    verdict,
)
from simulator.analysis.steady import Window
from simulator.records.rows import COLUMNS
from simulator.session.context import RunContext
from simulator.util.numbers import to_float

CHECK_MIN_S, CHECK_MAX_S = 1.0, 15.0    # how often a held step is looked at (sim s)

Start = Callable[[int, bool, asyncio.Event], Awaitable[None]]  # (index, primed, retire)


class SlotPool:
    """The ramp's slots: `set_target(n)` starts slots 0 … n − 1 not running (primed) and
    retires the others; every slot is retired when the run stops."""

    def __init__(self, tg: asyncio.TaskGroup, ctx: RunContext, slots: int,
                 start_session: Start, first_round: int = 0) -> None:
        self.tg, self.ctx, self.slots = tg, ctx, slots
        self.start_session = start_session
        self.round = dict.fromkeys(range(slots), first_round)   # next session's round
        self.running: dict[int, asyncio.Event] = {}

    def set_target(self, n: int) -> list[int]:
        """Start the slots below n that are not running; retire the rest. Returns the
        slots retired."""
        for j in range(n):
            if j not in self.running:
                retire = asyncio.Event()
                self.running[j] = retire
                self.tg.create_task(self._slot(j, retire))
        gone = sorted(j for j in self.running if j >= n)
        for j in gone:
            self.running.pop(j).set()
        return gone

    def stop_all(self) -> None:
        for retire in self.running.values():
            retire.set()

    async def _slot(self, j: int, retire: asyncio.Event) -> None:
        primed = True
        while not (retire.is_set() or self.ctx.stop.is_set()):
            index = j + self.round[j] * self.slots
            self.round[j] += 1
            await self.start_session(index, primed, retire)
            primed = False


class RampController:
    """Steps the slot pool through the plan, one held and judged step at a time."""

    def __init__(self, ctx: RunContext, plan: RampPlan, pool: SlotPool, *, hold_s: float,
                 max_step_s: float, goodput: GoodputSlo | None,
                 prior: Sequence[StepVerdict] = ()) -> None:
        self.ctx, self.plan, self.pool = ctx, plan, pool
        self.hold_s, self.max_step_s, self.goodput = hold_s, max_step_s, goodput
        self.done: list[StepVerdict] = list(prior)
        self.rows: list[dict[str, object]] = []
        ctx.recorder.subscribe(self.rows.append)
        self.check_s = min(CHECK_MAX_S, max(CHECK_MIN_S, hold_s / 10.0))

    def now(self) -> float:
        """Simulated seconds since the run started (the rows' `started_mono_s` clock)."""
        clock = self.ctx.clock
        return clock.to_sim(clock.monotonic() - self.ctx.t0)

    async def run(self) -> None:
        """Every step of the plan, then the run's stop (in-flight requests finish)."""
        try:
            while (nxt := self.plan.next_count(self.done)) is not None:
                n, phase = nxt
                retired = self.pool.set_target(n)
                # the step now held, for a live view (`live/figures.py`); only the
                # judged `ramp_step` events are read back (summary, resume)
                self.ctx.recorder.write_event({"event": "ramp_hold", "step": len(self.done),
                                               "sessions": n, "phase": phase,
                                               "t_s": self.now()})
                step = await self._hold(len(self.done), n, phase, self.now(), retired)
                if step is None:          # the run is stopping: this step has no verdict
                    return
                self.done.append(step)
                self.ctx.recorder.write_event({"event": "ramp_step", **step.to_dict()})
        finally:
            self.ctx.stop.set()
            self.pool.stop_all()

    def _frame(self, since: float) -> pd.DataFrame:
        """The rows of requests that ended at or after `since` (a step's, and those
        overlapping it)."""
        rows = [r for r in self.rows
                if to_float(r["started_mono_s"]) + to_float(r.get("e2e_s") or 0.0) >= since]
        return pd.DataFrame(rows, columns=list(COLUMNS))

    def _settled(self, end_s: float) -> bool:
        """No request admitted before `end_s` is still in flight (its row is written)."""
        oldest = self.ctx.limiter.oldest_in_flight()
        return oldest is None or self.ctx.clock.to_sim(oldest - self.ctx.t0) >= end_s

    async def _hold(self, index: int, n: int, phase: str, started: float,
                    retired: list[int]) -> StepVerdict | None:
        """Hold the step until its window is `hold_s` long and every request in it has
        come back (or until `max_step_s`: not steady); None when the run stops first."""
        slots, tiers = self.pool.slots, self.plan.tiers
        while True:
            if await self.ctx.clock.wait(self.ctx.stop, self.check_s):
                return None
            now = self.now()
            frame = self._frame(started)
            w0 = transient_end(frame, started, n, slots, retired)
            if w0 is not None and now >= w0 + self.hold_s and self._settled(w0 + self.hold_s) \
                    and covers(frame, w0 + self.hold_s, n, slots):
                w = Window(w0, w0 + self.hold_s)
                return verdict(index, n, phase, started, w,
                               step_figures(frame, w, n, slots, self.goodput), None, tiers,
                               frame)
            if now - started >= self.max_step_s:
                why = (f"no steady window within {self.max_step_s:g} s of the step "
                       + ("(its sessions had not all been answered)" if w0 is None
                          else f"(the window from {w0:.1f} s is shorter than "
                               f"{self.hold_s:g} s)"))
                return verdict(index, n, phase, started, None, {}, why, tiers)
