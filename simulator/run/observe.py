"""Watching a run while it runs: its live view and the load generator's own /metrics.

`observed(run)` wraps a run from the moment its directory is open until its summary is
written: it makes the run's `LiveView` (`live/view.py`: the dashboard, a plain status
line, or nothing) and, with `--metrics-port`, serves the run's Prometheus series
(`live/exporter.py`), kept up `--metrics-hold` seconds after the run so a scrape sees
the final counters. The drive feeds the view: a one-process run from the recorder's
listeners (`feed_in_process`), a sharded run's parent from its shards' journals
(`follow_shards`). Neither ever changes what is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.clock import RunClock
from simulator.endpoints.base import SampledEngine
from simulator.records.recorder import TURNS_JOURNAL, Recorder, iter_journal

# The live view's modules (`simulator.live`) load where a view is made, the exporter's
# with --metrics-port, the follower with a sharded run's view: a run that draws nothing
# (--progress off or bar, --quiet, a library call) loads none of them.
if TYPE_CHECKING:
    from simulator.live.exporter import MetricsServer, RunMetrics
    from simulator.live.view import LiveView
    from simulator.run.prepare import OpenedRun

FOLLOW_POLL_S = 0.5      # how often a sharded run's parent reads its shards' journals


def make_view(run: OpenedRun, metrics: RunMetrics | None = None) -> LiveView | None:
    """The run's live view (None when nothing is shown and nothing is exported)."""
    spec = run.spec
    mode = spec.progress if spec.show_progress else "off"
    if mode in ("off", "bar") and metrics is None:
        return None     # as `resolve_mode` keeps them, without loading the view
    # deferred: the live view loads only when it draws
    from simulator.live.view import LiveView, header_for, plan_from_manifest, resolve_mode
    if resolve_mode(mode, sys.stderr.isatty()) in ("off", "bar") and metrics is None:
        return None
    manifest = run.recorder.manifest
    return LiveView(mode if mode != "bar" else "off", header=header_for(manifest),
                    plan=plan_from_manifest(manifest), metrics=metrics,
                    every_s=spec.progress_every_s)


@contextlib.contextmanager
def observed(run: OpenedRun, echo: Callable[[str], None]) -> Iterator[None]:
    """The run's view and exporter for the block (see the module docstring)."""
    spec = run.spec
    metrics: RunMetrics | None = None
    server: MetricsServer | None = None
    if spec.metrics_port is not None:
        # deferred: the exporter (prometheus_client) loads with --metrics-port only
        from simulator.live.exporter import MetricsServer, RunMetrics, parse_bind
        host, port = parse_bind(spec.metrics_port)
        metrics = RunMetrics(run.run_id, run.scenario.name,
                             simulated=bool(run.server.simulated or run.endpoint.simulated),
                             target=run.recorder.manifest.endpoint.url or "twin")
        try:
            server = MetricsServer(metrics, port, host)
        except OSError as exc:
            from simulator.errors import InputError  # deferred: only on this error path
            raise InputError(f"--metrics-port {spec.metrics_port}: cannot listen: "
                             f"{exc.strerror or exc}") from None
        echo(f"metrics: {server.url} (run {run.run_id})")
    run.live = make_view(run, metrics)
    try:
        yield
    finally:
        run.live = None
        if server is not None:
            try:
                hold(spec.metrics_hold_s, server.url, echo)
            finally:
                server.close()


def hold(seconds: float, url: str, echo: Callable[[str], None]) -> None:
    """Keep the exporter up `seconds` after the run (Ctrl-C or SIGTERM ends the wait)."""
    if seconds <= 0:
        return
    echo(f"metrics: {url} stays up {seconds:g} s (Ctrl-C to leave now)")
    done = threading.Event()
    previous = [(sig, signal.signal(sig, lambda *_: done.set()))
                for sig in (signal.SIGINT, signal.SIGTERM)] \
        if threading.current_thread() is threading.main_thread() else []
    try:
        done.wait(seconds)
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)


# ----------------------------------------------------------------- one process --
class InProcessFeed:
    """The view fed from this process's recorder; `tick` redraws on the run's loop."""

    def __init__(self, view: LiveView, recorder: Recorder, clock: RunClock,
                 engine: object = None) -> None:
        self.view, self.clock = view, clock
        self._t0: float | None = None
        # the in-process twin has no /metrics: its engine log is read as it grows
        self._engine = engine if isinstance(engine, SampledEngine) else None
        self._windows = 0
        # ENDURANCE_LIVE_CPU=1 (benchmarks/live_overhead.py): the CPU the view itself
        # takes on the run's thread, reported to stderr at the end
        self.cpu_ns: int | None = 0 if os.environ.get("ENDURANCE_LIVE_CPU") == "1" else None
        self._cpu0 = time.process_time_ns()
        recorder.subscribe(self._row)
        recorder.subscribe_metrics(view.metrics_row)
        recorder.subscribe_events(view.event)

    def start(self) -> None:
        """Call on the run's loop as it starts: the run's clock counts from here."""
        self._t0 = asyncio.get_running_loop().time()
        self.view.start()

    def now_s(self) -> float:
        if self._t0 is None:
            return 0.0
        return self.clock.to_sim(asyncio.get_running_loop().time() - self._t0)

    def _row(self, row: Mapping[str, object]) -> None:
        t = time.thread_time_ns() if self.cpu_ns is not None else 0
        self.view.row(row)
        if self.view.due():
            self._refresh()
        if self.cpu_ns is not None:
            self.cpu_ns += time.thread_time_ns() - t

    def refresh(self) -> None:
        t = time.thread_time_ns() if self.cpu_ns is not None else 0
        self._refresh()
        if self.cpu_ns is not None:
            self.cpu_ns += time.thread_time_ns() - t

    def _refresh(self) -> None:
        if self._engine is not None:
            rows, self._windows = self._engine.timeline_since(self._windows)
            for m in rows:
                self.view.metrics_row(m)
        self.view.refresh(self.now_s())

    async def tick(self) -> None:
        """Redraw while no row arrives (long turns against a real server)."""
        while True:
            await asyncio.sleep(self.view.every_s / 2)
            if self.view.due():
                self.refresh()

    def close(self) -> None:
        last = self.view.figures.run_figures()
        end = (last.wall_window_s or 0.0)
        with contextlib.suppress(RuntimeError):     # no running loop: the run's end
            end = max(end, self.now_s())
        self.view.close(end)
        if self.cpu_ns is not None:
            m = self.view.metrics
            scrape = m.collect_ns if m is not None else 0
            total = time.process_time_ns() - self._cpu0
            print(f"live view CPU: {self.cpu_ns / 1e6:.1f} ms on the run's thread, "
                  f"{scrape / 1e6:.1f} ms serving scrapes, of {total / 1e6:.1f} ms of the "
                  f"process's CPU while it ran; {last.output_tokens} output tokens",
                  file=sys.stderr, flush=True)


# ----------------------------------------------------------------- sharded -------
@contextlib.contextmanager
def follow_shards(view: LiveView | None, run_dir: Path) -> Iterator[Callable[[], None]]:
    """While the block runs (the shards), a thread follows their journals into the
    view. Yields `finish()`: call it once the shards are merged — the final frame is
    drawn from the merged journal, so it shows the run's own figures."""
    if view is None:
        yield lambda: None
        return
    from simulator.live.follow import RunFollower  # deferred: only with a view to feed
    follower = RunFollower(run_dir)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            view.feed(follower.poll())
            view.refresh(follower.now_s())
            stop.wait(FOLLOW_POLL_S)

    view.warm_up()       # rich's first-use imports on this (the main) thread
    view.start()
    thread = threading.Thread(target=loop, name="endurance-live", daemon=True)
    thread.start()

    def finish() -> None:
        stop.set()
        thread.join(10)
        view.figures.rebuild(iter_journal(run_dir / TURNS_JOURNAL))
        view.close(view.figures.run_figures().wall_window_s or follower.now_s())

    try:
        yield finish
    finally:
        if not stop.is_set():
            stop.set()
            thread.join(10)
            view.close(follower.now_s(), final=False)

