"""`endurance run --workers N`: sessions sharded over worker processes, one result.

One Python process drives a few hundred streaming sessions before its event loop, not
the server, sets the pace. Sharding splits the scenario's sessions into N contiguous
ranges; each shard runs the ordinary `Runner` (`runs.drive_sessions` with its session
range, at the parent's `ServerInfo` clock rate) in its own process against the same
endpoint and records into its own journal under
`<run>/workers/w<i>/`. The parent then merges every shard's rows into the run's one
`turns.jsonl` → `turns.parquet`, one manifest and one summary, exactly as a
single-process run would have written them.

How shards run is behind the `Executor` protocol (`run_shards(jobs) → results`):
`ProcessExecutor` uses spawned processes on this machine, `InlineExecutor` runs them
one after another in-process (debugging); `simulator.run.ray.RayExecutor` runs
each shard as a Ray task on any node of a cluster (see the README's scale-out section).
It is a drive (`Sharded`) of the one run pipeline (`run.execute`): opened and finished
as a single-process run is, its sessions driven here.

The in-process twin is refused: it is one simulated card shared by all sessions, and
N processes would each simulate their own card. Serve the twin over HTTP instead
(`endurance twin serve`) and point `--endpoint` at it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import math
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import SimpleQueue
from pathlib import Path
from typing import Protocol

from simulator.clock import RunClock
from simulator.endpoints.factory import make_endpoint
from simulator.errors import InputError
from simulator.records.manifest import Manifest, RunSettings
from simulator.records.ownership import (
    WORKERS_DIR,
    TurnKey,
    die_with_parent,
    missing_rows,
    turn_key,
    without_row,
)
from simulator.records.prometheus import metrics_url_for
from simulator.records.recorder import (
    EVENTS_JOURNAL,
    HISTORY_JOURNAL,
    METRICS_JOURNAL,
    ROW_JOURNALS,
    TURNS_JOURNAL,
    Recorder,
    iter_journal,
)
from simulator.records.rows import TurnRecord
from simulator.run.drive import TELEMETRY_EVENT, drive_sessions, metrics_scraper, target_label
from simulator.run.execute import execute
from simulator.run.observe import follow_shards
from simulator.run.prepare import OpenedRun, endpoint_target, resolve
from simulator.run.server import ServerInfo
from simulator.run.signals import SignalHandler, signals_deferred, signals_handled
from simulator.run.spec import RunResult, RunSpec
from simulator.scenario.load import apply_overrides
from simulator.scenario.model import Scenario
from simulator.session.resume import ResumeState, read_manifest_for_resume
from simulator.session.runner import START_WAIT_S, RunOutcome
from simulator.util.ids import session_id
from simulator.util.numbers import to_float

SHARD_JOURNALS = ROW_JOURNALS
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@dataclass(frozen=True)
class ShardJob:
    """What one worker runs: sessions [start, stop) of the spec's scenario (picklable)."""

    index: int
    start: int
    stop: int
    spec: RunSpec
    run_id: str
    shard_dir: Path
    scrape_metrics: bool           # only one shard scrapes the server's /metrics
    limit_overrides: tuple[str, ...] = ()
    # the parent's resolved scenario, limits split (None: resolve spec + limit_overrides);
    # a shard on another node then needs no scenario file
    scenario: Scenario | None = None
    resume: ResumeState | None = None   # --resume: what this shard's sessions did before
    server: ServerInfo | None = None    # the parent's probe: the shard's clock rate


@dataclass(frozen=True)
class ShardResult:
    """How one shard ended; `t0_mono`/`t0_wall` are the monotonic and Unix times its
    runner started (s). A shard on another machine (`clock_error_s` set) is aligned by
    wall clock: `clock_offset_s` is the driver's clock minus the shard's, known to
    ±`clock_error_s` (half the best round trip, s)."""

    index: int
    status: str
    reason: str = ""
    failed_sessions: tuple[str, ...] = ()
    deadline_reached: bool = False
    wall_window_s: float = 0.0
    t0_mono: float = 0.0
    t0_wall: float = 0.0
    clock_offset_s: float = 0.0
    clock_error_s: float | None = None
    node: str = ""


class Executor(Protocol):
    """Runs shard jobs somewhere and returns their results in job order.

    `name` goes to the manifest; `parent_scrapes_metrics` says the parent, not shard
    0, scrapes the server's /metrics (one owner wherever the shards run)."""

    name: str
    parent_scrapes_metrics: bool

    def run_shards(self, jobs: Sequence[ShardJob]) -> list[ShardResult]: ...


class ProcessExecutor:
    """One spawned process per shard on this machine.

    SIGTERM and SIGINT sent to the parent (a `kill`, `kill -INT`, a supervisor's or a
    job scheduler's stop, Ctrl-C) are forwarded to every live worker, whose runner then
    stops as a single-process run would (a second signal cancels in-flight requests at
    once). Each worker runs in a process group of its own, so a terminal's Ctrl-C —
    SIGINT to the foreground group — reaches the parent only and each worker gets it
    once, by forwarding, exactly as for a signal sent to the parent alone."""

    name = "local"
    parent_scrapes_metrics = False

    def __init__(self) -> None:
        self._procs: list[SpawnProcess] = []
        self._stopping = False
        self._unsent: int | None = None     # a stop that came before any worker started

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send `sig` to every worker still running; before any has started, send it to
        each once they have (a Ctrl-C landing between the handler's install and the
        starts went to no one, and the workers ran to their end: exit 0)."""
        self._stopping = True
        started = False
        for proc in self._procs:
            if proc.pid is None:                 # not started yet
                continue
            started = True
            if proc.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, sig)
        if not started:
            self._unsent = sig

    def run_shards(self, jobs: Sequence[ShardJob]) -> list[ShardResult]:
        ctx = get_context("spawn")
        results = ctx.SimpleQueue()
        forward: dict[int, SignalHandler] = {int(sig): lambda sig, _frame: self.stop(sig)
                                   for sig in (signal.SIGTERM, signal.SIGINT)}
        with signals_handled(forward):
            self._procs = [ctx.Process(target=_shard_main, args=(job, results),
                                       name=f"endurance-worker-{job.index}", daemon=False)
                           for job in jobs]
            # Each worker starts with SIGINT and SIGTERM blocked (the mask survives the
            # spawn's exec): a terminal's Ctrl-C, which reaches the worker's group until
            # it moves to its own, cannot interrupt its imports (a half-imported pandas
            # broke its finalize); its runner unblocks them once its handlers are in
            # place, and a signal sent meanwhile is delivered then. Here they are
            # pending for the milliseconds the starts take, then forwarded as usual.
            masked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
            try:
                for proc in self._procs:
                    proc.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, masked)
            if self._unsent is not None:
                sig, self._unsent = self._unsent, None
                self.stop(sig)
            got: dict[int, ShardResult] = {}
            while len(got) < len(jobs):
                if not results.empty():
                    res: ShardResult = results.get()
                    got[res.index] = res
                elif all(not p.is_alive() for p in self._procs):
                    if results.empty():
                        break
                else:
                    _wait_any(self._procs, 0.05)
            for proc in self._procs:
                proc.join()
        return [got.get(job.index) or self._lost(job, proc)
                for job, proc in zip(jobs, self._procs, strict=True)]

    def _lost(self, job: ShardJob, proc: SpawnProcess) -> ShardResult:
        """A worker that exited without reporting (killed, crashed in start-up)."""
        code = proc.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 \
            else f"exit code {code}"
        if self._stopping:
            return ShardResult(job.index, "interrupted", f"worker {job.index} stopped ({how})")
        return ShardResult(job.index, "failed", f"worker {job.index} crashed ({how})")


def _shard_main(job: ShardJob, results: SimpleQueue[ShardResult]) -> None:
    """A worker process: run the shard and report its result (or its crash) to the
    parent. It dies with the parent: a SIGKILLed parent must not leave it running."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)    # Ctrl-C reaches the parent only, which forwards it (see above)
    die_with_parent()
    try:
        result = run_shard(job)
    except KeyboardInterrupt:   # stopped outside the runner's handlers: no traceback
        result = ShardResult(job.index, "interrupted", f"worker {job.index} stopped by "
                             "signal before its sessions ran")
    except Exception as exc:  # reported as the shard's failure; the traceback to stderr
        import traceback
        traceback.print_exc()
        result = ShardResult(job.index, "failed", f"worker {job.index} crashed: {exc!r}")
    results.put(result)


def _wait_any(procs: Sequence[SpawnProcess], timeout_s: float) -> None:
    """Sleep until a worker exits or `timeout_s` passes."""
    from multiprocessing.connection import wait
    wait([p.sentinel for p in procs if p.is_alive()], timeout_s)


class InlineExecutor:
    """Shards one after another in this process (debugging; no parallelism)."""

    name = "inline"
    parent_scrapes_metrics = False

    def run_shards(self, jobs: Sequence[ShardJob]) -> list[ShardResult]:
        return [run_shard(job) for job in jobs]


def split_sessions(sessions: int, workers: int) -> list[range]:
    """Contiguous, near-equal session ranges, one per worker (no empty ones)."""
    n = max(1, min(workers, sessions))
    bounds = [round(i * sessions / n) for i in range(n + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(n)]


def shard_limits(s: Scenario, workers: int) -> tuple[str, ...]:
    """Overrides that split the scenario's run-wide request limits over the workers."""
    out: list[str] = []
    if s.limits.max_in_flight is not None:
        out.append(f"limits.max_in_flight={max(1, math.ceil(s.limits.max_in_flight / workers))}")
    if s.limits.requests_per_s is not None:
        out.append(f"limits.requests_per_s={s.limits.requests_per_s / workers!r}")
    return tuple(out)


def check_shardable(spec: RunSpec, workers: int) -> None:
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    if spec.endpoint_url is None and spec.resume_dir is None:
        raise InputError(
            "--workers (and --executor ray) need --endpoint: the in-process twin is one "
            "simulated card shared by all sessions, and N processes would each simulate their "
            "own card; serve the twin over HTTP (`endurance twin serve`) and pass its URL as "
            "--endpoint")


def shard_scenario(s: Scenario, limits: Sequence[str]) -> Scenario:
    """The scenario a shard runs: the parent's, with its share of the run-wide limits."""
    if not limits:
        return s
    return Scenario.model_validate(apply_overrides(s.model_dump(mode="json"), list(limits)))


def shard_resume(state: ResumeState, sessions: range) -> ResumeState:
    """The part of a resumed run's state that belongs to sessions `sessions`."""
    mine = {session_id(i) for i in sessions}
    return ResumeState(
        replay={k: v for k, v in state.replay.items() if k in mine},
        prior_attempts={k: v for k, v in state.prior_attempts.items() if k[0] in mine},
        done_sessions=state.done_sessions & mine,
        failed_sessions=[x for x in state.failed_sessions if x in mine],
        mono_offset_s=state.mono_offset_s, rows_before=state.rows_before,
        answered={k: v for k, v in state.answered.items() if k in mine})


# -------------------------------------------------------------------- worker side --
def run_shard(job: ShardJob) -> ShardResult:
    """Run one shard in this process; its rows go to `job.shard_dir` (never raises for
    a failed run: the result says how it ended). The shard is driven as a one-process
    run is (`drive.drive_sessions`), on its sessions only, at the parent's clock rate;
    its recorder journals on the loop clock (rate 1) and the parent's recorder puts
    the rows in simulated time as it merges them."""
    spec = dataclasses.replace(job.spec, overrides=[*job.spec.overrides, *job.limit_overrides])
    s = job.scenario if job.scenario is not None else resolve(spec)[0]
    endpoint = make_endpoint(s, endpoint_target(spec))
    recorder = Recorder(job.shard_dir, Manifest(run_id=job.run_id, worker=job.index,
                                                session_range=(job.start, job.stop),
                                                pid=os.getpid()), clock=RunClock())
    server = job.server or ServerInfo(   # a job made without the parent's probe
        metrics_url=metrics_url_for(spec.endpoint_url) if spec.endpoint_url else None)
    run = OpenedRun(s, spec, endpoint, recorder, server, job.resume)
    outcome = RunOutcome("failed", reason="worker did not start")
    t0, t0_wall = time.monotonic(), time.time()

    def started() -> None:
        nonlocal t0, t0_wall
        t0, t0_wall = time.monotonic(), time.time()

    try:
        outcome = drive_sessions(run, sessions=range(job.start, job.stop),
                                 scrape=job.scrape_metrics, progress=False, started=started)
    except KeyboardInterrupt:
        outcome = RunOutcome("interrupted", reason="interrupted")
    finally:
        with signals_deferred():    # a forwarded signal must not tear the parquet
            recorder.finalize(outcome.status, None)
    return ShardResult(job.index, outcome.status, outcome.reason,
                       tuple(outcome.failed_sessions), outcome.deadline_reached,
                       outcome.wall_window_s, t0, t0_wall)


# -------------------------------------------------------------------- parent side --
class Sharded:
    """The drive of a sharded run: the sessions split over `workers` shards that
    `executor` runs (local processes by default), their journals merged back."""

    def __init__(self, workers: int, executor: Executor | None = None) -> None:
        self.workers = workers
        self.executor: Executor = executor or ProcessExecutor()

    def check(self, spec: RunSpec) -> None:
        check_shardable(spec, self.workers)
        if spec.resume_dir is not None:    # continue a run, sharded: each shard its sessions
            prior = read_manifest_for_resume(spec.resume_dir).run_spec or RunSettings()
            check_shardable(dataclasses.replace(   # refuse before the run is reopened
                spec, resume_dir=None,
                endpoint_url=spec.endpoint_url or prior.endpoint_url), self.workers)

    def manifest_extra(self, s: Scenario, manifest: Manifest) -> Manifest:
        return dataclasses.replace(manifest, workers=len(split_sessions(s.sessions, self.workers)),
                                   executor=self.executor.name)

    def __call__(self, run: OpenedRun) -> RunOutcome:
        shards_dir = WORKERS_DIR
        if run.state is not None:
            shards_dir = f"{WORKERS_DIR}/resume{len(run.recorder.manifest.resumes)}"
        return _drive_shards(run, self.workers, self.executor, shards_dir)


def execute_sharded(spec: RunSpec, workers: int, *, echo: Callable[[str], None] = print,
                    executor: Executor | None = None) -> RunResult:
    """Run `spec` over `workers` shards and merge them into one results directory
    (`execute` with the `Sharded` drive)."""
    return execute(spec, echo=echo, drive=Sharded(workers, executor))


def _drive_shards(run: OpenedRun, workers: int, executor: Executor,
                  shards_dir: str) -> RunOutcome:
    """The sessions of `run`, split over shards that `executor` runs, merged back."""
    s, spec, recorder, state = run.scenario, run.spec, run.recorder, run.state
    ranges = split_sessions(s.sessions, workers)
    limits = shard_limits(s, len(ranges))
    parent_scrape = executor.parent_scrapes_metrics
    scenario = shard_scenario(s, limits)
    jobs = [ShardJob(i, r.start, r.stop, spec, run.run_id, run.run_dir / shards_dir / f"w{i}",
                     i == 0 and not parent_scrape, limits, scenario,
                     None if state is None else shard_resume(state, r), run.server)
            for i, r in enumerate(ranges)]
    t0, t0_wall = time.monotonic(), time.time()
    # the executor owns SIGINT/SIGTERM while shards run: it tells every shard to stop;
    # the live view (if any) follows the shards' journals meanwhile
    with follow_shards(run.live, run.run_dir) as live_done:
        with _parent_scrape(recorder, run.server, parent_scrape, spec.scrape_urls):
            results = executor.run_shards(jobs)
        with signals_deferred():  # a late signal must not tear the merge
            merge_shards(recorder, jobs, results, t0, t0_wall)
            alignment = clock_alignment(results)
            if alignment is not None:
                recorder.update_manifest(dataclasses.replace(recorder.manifest,
                                                             clock_alignment=alignment))
        live_done()
    return merge_outcomes(results)


@contextlib.contextmanager
def _parent_scrape(recorder: Recorder, server: ServerInfo, enabled: bool,
                   extra: Sequence[str] = ()) -> Iterator[None]:
    """Scrape the server's /metrics (and the `--scrape` targets) from the parent (in a
    thread with its own loop) while the block runs: one owner of the scrape however
    many nodes generate load."""
    if not enabled or server.metrics_url is None:
        yield
        return
    import threading

    import aiohttp  # noqa: F401  (the scraper's client, imported here: never on the thread)

    scrapers = [metrics_scraper(server.metrics_url, recorder, server.clock())]
    scrapers += [metrics_scraper(u, recorder, server.clock(), source=target_label(u))
                 for u in extra]
    started = threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []

    async def scrape() -> None:
        loops.append(asyncio.get_running_loop())
        started.set()
        async with asyncio.TaskGroup() as tg:
            for scraper in scrapers:
                tg.create_task(scraper.run())

    thread = threading.Thread(target=lambda: asyncio.run(scrape()),
                              name="endurance-scrape", daemon=True)
    thread.start()
    started.wait(10)

    async def baselines() -> None:
        await asyncio.gather(*(scraper.ready() for scraper in scrapers))

    if loops:       # the shards' first requests after the baselines (`MetricsScraper`)
        with contextlib.suppress(concurrent.futures.TimeoutError):
            asyncio.run_coroutine_threadsafe(baselines(), loops[0]).result(START_WAIT_S)
    try:
        yield
    finally:
        for loop in loops:
            for scraper in scrapers:
                loop.call_soon_threadsafe(scraper.stop)
        thread.join(15)


def merge_shards(recorder: Recorder, jobs: Sequence[ShardJob],
                 results: Sequence[ShardResult], t0: float, t0_wall: float = 0.0) -> None:
    """Copy every shard's journals into the run's, in shard order; `started_mono_s` is
    moved onto the parent's timeline: by the shared monotonic clock for shards on this
    machine, by wall clock (corrected by the measured offset) for remote ones."""
    for job, res in zip(jobs, results, strict=True):
        if res.clock_error_s is not None and res.t0_wall:
            shift = res.t0_wall + res.clock_offset_s - t0_wall
        else:
            shift = (res.t0_mono - t0) if res.t0_mono else 0.0
        seen: set[TurnKey] = set()
        for row in iter_journal(job.shard_dir / TURNS_JOURNAL):
            seen.add(turn_key(row))
            row["started_mono_s"] = to_float(row["started_mono_s"]) + shift
            recorder.write(TurnRecord.from_row(row))
        for row in iter_journal(job.shard_dir / METRICS_JOURNAL):
            recorder.write_metrics(row)
        for row in iter_journal(job.shard_dir / EVENTS_JOURNAL):   # a --scrape's health
            if row.get("event") == TELEMETRY_EVENT:
                recorder.write_event(row)
        hist = list(iter_journal(job.shard_dir / HISTORY_JOURNAL))
        for row in missing_rows(seen, hist):     # a worker killed between the two lines
            row["started_mono_s"] = to_float(row["started_mono_s"]) + shift
            recorder.write(TurnRecord.from_row(row))
        for row in hist:
            recorder.write_history(without_row(row))


def clock_alignment(results: Sequence[ShardResult]) -> dict[str, object] | None:
    """The manifest's record of how remote shard timelines were aligned (None when
    every shard shared this machine's monotonic clock)."""
    remote = [r for r in results if r.clock_error_s is not None]
    if not remote:
        return None
    return {"method": "wall clock; offset to the driver's clock from the best of "
                      "several round trips (NTP-style), error = half that round trip",
            "max_error_s": max(r.clock_error_s or 0.0 for r in remote),
            "shards": [{"worker": r.index, "node": r.node, "offset_s": r.clock_offset_s,
                        "error_s": r.clock_error_s} for r in remote]}


def merge_outcomes(results: Sequence[ShardResult]) -> RunOutcome:
    """One outcome: failed if any shard failed, else interrupted if any was, else
    completed; reasons name their worker."""
    statuses = {r.status for r in results}
    status = next((st for st in ("failed", "interrupted") if st in statuses), "completed")
    reasons = [f"worker {r.index}: {r.reason}" for r in results if r.reason]
    return RunOutcome(status=status, reason="; ".join(reasons),
                      failed_sessions=[sid for r in results for sid in r.failed_sessions],
                      deadline_reached=any(r.deadline_reached for r in results),
                      wall_window_s=max((r.wall_window_s for r in results), default=0.0))
