"""A live view of one run: rows in, the dashboard or a status line out, the exporter fed.

`LiveView` is what `endurance run` (in this process or the parent of a sharded run),
`endurance watch` and a sweep's running point share: rows, /metrics windows and
events go in (`row`, `metrics_row`, `event`); `refresh(now_s)` redraws at most once a
second of wall time, whatever the row rate; `close` leaves the final frame.

Modes (`--progress`): `dashboard` — a rich `Live` on stderr, only when stderr is a
terminal (asked for on a pipe or a file, it becomes `plain`: the dashboard never writes
escape codes to a pipe); `plain` — one status line every `every_s` seconds of wall
time; `bar` — the turns progress bar (`run.drive.ProgressBar`, not this class); `off`.
`auto` (the default) is `dashboard` on a terminal and `plain` elsewhere.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING

from simulator.analysis.target import describe_target
from simulator.live.dashboard import final_line, render, status_line
from simulator.live.figures import LiveFigures, LiveSnapshot, SteadyPlan
from simulator.records.manifest import Manifest, ResolvedScenario

if TYPE_CHECKING:       # types only
    from rich.live import Live

    from simulator.live.follow import Batch

if TYPE_CHECKING:       # the exporter (prometheus_client) loads with --metrics-port only
    from simulator.live.exporter import RunMetrics

MODES = ("auto", "dashboard", "bar", "plain", "off")
REFRESH_S = 1.0          # the dashboard redraws at most this often (wall seconds)
PLAIN_EVERY_S = 30.0     # a status line this often on a non-terminal (wall seconds)


def resolve_mode(mode: str, isatty: bool) -> str:
    """The mode a view runs in on this stream: never the dashboard on a non-terminal."""
    if mode not in MODES:
        raise ValueError(f"--progress {mode!r}: expected one of {', '.join(MODES)}")
    if mode in ("auto", "dashboard"):
        return "dashboard" if isatty else "plain"
    if mode == "bar" and not isatty:
        return "off"
    return mode


def plan_from_manifest(manifest: Manifest) -> SteadyPlan:
    """What the run's steady-state window waits for, from its manifest."""
    resolved = manifest.scenario_resolved or ResolvedScenario()
    load = resolved.load
    return SteadyPlan(manifest.sessions or resolved.sessions or 1, resolved.turns or 1,
                      load.duration_s, load.warmup_s, load.cooldown_s,
                      ramp=load.ramp is not None)


def header_for(manifest: Manifest, what: str = "run") -> list[str]:
    """The dashboard's first line: the run and what it runs against."""
    run_id = manifest.run_id if manifest.run_id is not None else "?"
    return [f"endurance {what} {run_id} — {describe_target(manifest)}"]


class LiveView:
    def __init__(self, mode: str, *, header: Sequence[str] = (),
                 plan: SteadyPlan | None = None, metrics: RunMetrics | None = None,
                 stream: IO[str] | None = None, every_s: float = PLAIN_EVERY_S,
                 refresh_s: float = REFRESH_S, prefix: str = "[endurance] ",
                 wall: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.mode = resolve_mode(mode, isatty)
        self.header = list(header)
        self.prefix = prefix          # a plain line's start
        self.figures = LiveFigures(plan)
        self.metrics = metrics
        self.every_s = every_s if self.mode == "plain" else refresh_s
        self._wall = wall
        self._last = wall()
        self._live: Live | None = None
        self.gauges: Callable[[], Mapping[str, int]] | None = None   # in-flight, waiting
        self.last_snapshot: LiveSnapshot | None = None
        self.frames = 0

    @property
    def shows(self) -> bool:
        """Whether anything is drawn (the exporter is fed either way)."""
        return self.mode in ("dashboard", "plain")

    def warm_up(self) -> None:
        """Draw one frame into nothing, on the calling thread: what rich imports on
        first use is then loaded before a view draws from another thread (issue 23:
        no import on a background thread)."""
        import io

        from rich.console import Console
        from rich.live import Live  # noqa: F401  (loaded here, used by start)
        Console(file=io.StringIO(), force_terminal=True, width=120).print(
            render(self.figures.snapshot(0.0), ["warm-up"]))

    def start(self) -> None:
        if self.mode != "dashboard":
            return
        from rich.console import Console
        from rich.live import Live
        console = Console(file=self.stream)
        self._live = Live(console=console, auto_refresh=False, transient=False,
                          redirect_stdout=False, redirect_stderr=False)
        self._live.start()

    # ------------------------------------------------------------------ in
    def row(self, row: Mapping[str, object]) -> None:
        self.figures.add_row(row)
        if self.metrics is not None:
            self.metrics.observe(row)

    def metrics_row(self, row: Mapping[str, object]) -> None:
        self.figures.add_metrics(row)

    def event(self, row: Mapping[str, object]) -> None:
        self.figures.add_event(row)

    def feed(self, batch: Batch) -> None:
        """A journal follower's batch (`records` RunFollower.poll): its rows, metrics
        rows and events, in that order."""
        for row in batch.rows:
            self.row(row)
        for m in batch.metrics:
            self.metrics_row(m)
        for e in batch.events:
            self.event(e)

    # ------------------------------------------------------------------ out
    def due(self) -> bool:
        return self._wall() - self._last >= self.every_s

    def refresh(self, now_s: float, *, force: bool = False) -> LiveSnapshot | None:
        """Redraw if a refresh is due (or `force`); the snapshot drawn, else None."""
        if not force and not self.due():
            return None
        self._last = self._wall()
        live = dict(self.gauges()) if self.gauges is not None else {}
        snap = self.figures.snapshot(now_s, live)
        self.last_snapshot = snap
        if self.metrics is not None:
            self.metrics.set_gauges(snap.sessions_active, live.get("in_flight"))
        if self.mode == "dashboard" and self._live is not None:
            self._live.update(render(snap, self.header), refresh=True)
            self.frames += 1
        elif self.mode == "plain":
            print(status_line(snap, self.prefix), file=self.stream, flush=True)
            self.frames += 1
        return snap

    def close(self, now_s: float, *, final: bool = True) -> LiveSnapshot:
        """The last frame (the whole run's figures) and the end of the live display."""
        snap = self.figures.snapshot(now_s, {})
        self.last_snapshot = snap
        if self.metrics is not None:
            self.metrics.set_gauges(snap.sessions_active, 0)
        if self._live is not None:
            self._live.update(render(snap, self.header), refresh=True)
            self._live.stop()
            self._live = None
        elif self.mode == "plain" and final:
            print(self.prefix + final_line(snap.run), file=self.stream, flush=True)
        return snap
