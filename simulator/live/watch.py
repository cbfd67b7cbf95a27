"""`endurance watch`: the live view of a run directory, and of a sweep's running point.

* A running run is followed (`follow`): its journals are read as they grow
  (`live/follow.py`, read-only, no lock taken), a `--workers` run's and Ray shards'
  included, until its manifest says it ended and its summary is written; the last
  frame is then built from its merged journal, so it shows the run's own figures.
* A finished run is replayed (`replay`): its rows are fed in the order their requests
  ended, the run's clock advancing `speed` run seconds per wall second (by default so
  the replay lasts about `REPLAY_S`), and the last frame is the run's final figures.
* A sweep or size folder (`FolderWatch`): the point being run is followed as above,
  under a header with the search's state — each finished point's label, status and
  figures from its summary.json.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from simulator.errors import InputError
from simulator.live.figures import LiveSnapshot
from simulator.live.follow import (
    JournalTail,
    RunFollower,
    file_problem,
    manifest_now,
    manifest_problem,
    run_dirs_in,
)
from simulator.live.view import LiveView, header_for, plan_from_manifest
from simulator.records.manifest import Manifest
from simulator.records.ownership import live_owner
from simulator.records.recorder import (
    EVENTS_JOURNAL,
    METRICS_JOURNAL,
    SUMMARY,
    TURNS_JOURNAL,
)
from simulator.util.jsontypes import JSONObject
from simulator.util.numbers import to_float

POLL_S = 0.5           # how often a followed run's journals are read (wall seconds)
REPLAY_S = 10.0        # a finished run replays in about this long by default
REPLAY_FRAME_S = 0.25  # a replay's frame period (wall seconds)
WAIT_SUMMARY_S = 30.0  # after the manifest ends, how long summary.json may take


def view_for(run_dir: Path, mode: str, stream: IO[str], every_s: float,
             header: list[str] | None = None, prefix: str = "[endurance] ") -> LiveView:
    manifest = manifest_now(run_dir) or Manifest()
    return LiveView(mode, header=header if header is not None else header_for(
        manifest, "watch"), plan=plan_from_manifest(manifest), stream=stream,
        every_s=every_s, prefix=prefix)


def writer_alive(run_dir: Path) -> bool:
    """Whether the process writing the run (or, sharded, one of its workers) lives."""
    return live_owner(run_dir) is not None or any(
        live_owner(d) is not None for d in run_dir.glob("workers/**/w*"))


def follow(run_dir: Path, view: LiveView, *, poll_s: float = POLL_S,
           stop: Callable[[], bool] = lambda: False, check_writer: bool = True,
           note: Callable[[str], None] = lambda _line: None) -> LiveSnapshot:
    """Follow a running run to its end (or until `stop()`, or until its writer is gone
    with `check_writer`); the final snapshot."""
    follower = RunFollower(run_dir)
    ended_at: float | None = None
    gone = 0
    told = False
    while not stop():
        view.feed(follower.poll())
        if follower.corrupt is not None and not told:
            told = True
            note(f"{follower.corrupt}: not shown; `run --resume` refuses it")
        view.refresh(follower.now_s())
        if follower.status() != "running":
            ended_at = ended_at or time.monotonic()
            if (run_dir / SUMMARY).exists() or time.monotonic() - ended_at > WAIT_SUMMARY_S:
                break
        elif check_writer:
            gone = 0 if writer_alive(run_dir) else gone + 1
            if gone >= 3:     # three polls in a row: not a start-up or finalize race
                note(f"{run_dir}: its status is running but no process writes it "
                     "(killed?); `endurance run --resume` continues it")
                break
        time.sleep(poll_s)
    view.feed(follower.poll())
    # the last frame from the run's own journal (a sharded run's merged rows)
    view.figures.rebuild(JournalTail(run_dir / TURNS_JOURNAL).read_all())
    return view.close(view.figures.run_figures().wall_window_s or follower.now_s())


def replay(run_dir: Path, view: LiveView, speed: float | None = None,
           sleep: Callable[[float], None] = time.sleep) -> LiveSnapshot:
    """Replay a finished run (see the module docstring); `speed` 0: the end at once."""
    tail = JournalTail(run_dir / TURNS_JOURNAL)
    rows = tail.read_all()
    if tail.corrupt is not None:      # refused as `run --resume` refuses it
        raise InputError(tail.corrupt)
    metrics = JournalTail(run_dir / METRICS_JOURNAL).read_all()
    events = JournalTail(run_dir / EVENTS_JOURNAL).read_all()

    def end(r: JSONObject) -> float:
        return to_float(r.get("started_mono_s") or 0.0) + to_float(r.get("e2e_s") or 0.0)
    rows.sort(key=end)
    metrics.sort(key=lambda m: to_float(m.get("t_end_s") or 0.0))
    # the replay's end: the last row's, or a metrics scrape's after it (a killed run's
    # cut last row leaves its scrapes later than its rows; `--speed 0` jumps to here)
    last = max([end(r) for r in rows] + [to_float(m.get("t_end_s") or 0.0) for m in metrics]
               + [0.0])
    if speed is None:
        speed = max(1.0, last / REPLAY_S)
    view.start()
    i = j = k = 0
    now = 0.0 if speed > 0 else last
    while True:
        while i < len(rows) and end(rows[i]) <= now:
            view.row(rows[i])
            i += 1
        while j < len(metrics) and to_float(metrics[j].get("t_end_s") or 0.0) <= now:
            view.metrics_row(metrics[j])
            j += 1
        while k < len(events):        # events carry no common clock: in order, at once
            view.event(events[k])
            k += 1
        if i >= len(rows) and j >= len(metrics):
            break
        view.refresh(now, force=view.mode == "dashboard")   # plain: every `every_s`
        sleep(REPLAY_FRAME_S)
        now += speed * REPLAY_FRAME_S
    return view.close(last)


JOURNALS = (TURNS_JOURNAL, METRICS_JOURNAL, EVENTS_JOURNAL, SUMMARY)


def unreadable(run_dir: Path) -> str | None:
    """The first of the run's files `watch` reads that is no regular file (a FIFO, a
    device, a link to itself) or a manifest that is not JSON: one line, or None."""
    if (problem := manifest_problem(run_dir)) is not None:
        return f"{run_dir}: {problem}"
    for name in JOURNALS:
        if (problem := file_problem(run_dir / name)) is not None:
            return f"{run_dir / name}: {problem}"
    return None


def answer_file(folder: Path) -> Path | None:
    """A sweep or size folder's answer (`size.json`, `sweep.json`, …), written when the
    search ended; None while it runs."""
    found = sorted(p for p in folder.glob("*.json") if p.is_file())
    return found[0] if found else None


def point_line(run_dir: Path) -> str:
    """A finished point of a sweep or search, one line from its summary.json."""
    try:
        if (problem := file_problem(run_dir / SUMMARY, "summary")) is not None:
            raise ValueError(problem)       # a FIFO summary.json would block the read
        s = json.loads((run_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        m = manifest_now(run_dir) or Manifest()
        return f"{m.label or run_dir.name}: {m.status or '?'}"
    if not isinstance(s, dict):
        return f"{run_dir.name}: ?"
    m = manifest_now(run_dir) or Manifest()
    label = m.label or run_dir.name
    window = s.get("window_aggregate_tok_s")
    steady = "steady" if s.get("steady_state") else "not steady"
    figures = (f"{window:,.1f} tok/s window" if isinstance(window, int | float)
               else "no window")
    p95 = s.get("window_ttft_p95_s") or s.get("ttft_p95_s")
    return (f"{label}: {s.get('status', m.status or '?')}, "
            f"{figures}, TTFT p95 {p95:.2f} s, {steady}" if isinstance(p95, int | float)
            else f"{label}: {s.get('status', '?')}, {figures}, {steady}")


PROGRESS = "progress.json"     # a search's own state (`sweep/team_hours.py` writes it)
BAR_WIDTH = 24


def progress_bar(what: str, done: int, total: int) -> str:
    """`what ██████░░░░ 6/10`: a search's progress as one line."""
    full = round(BAR_WIDTH * done / total) if total else BAR_WIDTH
    return f"{what} {'█' * full}{'░' * (BAR_WIDTH - full)} {done}/{total}"


def search_progress(folder: Path) -> str | None:
    """The bar of a search that states its progress (progress.json), else None."""
    f = folder / PROGRESS
    try:
        if file_problem(f, "progress") is not None:
            return None
        s = json.loads(f.read_text(encoding="utf-8"))
        line = progress_bar(str(s["what"]), int(s["done"]), int(s["total"]))
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    return line + (f", {int(s.get('probes') or 0)} probe(s)" if s.get("probes") else "") + (
        " — INTERRUPTED" if s.get("interrupted") else "")


class FolderWatch:
    """The live view of a sweep or size folder's running point, on a thread of its own
    (`start()`/`stop()`), under a header with the search's state."""

    def __init__(self, folder: Path, mode: str, stream: IO[str], every_s: float = 30.0,
                 kind: str = "search") -> None:
        self.folder, self.mode, self.stream, self.every_s = folder, mode, stream, every_s
        self.kind = kind
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done: dict[Path, str] = {}
        self.points_seen: list[str] = []

    def finished_lines(self) -> list[str]:
        """A finished folder's state: each point's line (`endurance watch` prints it
        and ends)."""
        runs = run_dirs_in(self.folder)
        return [f"endurance {self.kind} {self.folder}: finished, {len(runs)} point(s)",
                *("  " + point_line(d) for d in runs)]

    def header(self, current: Path | None) -> list[str]:
        m = manifest_now(current) if current is not None else None
        lines = [f"endurance {self.kind} {self.folder}: {len(self._done)} point(s) done"
                 + (f"; running {m.label or current.name}" if m and current else "")]
        if (bar := search_progress(self.folder)) is not None:
            lines.append("  " + bar)
        lines += ["  " + line for line in list(self._done.values())[-6:]]
        return lines

    def _running(self) -> Path | None:
        runs = run_dirs_in(self.folder)
        for d in runs:
            if d not in self._done and (manifest_now(d) or Manifest()).status != "running" \
                    and (d / SUMMARY).exists():
                self._done[d] = point_line(d)
        live = [d for d in runs if d not in self._done]
        return live[-1] if live else None

    def _loop(self) -> None:
        while not self._stop.is_set():
            current = self._running()
            if current is None:
                self._stop.wait(POLL_S)
                continue
            self.points_seen.append(current.name)
            label = (manifest_now(current) or Manifest()).label or current.name
            view = view_for(current, self.mode, self.stream, self.every_s,
                            self.header(current),
                            f"[endurance {self.kind}: {label}, {len(self._done)} done] ")
            view.start()
            follow(current, view, stop=self._stop.is_set, check_writer=False)
            self._done[current] = point_line(current)

    def start(self) -> FolderWatch:
        # the first frame is drawn here, on the calling thread: whatever rich imports
        # on first use is imported now, never on the watcher's thread (issue 23)
        LiveView(self.mode, stream=self.stream).warm_up()
        self._thread = threading.Thread(target=self._loop, name="endurance-watch",
                                        daemon=True)
        self._thread.start()
        return self

    def wait(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


@contextlib.contextmanager
def watching(folder: Path, quiet: bool, kind: str = "search") -> Iterator[None]:
    """Show the running point of a sweep or search (on stderr) while the block runs."""
    if quiet:
        yield
        return
    w = FolderWatch(folder, "auto", sys.stderr, kind=kind).start()
    try:
        yield
    finally:
        w.stop()
