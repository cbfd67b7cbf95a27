"""One run, end to end: `execute(spec)` → a results directory and its `RunResult`.

Every run is put together by the same three calls: `prepare.open_run` (pre-flight, the
server's facts probed once, manifest, recorder), a drive and `finish.run_to_end`
(finalize, summary, report). The drive is a value, not a branch: `InProcess` runs the
sessions on this process's loop (`drive.drive_sessions`), `shards.Sharded` splits them
over worker processes or Ray tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from simulator.endpoints.base import Endpoint
from simulator.records.manifest import Manifest
from simulator.run.drive import drive_sessions
from simulator.run.finish import run_to_end
from simulator.run.observe import observed
from simulator.run.prepare import OpenedRun, open_run
from simulator.run.signals import sigterm_as_interrupt
from simulator.run.spec import RunResult, RunSpec, base_endpoint_url, check_spec_numbers
from simulator.scenario.model import Scenario
from simulator.session.runner import RunOutcome


class Drive(Protocol):
    """Where a run's sessions run. `check` refuses a spec it cannot drive (before
    anything is opened); `manifest_extra` adds its facts to the manifest."""

    def check(self, spec: RunSpec) -> None: ...

    def manifest_extra(self, s: Scenario, manifest: Manifest) -> Manifest: ...

    def __call__(self, run: OpenedRun) -> RunOutcome: ...


class InProcess:
    """Every session on this process's event loop (the virtual-time loop for the twin)."""

    def check(self, spec: RunSpec) -> None:
        return None

    def manifest_extra(self, s: Scenario, manifest: Manifest) -> Manifest:
        return manifest

    def __call__(self, run: OpenedRun) -> RunOutcome:
        return drive_sessions(run)


def normalise_urls(spec: RunSpec, echo: Callable[[str], None]) -> RunSpec:
    """The spec with base URLs (a URL naming the API path is cut back, with a note);
    several URLs: a client-routed fleet, the first URL leads."""
    if spec.endpoint_url is not None:
        base, note = base_endpoint_url(spec.endpoint_url)
        if note is not None:
            echo(note)
            spec = replace(spec, endpoint_url=base)
    if len(spec.endpoint_urls) > 1:
        urls = tuple(base_endpoint_url(u)[0] for u in spec.endpoint_urls)
        spec = replace(spec, endpoint_url=urls[0], endpoint_urls=urls)
    return spec


def execute(spec: RunSpec, *, echo: Callable[[str], None] = print,
            endpoint: Endpoint | None = None, drive: Drive | None = None) -> RunResult:
    """Run a scenario and write its results directory; returns what happened.

    `endpoint` replaces the one the spec names (tests and notebooks inject fakes);
    `drive` says where the sessions run (default: this process). Called from a thread
    that runs an event loop (a Jupyter kernel does), the run — which starts its own
    loop — happens in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="endurance-run") as pool:
            return pool.submit(execute, spec, echo=echo, endpoint=endpoint,
                               drive=drive).result()
    drive = drive or InProcess()
    spec = normalise_urls(spec, echo)
    check_spec_numbers(spec)
    drive.check(spec)
    # From the moment the results directory exists, SIGTERM ends the run as Ctrl-C does
    # (status interrupted), never as the default kill that leaves it `running`; the
    # runner's own handlers (or a sharded drive's executor) take over while it runs.
    with sigterm_as_interrupt():
        run = open_run(spec, endpoint, extra=drive.manifest_extra)
        for line in run.state.notes if run.state is not None else ():
            echo(line)      # what a resume changed in the journals it reopened
        with observed(run, echo):      # the live view and the exporter, if asked for
            return run_to_end(run, lambda: drive(run), echo)
