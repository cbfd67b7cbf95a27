"""The second half of every run: finalize on every exit path, summary, report.

`run_to_end` runs a drive and, whatever happens (completed, Ctrl-C, a failure, a full
disk), finalizes the directory with its summary; `finish_run` is the one place a run's
figures are built (`RunSummary.build`) and written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from simulator.analysis.run_summary import RunFacts, RunSummary
from simulator.endpoints.base import EngineEndpoint
from simulator.errors import RunError
from simulator.records.recorder import (
    EVENTS_JOURNAL,
    Recorder,
    iter_journal,
    read_journal,
    salvage_failed,
)
from simulator.run.prepare import OpenedRun, describe_os_error
from simulator.run.signals import signals_deferred
from simulator.run.spec import RunResult
from simulator.session.runner import RunOutcome

if TYPE_CHECKING:       # a type only: pandas loads with the finalize
    import pandas as pd


def run_to_end(run: OpenedRun, drive: Callable[[], RunOutcome],
               echo: Callable[[str], None]) -> RunResult:
    """`drive()` runs the sessions (here or in shards); whatever happens, the directory
    is finalized with its summary, then reported."""
    outcome = RunOutcome("failed", reason="run did not start")
    summary: RunSummary | None = None
    try:
        outcome = drive()
    except KeyboardInterrupt:
        outcome = RunOutcome("interrupted", reason="interrupted")
    except Exception as exc:
        err = first_os_error(exc)
        if err is None:
            raise
        outcome = RunOutcome("failed", reason=f"cannot write results: {describe_os_error(err)}")
    finally:
        with signals_deferred():      # a second Ctrl-C must not tear the finalize
            summary = finish_or_fail(run, outcome)
    assert summary is not None
    # deferred (as below): pandas and the analysis load with the finalize, never before
    # a run starts (`prewarm_finalize` imports them on the run's thread first)
    from simulator.analysis.target import describe_target
    from simulator.report.console import format_ramp, format_summary, format_telemetry
    echo(format_summary(summary, describe_target(run.recorder.manifest)))
    for line in format_telemetry(summary.facts.get("telemetry") or []):
        echo(line)
    if summary.get("ramp"):
        echo(format_ramp(summary["ramp"], bool(summary.get("simulated"))))
    if summary.get("bench"):
        from simulator.analysis.bench import format_bench  # deferred: see above
        echo(format_bench(summary["bench"], bool(summary.get("simulated"))))
    if outcome.reason:
        echo(f"status: {outcome.status} ({outcome.reason})")
    return RunResult(run.run_dir, outcome.status, summary, outcome, run.recorder.manifest)


def first_os_error(exc: BaseException) -> OSError | None:
    """The first OSError inside `exc` (possibly nested exception groups), or None."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            if (found := first_os_error(sub)) is not None:
                return found
    return None


def finish_or_fail(run: OpenedRun, outcome: RunOutcome) -> RunSummary:
    """`finish_run`, or — when the disk is full or gone — the manifest marked failed (if it
    can still be written) and one RunError line; the journaled rows stay as they are."""
    recorder = run.recorder
    try:
        return finish_run(run, outcome)
    except OSError as exc:
        reason = f"cannot write results: {describe_os_error(exc)}"
        if outcome.reason and outcome.reason != reason:
            reason = f"{outcome.reason}; {reason}"
        recorder.manifest = replace(recorder.manifest, status="failed", status_reason=reason)
        salvage_failed(recorder.run_dir, reason)
        raise RunError(f"{recorder.run_dir}: {reason}; status failed, journaled rows kept") \
            from None


def finish_run(run: OpenedRun, outcome: RunOutcome) -> RunSummary:
    """Summarise from the journal and finalize the directory (never raises past it).
    The label (simulated, the twin, its time scale) comes from the run's `server`
    facts; the steady-state window, the goodput SLO and a ramp's plan from its
    scenario, as the run resolved it when it opened."""
    recorder, endpoint, server, s = run.recorder, run.endpoint, run.server, run.scenario
    # deferred: pandas, see run_to_end
    from simulator.analysis.fleet import fleet_summary
    from simulator.analysis.goodput import goodput_slo
    from simulator.analysis.steady import steady_config
    engine = endpoint if isinstance(endpoint, EngineEndpoint) else None  # the in-process twin
    if engine is not None:
        for row in engine.timeline_rows():
            recorder.write_metrics(row)
    turns, scraped = recorder.frames()
    telemetry = telemetry_of(recorder)
    if telemetry:
        recorder.manifest = replace(recorder.manifest, telemetry=tuple(telemetry))
    stats = engine.stats() if engine is not None else None   # typed fields + host tier / fleet
    simulated = server.simulated or endpoint.simulated   # a simulated endpoint never loses it
    built = RunSummary.build(turns, price_per_hour=recorder.manifest.price_per_hour,
                             simulated=simulated, server_metrics=scraped,
                             engine_stats=stats,
                             steady=steady_config(s.sessions, s.load, outcome.deadline_reached),
                             goodput=goodput_slo(s.goodput),
                             telemetry=telemetry)
    built = built.with_run_facts(RunFacts(
        status=outcome.status, status_reason=outcome.reason,
        failed_sessions=outcome.failed_sessions, deadline_reached=outcome.deadline_reached,
        run_id=run.run_id, simulated=simulated,
        contains_verbatim_content=s.contains_verbatim_content,
        twin=dict(server.twin or {}) if server.http_twin or server.simulated else None,
        time_scale=server.time_scale if server.http_twin else None))
    if telemetry:
        built = built.with_facts(telemetry=telemetry)
    fleet = fleet_summary(turns, stats, scraped)
    if fleet is not None:
        built = built.with_facts(fleet=fleet)
    ramp = ramp_fact(run, turns, built)
    if ramp is not None:
        built = built.with_facts(ramp=ramp)
    if s.bench is not None:       # the benchmark shape: vLLM's figures (analysis/bench.py)
        from simulator.analysis.bench import bench_figures  # deferred: see run_to_end
        built = built.with_facts(bench={"shape": s.bench.describe(),
                                        **bench_figures(turns, s.bench.warmups)})
    recorder.manifest = replace(recorder.manifest, status_reason=outcome.reason,
                                failed_sessions=tuple(outcome.failed_sessions))
    recorder.finalize(outcome.status, built.to_json(), (turns, scraped))
    return built


def telemetry_of(recorder: Recorder) -> list[dict[str, object]]:
    """The run's `telemetry` block: how each --scrape target fared (its scrapers'
    health events, `analysis.energy.telemetry_block`); [] without a target."""
    path = recorder.run_dir / EVENTS_JOURNAL
    if not path.exists():
        return []
    from simulator.analysis.energy import telemetry_block  # deferred: see run_to_end
    return telemetry_block(iter_journal(path))


def ramp_fact(run: OpenedRun, turns: pd.DataFrame,
              summary: RunSummary) -> dict[str, object] | None:
    """A stepped ramp's `ramp` fact (`analysis.ramp.ramp_summary`) from its events and
    rows; None for a run without a ramp."""
    ramp = run.scenario.load.ramp
    if ramp is None:
        return None
    # deferred: pandas, see run_to_end
    from simulator.analysis.goodput import goodput_slo
    from simulator.analysis.ramp import plan_of, ramp_summary
    events = [e for e in read_journal(run.run_dir / EVENTS_JOURNAL)
              if e.get("event") == "ramp_step"] \
        if (run.run_dir / EVENTS_JOURNAL).exists() else []
    return ramp_summary(turns, events, plan_of(ramp.model_dump()), ramp.hold_s,
                        goodput_slo(run.scenario.goodput),
                        end_s=summary.get("wall_window_s"))
