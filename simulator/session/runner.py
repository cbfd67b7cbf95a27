"""The runner: N agents in one TaskGroup, arrivals, limits, deadline, graceful stop.

It owns everything run-wide — the endpoint's background tasks, the request limiter,
the stop signal (Ctrl-C / SIGTERM: no new requests; in-flight ones may finish for a
grace period of wall time, then are cancelled and recorded as such), the deadline and the
failed-session threshold — and nothing about what a turn is (see `agent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from simulator.analysis.goodput import GoodputSlo
from simulator.analysis.ramp import plan_of, verdict_from_dict
from simulator.clock import RunClock
from simulator.endpoints.base import Endpoint
from simulator.errors import RunError
from simulator.records.blocks import BLOCKS_JOURNAL, BlockRecorder
from simulator.records.prefix import PrefixTracker
from simulator.records.recorder import Recorder
from simulator.scenario.model import Scenario
from simulator.session.agent import Agent
from simulator.session.context import FatalEndpointError, RunContext, SessionFailed
from simulator.session.limiter import Limiter
from simulator.session.prefix import build_base_prefix, tools_json, with_nonce
from simulator.session.ramp import RampController, SlotPool
from simulator.session.replay_agent import ReplayAgent
from simulator.session.resume import ResumeState
from simulator.util.ids import session_id

if TYPE_CHECKING:   # the meter loads tiktoken: real servers only
    from simulator.endpoints.client_meter import ClientMeter

STOP_GRACE_S = 10.0
START_WAIT_S = 10.0  # the longest the first session waits for the start hooks (a scrape)


@dataclass
class RunOutcome:
    status: str                      # completed | interrupted | failed
    reason: str = ""
    failed_sessions: list[str] = field(default_factory=list)
    deadline_reached: bool = False
    wall_window_s: float = 0.0
    early: str | None = None         # stopped once its verdict was decided: why


def arrival_offsets(s: Scenario) -> list[float]:
    """Start offsets (seconds) of each session under the scenario's arrival pattern."""
    a = s.arrival
    if a.pattern == "all_at_once":
        return [0.0] * s.sessions
    if a.pattern == "ramp":
        return [i * a.interval_s for i in range(s.sessions)]
    rng = random.Random(f"{s.seed}:arrivals")
    t, out = 0.0, []
    for _ in range(s.sessions):
        out.append(t)
        t += rng.expovariate(a.rate_per_s)
    return out


def warm_start_turn(seed: int, index: int, turns: int) -> int:
    """The turn a warm-started session begins at: uniform over 0 … turns − 1, seeded by
    (seed, session index) so a re-run starts every session at the same turn."""
    return random.Random(f"{seed}:warm:{index}").randrange(turns)


def warm_start_phase(seed: int, index: int) -> float:
    """Primed warm start: the share (0..1) of its first turn's think/tool time a
    warm-started session still has to wait at t = 0, seeded by (seed, session index): a
    session met mid-idle is a uniform way through its gap."""
    return random.Random(f"{seed}:warm-phase:{index}").random()


def primed_offsets(s: Scenario, offsets: list[float]) -> list[float]:
    """Arrival offsets with a primed warm start: the initial sessions are all active
    from t = 0 (mid-day), so the arrival ramp is not applied to them."""
    if not (s.load.warm_start and s.load.warm_start_prime and s.replay is None):
        return offsets
    return [0.0] * len(offsets)


class Runner:
    def __init__(self, scenario: Scenario, endpoint: Endpoint, recorder: Recorder, run_id: str,
                 *, progress: Callable[[int], None] | None = None,
                 background: list[Callable[[], Coroutine[object, None, object]]] | None = None,
                 session_range: range | None = None,
                 on_finish: list[Callable[[], None]] | None = None,
                 on_start: list[Callable[[], Coroutine[object, None, object]]] | None = None,
                 stop_grace_s: float = STOP_GRACE_S, resume: ResumeState | None = None,
                 time_scale: float = 1.0, clock: RunClock | None = None) -> None:
        self.s = scenario
        # the run's clock: every wait (arrivals, think time, back-off, duration,
        # deadline) is simulated seconds through it; against an HTTP twin at
        # --time-scale K it runs at rate K (`time_scale` is the shorthand for that)
        self.clock = clock if clock is not None else RunClock(rate=time_scale)
        self.endpoint = endpoint
        self.recorder = recorder
        self.run_id = run_id
        self.progress = progress
        self.background = background or []
        self.sessions = session_range or range(scenario.sessions)
        self.on_finish = on_finish or []
        # awaited once the background tasks run, before the first session starts (at
        # most START_WAIT_S): e.g. a metrics scraper's baseline scrape
        self.on_start = on_start or []
        self.stop_grace_s = stop_grace_s
        self.resume = resume or ResumeState()
        self.outcome = RunOutcome("completed", failed_sessions=list(self.resume.failed_sessions))
        self._stop = asyncio.Event()
        self._signalled = 0
        self._grace: threading.Timer | None = None
        self._ctx: RunContext | None = None
        self._main: asyncio.Task[object] | None = None

    def live_gauges(self) -> dict[str, int]:
        """Requests in flight and held at the client's limits now (a live view reads
        them; empty before the run starts)."""
        return {} if self._ctx is None else self._ctx.limiter.counts()

    async def run(self) -> RunOutcome:
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        assert main is not None
        self._main = main
        installed = self._install_signals(loop, main)
        clock = self.clock
        base = build_base_prefix(self.s)
        # a resumed timeline continues (its offset is in simulated seconds, as recorded)
        t0 = clock.monotonic() - clock.to_loop(self.resume.mono_offset_s)
        tracker = BlockRecorder(self.recorder.run_dir / BLOCKS_JOURNAL) \
            if self.s.record_blocks else PrefixTracker()
        ctx = RunContext(self.run_id, self.s, self.endpoint, self.recorder, tracker,
                         clock, Limiter(self.s.limits.max_in_flight, self.s.limits.requests_per_s),
                         base, tools_json(base), self._stop, t0, self.progress,
                         replay=self.resume.replay, prior_attempts=self.resume.prior_attempts,
                         answered=self.resume.answered,
                         ngram_meter=_client_meter(self.endpoint))
        self._ctx = ctx
        try:
            await self._run_all(ctx)
        except asyncio.CancelledError:
            if self.outcome.early is not None:
                self.outcome.status = "interrupted"
                self.outcome.reason = f"stopped early, its verdict decided: {self.outcome.early}"
            elif not self._signalled:
                raise
            else:
                self.outcome.status = "interrupted"
                self.outcome.reason = ("stopped by signal; in-flight requests cancelled "
                                       "after grace")
        finally:
            if self._grace is not None:
                self._grace.cancel()
            self.outcome.wall_window_s = clock.to_sim(clock.monotonic() - t0)
            for sig in installed:
                loop.remove_signal_handler(sig)
        return self.outcome

    async def _run_all(self, ctx: RunContext) -> None:
        try:
            async with self.clock.timeout(self.s.deadline_s):
                await self._group(ctx)
        except TimeoutError:
            self.outcome.deadline_reached = True
            self.outcome.reason = f"deadline of {self.s.deadline_s} s reached"
        if self._signalled and self.outcome.status == "completed":
            self.outcome.status = "interrupted"
            self.outcome.reason = "stopped by signal"

    async def _group(self, ctx: RunContext) -> None:
        offsets = primed_offsets(self.s, arrival_offsets(self.s))
        try:
            async with asyncio.TaskGroup() as outer:
                bg: list[asyncio.Task[object]] = [outer.create_task(f()) for f in self.background]
                if self.on_start:
                    starting: list[asyncio.Task[object]] = [outer.create_task(f())
                                                         for f in self.on_start]
                    await asyncio.wait(starting, timeout=START_WAIT_S)
                    for t in starting:
                        t.cancel()
                try:
                    async with asyncio.TaskGroup() as tg:
                        duration = self.s.load.duration_s
                        if self.s.load.ramp is not None:
                            tg.create_task(self._ramp(ctx, tg))
                        else:
                            for i in self.sessions:
                                tg.create_task(self._session(ctx, i, offsets[i])
                                               if duration is None
                                               else self._slot(ctx, i, offsets[i]))
                        if duration is not None:
                            tg.create_task(self._stop_dispatch_at(duration))
                finally:
                    for stop in self.on_finish:   # e.g. a metrics scraper's last scrape
                        stop()
                    if bg and self.on_finish:
                        await asyncio.wait(bg, timeout=5.0)
                    for t in bg:
                        t.cancel()
        except* (FatalEndpointError, _TooManyFailures) as eg:
            self.outcome.status = "failed"
            self.outcome.reason = str(_first_leaf(eg))

    async def _stop_dispatch_at(self, duration_s: float) -> None:
        """Constant-load runs: after `duration_s` no new turn starts; in-flight requests
        finish (the same stop a signal gives, without marking the run interrupted)."""
        await self.clock.wait(self._stop, duration_s)
        self._stop.set()

    async def _slot(self, ctx: RunContext, slot: int, offset: float) -> None:
        """Closed-loop replacement: when the slot's session ends, a fresh one (session
        index slot + k·N: new id, new cache-bust nonce) starts at once, until stopped."""
        n = self.s.sessions        # the whole run's N: ids stay unique across shards
        k = 0
        while not self._stop.is_set():
            await self._session(ctx, slot + k * n, offset if k == 0 else 0.0)
            k += 1

    async def _ramp(self, ctx: RunContext, tg: asyncio.TaskGroup) -> None:
        """A stepped ramp (`load.ramp`): its controller sets the slots' count step by
        step (`session/ramp.py`); a resumed ramp continues after its last judged step."""
        ramp = self.s.load.ramp
        assert ramp is not None
        plan = plan_of(ramp.model_dump())
        prior = [verdict_from_dict(d) for d in self.resume.ramp_steps]
        slots = plan.bound
        seen = [int(k[0][1:]) for k in self.resume.prior_attempts]
        first_round = (max(seen) // slots + 1) if seen else 0

        async def start(index: int, primed: bool, retire: asyncio.Event) -> None:
            await self._session(ctx, index, 0.0, warm=primed, retire=retire, limit=slots)

        pool = SlotPool(tg, ctx, slots, start, first_round)
        goodput = GoodputSlo(self.s.goodput.ttft_s, self.s.goodput.output_tok_s)
        await RampController(ctx, plan, pool, hold_s=ramp.hold_s, max_step_s=ramp.max_step_s,
                             goodput=goodput, prior=prior).run()

    async def _session(self, ctx: RunContext, index: int, offset: float, *,
                       warm: bool | None = None, retire: asyncio.Event | None = None,
                       limit: int | None = None) -> None:
        """One session: `warm` (default: a warm-start scenario's initial sessions) starts
        it primed at a seeded turn; `retire` ends it at a turn boundary (a ramp's step
        down); `limit` is how many sessions run at most (the failed-session threshold)."""
        sid = session_id(index)
        if sid in self.resume.done_sessions or sid in self.resume.failed_sessions:
            return
        if sid in self.resume.replay:
            offset = 0.0    # a resumed session had arrived already
        if offset > 0:
            await self.clock.wait(self._stop, offset)
            if self._stop.is_set():
                return
        prefix = ctx.base_prefix
        if self.s.cache_bust == "per_session":
            prefix = with_nonce(prefix, f"{self.s.seed:x}{index:06x}")
        if self.s.replay is not None:   # a recorded session script (importers)
            agent: Agent = ReplayAgent(ctx, index, prefix)
        else:
            start = 0
            if warm is None:          # a warm start's initial sessions, not replacements
                warm = self.s.load.warm_start and index < self.s.sessions
            if warm:
                start = warm_start_turn(self.s.seed, index, self.s.turns)
            agent = Agent(ctx, index, prefix, start_turn=start,
                          first_wait_share=(warm_start_phase(self.s.seed, index) if start
                                            and self.s.load.warm_start_prime else 0.0),
                          retire=retire)
        try:
            await agent.run()
        except SessionFailed as exc:
            self.outcome.failed_sessions.append(agent.session_id)
            self.recorder.write_history({"session": agent.session_id, "failed": str(exc)})
            at_most = limit if limit is not None else len(self.sessions)
            allowed = self.s.limits.max_failed_sessions_frac * at_most
            if len(self.outcome.failed_sessions) > allowed:
                raise _TooManyFailures(
                    f"{len(self.outcome.failed_sessions)} of {at_most} sessions failed "
                    f"(limit {self.s.limits.max_failed_sessions_frac:.0%}); last: {exc}") from None
        finally:
            ctx.tracker.forget(agent.session_id)

    def stop_early(self, reason: str) -> None:
        """The run's verdict is decided (`analysis.early_verdict`): no new request, the
        ones in flight cancelled now; the run ends interrupted, `reason` said — its rows
        are a partial run's, never read as the whole run's figures."""
        if self.outcome.early is not None or self._main is None or self._signalled:
            return
        self.outcome.early = reason
        self._stop.set()
        self._main.cancel()

    def _install_signals(self, loop: asyncio.AbstractEventLoop,
                         main: asyncio.Task[object]) -> list[int]:
        installed: list[int] = []

        def on_signal() -> None:
            self._signalled += 1
            self._stop.set()
            if self._signalled == 1:
                self._grace = _wall_timer(self.stop_grace_s, loop, main.cancel)
            else:
                main.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_signal)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread (e.g. a worker thread in tests)
        if installed:
            # a `--workers` process starts with both blocked (`run.shards`): from now
            # on they stop the run, a signal sent during its start-up included
            signal.pthread_sigmask(signal.SIG_UNBLOCK, installed)
        return installed


def _wall_timer(seconds: float, loop: asyncio.AbstractEventLoop,
                callback: Callable[[], object]) -> threading.Timer:
    """Run `callback` on `loop` after `seconds` of wall time. The stop grace is a
    promise to whoever sent the signal, in their seconds: on the virtual-time loop a
    `call_later` would wait in simulated seconds, which a busy run may never reach."""
    def fire() -> None:
        with contextlib.suppress(RuntimeError):     # the loop closed meanwhile
            loop.call_soon_threadsafe(callback)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def _first_leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class _TooManyFailures(RunError):
    pass


def _client_meter(endpoint: Endpoint) -> ClientMeter | None:
    """The client-side reference n-gram meter for a real server (None for the twin and
    fakes: a simulated endpoint meters its own ids, or nothing)."""
    if getattr(endpoint, "simulated", False):
        return None
    from simulator.endpoints.client_meter import ClientMeter  # deferred: tiktoken, real servers only
    return ClientMeter()
