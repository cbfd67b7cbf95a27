"""Driving a run's sessions in this process: the one-process environment.

`drive_sessions` runs the sessions of an opened run (all, or one shard's range) on
this process's event loop — the virtual-time loop for the in-process twin, uvloop or
asyncio against a real server — with the run's background tasks (the twin's engine
driver, a /metrics scraper) and a progress view. A sharded run (`run.shards`) calls it
once per worker.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING

from simulator.analysis.early_verdict import EarlyVerdict
from simulator.clock import RunClock
from simulator.clock.virtual import run_virtual
from simulator.endpoints.base import Endpoint, EngineEndpoint
from simulator.endpoints.routed import RoutedEndpoint
from simulator.records.prometheus import Health, MetricsRow, MetricsScraper, metrics_url_for
from simulator.records.recorder import Recorder, prewarm_finalize
from simulator.run.observe import InProcessFeed
from simulator.run.prepare import OpenedRun
from simulator.scenario.model import Scenario
from simulator.session.runner import STOP_GRACE_S, Runner, RunOutcome, warm_start_turn
from simulator.util.jsontypes import JSONObject

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn

SCRAPE_INTERVAL_S = 5.0  # how often a real server's /metrics is read during a run
TELEMETRY_EVENT = "telemetry"   # a --scrape target's health as its scraper ends

Background = list[Callable[[], Coroutine[object, None, object]]]


def _background(endpoint: Endpoint, recorder: Recorder, metrics_url: str | None,
                clock: RunClock, extra: Sequence[str] = ()
                ) -> tuple[Background, list[Callable[[], None]], Background]:
    """The run's background tasks, their stop hooks and what the first session waits
    for: the endpoint's own tasks (the twin's engine driver) and, against the server at
    `metrics_url` and each `extra` target, a /metrics scraper (its baseline first)."""
    background: Background = []
    if isinstance(endpoint, EngineEndpoint):
        background.extend(endpoint.background())
    scrapers: list[MetricsScraper] = []
    if metrics_url is not None:
        # a client-routed fleet: each URL's /metrics, rows tagged with the replica
        urls = endpoint.replica_urls if isinstance(endpoint, RoutedEndpoint) else []
        targets = [metrics_url_for(u) for u in urls] if len(urls) > 1 else [metrics_url]
        scrapers += [metrics_scraper(url, recorder, clock,
                                     replica=str(i) if len(targets) > 1 else None)
                     for i, url in enumerate(targets)]
    for url in extra:      # --scrape: GPU telemetry beside the server's own metrics
        scrapers.append(metrics_scraper(url, recorder, clock, source=target_label(url)))
    background += [s.run for s in scrapers]
    return background, [s.stop for s in scrapers], [s.ready for s in scrapers]


def target_label(url: str) -> str:
    """How a `--scrape` target is named in its rows and figures: host:port/path."""
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 80}{parts.path or ''}"


def metrics_scraper(metrics_url: str, recorder: Recorder, clock: RunClock,
                    replica: str | None = None, source: str | None = None) -> MetricsScraper:
    """A scraper of `metrics_url` into `recorder`: as often in simulated time as a real
    server is scraped (no faster than 0.5 s); the recorder writes the windows in
    simulated seconds, like the turn rows. `source` names a `--scrape` target (GPU
    telemetry) in its rows; it is scraped as often in wall time as a real server."""
    interval = max(clock.to_loop(SCRAPE_INTERVAL_S), min(0.5, SCRAPE_INTERVAL_S))
    tag = {k: v for k, v in (("replica", replica), ("source", source)) if v is not None}

    def sink(rows: list[MetricsRow]) -> None:
        for row in rows:
            recorder.write_metrics({**row, **tag} if tag else row)

    def ended(health: Health) -> None:
        # a --scrape target's health goes to events.jsonl: the run's `telemetry` block
        # (`run/finish.py`) is built from it, shards' events included
        recorder.write_event({"event": TELEMETRY_EVENT, "source": source, **health})

    return MetricsScraper(metrics_url, SCRAPE_INTERVAL_S if source else interval, sink,
                          on_end=ended if source is not None else None)


def drive_sessions(run: OpenedRun, *, sessions: range | None = None, scrape: bool = True,
                   progress: bool = True,
                   started: Callable[[], None] | None = None) -> RunOutcome:
    """Run the sessions of `run` (all, or the shard `sessions`) in this process on its
    own event loop — the virtual-time loop for the in-process twin — and return how it
    ended. `scrape`: this process reads the server's /metrics; `started()` is called
    as the loop starts."""
    s, spec, endpoint, recorder = run.scenario, run.spec, run.endpoint, run.recorder
    clock = run.server.clock()
    background, on_finish, on_start = _background(
        endpoint, recorder, run.server.metrics_url if scrape else None, clock,
        spec.scrape_urls if scrape else ())
    # the live view (`run/observe.py`): the dashboard, a status line, the exporter's feed
    feed = InProcessFeed(run.live, recorder, clock, endpoint) if progress and run.live \
        else None
    show_bar = progress and spec.show_progress and spec.progress in ("auto", "bar") \
        and feed is None and sys.stderr.isatty()
    bar = ProgressBar(progress_total(s), show_bar, duration_s=s.load.duration_s, clock=clock)
    if feed is not None:
        background.append(feed.tick)
    with bar as advance:
        grace = STOP_GRACE_S if spec.stop_grace_s is None else spec.stop_grace_s
        runner = Runner(s, endpoint, recorder, run.run_id, progress=advance,
                        background=background, on_finish=on_finish, on_start=on_start,
                        stop_grace_s=grace, resume=run.state, clock=clock,
                        session_range=sessions)
        if feed is not None:
            feed.view.gauges = runner.live_gauges
        if spec.early is not None:
            _stop_when_decided(recorder, runner, spec.early.verdict())

        async def main() -> RunOutcome:
            bar.start_clock()
            if feed is not None:
                feed.start()
            if started is not None:
                started()
            try:
                return await runner.run()
            finally:
                await endpoint.aclose()
                if feed is not None:
                    feed.close()

        # What finalize needs is imported now, on this thread, before the first request:
        # a stop then finds it loaded (a second Ctrl-C never waits for imports), and no
        # import ever runs on a background thread (that raced circular imports, issue 23).
        prewarm_finalize()
        if endpoint.simulated:
            return run_virtual(main())
        return _run_real(main())


def _stop_when_decided(recorder: Recorder, runner: Runner, verdict: EarlyVerdict) -> None:
    """Each journaled row feeds the verdict; once it is decided the run stops."""
    def listen(row: JSONObject) -> None:
        reason = verdict.feed(row)
        if reason is not None:
            runner.stop_early(reason)
    recorder.subscribe(listen)


def _run_real(coro: Coroutine[object, None, RunOutcome]) -> RunOutcome:
    try:
        import uvloop
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as r:
            return r.run(coro)
    except ImportError:
        return asyncio.run(coro)


def progress_total(s: Scenario) -> int:
    """Turns a fixed-turn run will send: N × turns, less the turns a warm start skips
    (each session begins at its seeded turn). Constant-load runs count time instead."""
    if s.load.warm_start and s.replay is None:
        return sum(s.turns - warm_start_turn(s.seed, i, s.turns) for i in range(s.sessions))
    return s.sessions * s.turns


class ProgressBar:
    """A rich progress bar on stderr (a no-op when not a terminal). Fixed-turn runs
    count turns; constant-load runs (`duration_s`) count the run's clock (virtual
    seconds on the twin) against the duration, the turns done shown beside it."""

    def __init__(self, total: int, enabled: bool, duration_s: float | None = None,
                 clock: RunClock | None = None) -> None:
        self.total, self.enabled, self.duration_s = total, enabled, duration_s
        self.clock = clock or RunClock()
        self._bar: Progress | None = None
        self._t0: float | None = None

    def start_clock(self) -> None:
        """Call inside the run's event loop as it starts: the duration counts from here."""
        self._t0 = asyncio.get_running_loop().time()

    def _elapsed(self) -> float:
        if self._t0 is None or self.duration_s is None:
            return 0.0
        return min(self.duration_s,
                   self.clock.to_sim(asyncio.get_running_loop().time() - self._t0))

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda n: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        if self.duration_s is not None:
            cols: tuple[ProgressColumn, ...] = (
                TextColumn("constant load"), BarColumn(),
                TextColumn("{task.completed:,.0f}/{task.total:,.0f} s"),
                TextColumn("{task.fields[turns]} turns, {task.fields[tok]} output tokens"))
            total: float = self.duration_s
        else:
            cols = (TextColumn("turns"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[tok]} output tokens"))
            total = self.total
        bar = self._bar = Progress(*cols, TimeElapsedColumn(), transient=True)
        bar.start()
        task = bar.add_task("run", total=total, tok=0, turns=0)
        state = {"tok": 0, "turns": 0}

        def advance(n: int) -> None:
            state["tok"] += n
            state["turns"] += 1
            if self.duration_s is None:
                bar.update(task, advance=1, tok=state["tok"])
            else:
                bar.update(task, completed=self._elapsed(), tok=state["tok"],
                                 turns=state["turns"])
        return advance

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
