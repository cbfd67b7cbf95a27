"""`endurance run --workers N`: sessions sharded over worker processes, one result.

One Python process drives a few hundred streaming sessions before its event loop, not
the server, sets the pace. Sharding splits the scenario's sessions into N contiguous
ranges; each shard runs the ordinary `Runner` (with `session_range`) in its own
process against the same endpoint and records into its own journal under
`<run>/workers/w<i>/`. The parent then merges every shard's rows into the run's one
`turns.jsonl` → `turns.parquet`, one manifest and one summary, exactly as a
single-process run would have written them.

How shards run is behind the `Executor` protocol (`run_shards(jobs) → results`):
`ProcessExecutor` uses spawned processes on this machine, `InlineExecutor` runs them
one after another in-process (debugging); a Ray executor would run `run_shard` as a
remote task per shard for fleets beyond one machine (see the README's roadmap).

The in-process twin is refused: it is one simulated card shared by all sessions, and
N processes would each simulate their own card. Serve the twin over HTTP instead
(`endurance twin serve`) and point `--endpoint` at it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from simulator.errors import InputError

if TYPE_CHECKING:
    from simulator.metrics.recorder import Recorder
    from simulator.runs import RunResult, RunSpec
    from simulator.scenario.model import Scenario
    from simulator.session.runner import RunOutcome

WORKERS_DIR = "workers"


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


@dataclass(frozen=True)
class ShardResult:
    """How one shard ended; `t0_mono` is the monotonic time its runner started (s)."""

    index: int
    status: str
    reason: str = ""
    failed_sessions: tuple[str, ...] = ()
    deadline_reached: bool = False
    wall_window_s: float = 0.0
    t0_mono: float = 0.0


class Executor(Protocol):
    """Runs shard jobs somewhere and returns their results in job order."""

    def run_shards(self, jobs: Sequence[ShardJob]) -> list[ShardResult]: ...


class ProcessExecutor:
    """One spawned process per shard on this machine.

    SIGTERM sent to the parent (a `kill`, a job scheduler's stop) is forwarded to every
    live worker, whose runner then stops as a single-process run would (a second
    SIGTERM cancels in-flight requests at once). Ctrl-C needs no forwarding: the
    terminal sends SIGINT to the whole foreground process group, workers included."""

    def __init__(self) -> None:
        self._procs: list[Any] = []
        self._stopping = False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send `sig` to every worker still running."""
        self._stopping = True
        for proc in self._procs:
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, sig)

    def run_shards(self, jobs: Sequence[ShardJob]) -> list[ShardResult]:
        from simulator.runs import signals_handled
        ctx = get_context("spawn")
        results = ctx.SimpleQueue()
        with signals_handled({signal.SIGTERM: lambda _sig, _frame: self.stop()}):
            self._procs = [ctx.Process(target=_shard_main, args=(job, results),
                                       name=f"endurance-worker-{job.index}", daemon=False)
                           for job in jobs]
            for proc in self._procs:
                proc.start()
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

    def _lost(self, job: ShardJob, proc: Any) -> ShardResult:
        """A worker that exited without reporting (killed, crashed in start-up)."""
        code = proc.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 \
            else f"exit code {code}"
        if self._stopping:
            return ShardResult(job.index, "interrupted", f"worker {job.index} stopped ({how})")
        return ShardResult(job.index, "failed", f"worker {job.index} crashed ({how})")


def _shard_main(job: ShardJob, results: Any) -> None:
    """A worker process: run the shard and report its result (or its crash) to the
    parent. It dies with the parent: a SIGKILLed parent must not leave it running."""
    from simulator.liveness import die_with_parent
    die_with_parent()
    try:
        result = run_shard(job)
    except Exception as exc:  # reported as the shard's failure; the traceback to stderr
        import traceback
        traceback.print_exc()
        result = ShardResult(job.index, "failed", f"worker {job.index} crashed: {exc!r}")
    results.put(result)


def _wait_any(procs: Sequence[Any], timeout_s: float) -> None:
    """Sleep until a worker exits or `timeout_s` passes."""
    from multiprocessing.connection import wait
    wait([p.sentinel for p in procs if p.is_alive()], timeout_s)


class InlineExecutor:
    """Shards one after another in this process (debugging; no parallelism)."""

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
    if spec.endpoint_url is None:
        raise InputError(
            "--workers needs --endpoint: the in-process twin is one simulated card shared "
            "by all sessions, and N processes would each simulate their own card; serve the "
            "twin over HTTP (`endurance twin serve`) and pass its URL as --endpoint")
    if getattr(spec, "resume_dir", None) is not None:
        raise InputError("--workers cannot be combined with --resume")


# -------------------------------------------------------------------- worker side --
def run_shard(job: ShardJob) -> ShardResult:
    """Run one shard in this process; its rows go to `job.shard_dir` (never raises for
    a failed run: the result says how it ended)."""
    from simulator.metrics.recorder import Recorder
    from simulator.runs import make_endpoint, resolve
    from simulator.session.runner import RunOutcome

    spec = dataclasses.replace(job.spec, overrides=[*job.spec.overrides, *job.limit_overrides])
    s, _ = resolve(spec)
    endpoint = make_endpoint(s, spec)
    recorder = Recorder(job.shard_dir, {"run_id": job.run_id, "worker": job.index,
                                        "sessions": [job.start, job.stop],
                                        "pid": os.getpid()})
    outcome = RunOutcome("failed", reason="worker did not start")
    t0 = time.monotonic()
    try:
        t0, outcome = _drive(s, spec, job, endpoint, recorder)
    except KeyboardInterrupt:
        outcome = RunOutcome("interrupted", reason="interrupted")
    finally:
        recorder.finalize(outcome.status, None)
    return ShardResult(job.index, outcome.status, outcome.reason,
                       tuple(outcome.failed_sessions), outcome.deadline_reached,
                       outcome.wall_window_s, t0)


def _drive(s: Scenario, spec: RunSpec, job: ShardJob, endpoint: Any,
           recorder: Recorder) -> tuple[float, RunOutcome]:
    from simulator.runs import run_background
    from simulator.session.runner import Runner
    background, on_finish = run_background(
        endpoint, recorder, spec.endpoint_url if job.scrape_metrics else None)
    kw: dict[str, Any] = {}
    if getattr(spec, "stop_grace_s", None) is not None:
        kw["stop_grace_s"] = spec.stop_grace_s
    runner = Runner(s, endpoint, recorder, job.run_id, background=background,
                    session_range=range(job.start, job.stop), on_finish=on_finish, **kw)

    async def main() -> tuple[float, RunOutcome]:
        t0 = time.monotonic()
        try:
            return t0, await runner.run()
        finally:
            await endpoint.aclose()

    try:
        import uvloop
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as r:
            return r.run(main())
    except ImportError:
        return asyncio.run(main())


# -------------------------------------------------------------------- parent side --
def execute_sharded(spec: RunSpec, workers: int, *, echo: Callable[[str], None] = print,
                    executor: Executor | None = None) -> RunResult:
    """Run `spec` over `workers` shards and merge them into one results directory."""
    from simulator import runs
    from simulator.analysis.summary import format_summary
    from simulator.session.runner import RunOutcome

    check_shardable(spec, workers)
    s, resolved = runs.resolve(spec)
    endpoint = runs.make_endpoint(s, spec)
    assert spec.endpoint_url is not None
    preflight = getattr(runs, "preflight", None)
    if callable(preflight):
        preflight(spec.endpoint_url, s.endpoint.connect_timeout_s)
    run_id = runs.new_run_id(s.name)
    run_dir = spec.out_dir / run_id
    ranges = split_sessions(s.sessions, workers)
    manifest = runs.build_manifest(s, resolved, spec, endpoint, run_id)
    manifest["workers"] = len(ranges)
    recorder = runs.open_recorder(run_dir, manifest, spec.out_dir)
    limits = shard_limits(s, len(ranges))
    jobs = [ShardJob(i, r.start, r.stop, spec, run_id, run_dir / WORKERS_DIR / f"w{i}",
                     i == 0, limits) for i, r in enumerate(ranges)]
    outcome = RunOutcome("failed", reason="workers did not start")
    t0 = time.monotonic()
    try:
        # workers get Ctrl-C themselves (same process group) and stop cleanly
        with runs.signals_handled({signal.SIGINT: signal.SIG_IGN}):
            results = (executor or ProcessExecutor()).run_shards(jobs)
        with runs.signals_deferred():  # a late signal must not tear the merge
            merge_shards(recorder, jobs, results, t0)
        outcome = merge_outcomes(results)
    finally:
        with runs.signals_deferred():
            summary = runs._finish(recorder, endpoint, outcome)
    echo(format_summary(summary))
    if outcome.reason:
        echo(f"status: {outcome.status} ({outcome.reason})")
    return runs.RunResult(run_dir, outcome.status, summary, outcome, recorder.manifest)


def merge_shards(recorder: Recorder, jobs: Sequence[ShardJob],
                 results: Sequence[ShardResult], t0: float) -> None:
    """Copy every shard's journals into the run's, in shard order; `started_mono_s` is
    moved onto the parent's timeline (all workers share the machine's monotonic clock)."""
    from simulator.metrics.recorder import METRICS_JOURNAL, TURNS_JOURNAL, iter_journal
    from simulator.metrics.records import TurnRecord
    for job, res in zip(jobs, results, strict=True):
        shift = (res.t0_mono - t0) if res.t0_mono else 0.0
        for row in iter_journal(job.shard_dir / TURNS_JOURNAL):
            row["started_mono_s"] = row["started_mono_s"] + shift
            recorder.write(TurnRecord(**row))
        for row in iter_journal(job.shard_dir / METRICS_JOURNAL):
            recorder.write_metrics(row)
        write_history = getattr(recorder, "write_history", None)
        history = getattr(_recorder_module(), "HISTORY_JOURNAL", None)
        if callable(write_history) and history:
            for row in iter_journal(job.shard_dir / history):
                write_history(row)


def _recorder_module() -> Any:
    import simulator.metrics.recorder as mod
    return mod


def merge_outcomes(results: Sequence[ShardResult]) -> RunOutcome:
    """One outcome: failed if any shard failed, else interrupted if any was, else
    completed; reasons name their worker."""
    from simulator.session.runner import RunOutcome
    statuses = {r.status for r in results}
    status = next((st for st in ("failed", "interrupted") if st in statuses), "completed")
    reasons = [f"worker {r.index}: {r.reason}" for r in results if r.reason]
    return RunOutcome(status=status, reason="; ".join(reasons),
                      failed_sessions=[sid for r in results for sid in r.failed_sessions],
                      deadline_reached=any(r.deadline_reached for r in results),
                      wall_window_s=max((r.wall_window_s for r in results), default=0.0))
