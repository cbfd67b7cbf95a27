"""Reading a run directory while it is written, read-only: `endurance watch`, and the
parent of a sharded run (its shards' rows reach it only through their journals).

`JournalTail` reads the complete lines appended to a JSONL journal since its last call
(a torn last line waits for its newline; a line that is not a JSON object, read under
the bounds `run --resume` reads it with, is skipped and named in `corrupt`: a viewer
never stops on what a writer is in the middle of, and `watch` names what resume
refuses). It opens the file for reading only and takes no lock: the writer's `flock`
is never contended.

`RunFollower` yields a run's new rows on one timeline, simulated seconds since the run
started, as the run's own journal holds them:

* the run's `turns.jsonl` (a one-process run writes it as it goes; a sharded run's
  parent merges its shards into it when they end);
* the shards' journals under `workers/` (local processes, Ray shards shipped back by
  the driver, a resumed run's `workers/resume<k>/`): each shard journals on its own
  loop clock from its own start, so its rows are put on the run's timeline by wall
  clock (the shard's start is `started_at − started_mono_s` of any of its rows, the
  run's is the manifest's `started_at`) and into simulated time at the run's rate;
* `server_metrics.jsonl` and `events.jsonl` (a ramp's steps).

A row is yielded once, whichever journal holds it (keyed by session, turn, kind and
attempt): the merge copies shard rows into `turns.jsonl`, and they are not counted
twice. The figures of a running sharded run are therefore the live view's best
alignment; the run's final figures come from its merged journal (`finished()`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from simulator.clock import RunClock
from simulator.errors import InputError
from simulator.records.manifest import MANIFEST, MAX_MANIFEST, Manifest, parse_manifest
from simulator.records.ownership import WORKERS_DIR
from simulator.records.recorder import (
    EVENTS_JOURNAL,
    METRICS_JOURNAL,
    SUMMARY,
    TURNS_JOURNAL,
)
from simulator.records.rows import in_simulated_time, metrics_in_simulated_time
from simulator.util import bounded
from simulator.util.bounded import regular_file
from simulator.util.jsontypes import JSONObject
from simulator.util.numbers import to_float

MAX_READ = 64 * 2**20       # bytes one read of a journal takes (a row is ~1 kB)


def file_problem(path: Path, what: str = "journal") -> str | None:
    """Why `path` cannot be read (a FIFO, a device, a folder, a link to itself: the
    importers' regular-file-only rule, `util/bounded.py`), None when it can or is not
    there (yet)."""
    if not os.path.lexists(path):
        return None
    try:
        regular_file(path, what)
    except ValueError as exc:
        return str(exc)
    return None


class JournalTail:
    """The complete JSON-object lines appended to `path` since the last `read()`, at
    most `MAX_READ` bytes a call (`read_all` to the end); a cut last line is not yet
    written, a line that is not a JSON object is skipped, anything but a regular file
    is never opened (`problem` says why)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.problem: str | None = None
        self.lines = 0                   # complete lines read so far
        # the first complete line that is no row, worded as `run --resume` refuses it
        # (`records.recorder.iter_journal`): a viewer skips it, and says so
        self.corrupt: str | None = None

    def read(self) -> list[JSONObject]:
        self.problem = file_problem(self.path)
        if self.problem is not None:
            return []
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, 2)
                if size < self.offset:        # cut back (a resume dropped a torn tail)
                    self.offset = size
                f.seek(self.offset)
                data = f.read(min(size - self.offset, MAX_READ))
        except OSError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) >= MAX_READ:         # one line of MAX_READ bytes: no row; skip
                self.offset += len(data)
            return []
        self.offset += end + 1
        out: list[JSONObject] = []
        for line in data[: end + 1].splitlines():
            self.lines += 1
            try:   # read as resume reads it: the same bounds, so both take the same rows
                row = bounded.json_row(line.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError):
                row = None
            if isinstance(row, dict):
                out.append(row)
            elif self.corrupt is None:
                self.corrupt = (f"{self.path}:{self.lines}: corrupted journal line (not a "
                                "JSON object)")
        return out

    def read_all(self) -> list[JSONObject]:
        """Every complete row from the offset to the end as it stands now."""
        out: list[JSONObject] = []
        while True:
            before = self.offset
            out += self.read()
            if self.offset == before:
                return out


def manifest_now(run_dir: Path) -> Manifest | None:
    """The manifest as it stands (None while missing or mid-replace, or when it does
    not read: `manifest_problem` says why)."""
    try:
        return _read(run_dir)
    except (InputError, OSError):
        return None


def _read(run_dir: Path) -> Manifest | None:
    path = run_dir / MANIFEST
    if not os.path.lexists(path):
        return None
    if (problem := file_problem(path, "manifest")) is not None:
        raise InputError(f"{MANIFEST}: {problem}")
    try:
        with path.open("rb") as f:
            data = json.loads(f.read(MAX_MANIFEST + 1))
    except OSError:
        raise InputError(f"{MANIFEST}: cannot be read") from None
    except (ValueError, RecursionError):
        size = path.stat().st_size
        raise InputError(f"{MANIFEST}: {size:,} bytes, more than a manifest holds"
                         if size > MAX_MANIFEST else f"{MANIFEST}: not a JSON object") from None
    if not isinstance(data, dict):
        raise InputError(f"{MANIFEST}: not a JSON object")
    return parse_manifest(data, MANIFEST)


def manifest_problem(run_dir: Path) -> str | None:
    """Why the manifest that is there cannot be read, in a few words; None when there
    is none, or it reads."""
    try:
        _read(run_dir)
    except OSError:
        return f"{MANIFEST}: cannot be read"
    except InputError as exc:
        return str(exc)
    return None


def row_key(row: Mapping[str, object]) -> tuple[object, ...]:
    return (row.get("session_id"), row.get("turn_index"), row.get("request_kind"),
            row.get("attempt"), row.get("fact_id"))


@dataclass
class _Shard:
    tail: JournalTail
    metrics: JournalTail
    shift_s: float | None = None     # its start − the run's start (wall seconds)


@dataclass
class Batch:
    rows: list[JSONObject] = field(default_factory=list)
    metrics: list[Mapping[str, object]] = field(default_factory=list)
    events: list[JSONObject] = field(default_factory=list)


class RunFollower:
    """New rows of a run directory on the run's timeline (see the module docstring)."""

    def __init__(self, run_dir: Path, shards: bool = True) -> None:
        self.run_dir = run_dir
        self.manifest = manifest_now(run_dir) or Manifest()
        self.clock = RunClock(rate=self.manifest.time_scale or 1.0)
        self.t0_wall = self.manifest.started_at or time.time()
        self._turns = JournalTail(run_dir / TURNS_JOURNAL)
        self._metrics = JournalTail(run_dir / METRICS_JOURNAL)
        self._events = JournalTail(run_dir / EVENTS_JOURNAL)
        self._shards: dict[Path, _Shard] = {}
        self._follow_shards = shards
        self._seen: set[tuple[object, ...]] = set()
        self.last_end_s = 0.0

    @property
    def corrupt(self) -> str | None:
        """The run journal's first line that is no row (`JournalTail.corrupt`)."""
        return self._turns.corrupt

    def status(self) -> str:
        """The manifest's status now (`running` until the run is finalized)."""
        m = manifest_now(self.run_dir)
        if m is not None:
            self.manifest = m
        return self.manifest.status or "running"

    def finished(self) -> bool:
        """Finalized: status no longer running and summary.json written (or failed)."""
        st = self.status()
        return st != "running" and ((self.run_dir / SUMMARY).exists() or st == "failed")

    def now_s(self) -> float:
        """The run's clock now (simulated seconds since it started), by wall clock."""
        return self.clock.to_sim(max(0.0, time.time() - self.t0_wall))

    def poll(self) -> Batch:
        out = Batch()
        for row in self._turns.read():
            self._take(row, out)
        if self._follow_shards:
            self._poll_shards(out)
        out.metrics.extend(self._metrics.read())
        out.events.extend(self._events.read())
        return out

    def _take(self, row: JSONObject, out: Batch) -> None:
        key = row_key(row)
        if key in self._seen:
            return
        self._seen.add(key)
        end = to_float(row.get("started_mono_s") or 0.0) + to_float(row.get("e2e_s") or 0.0)
        self.last_end_s = max(self.last_end_s, end)
        out.rows.append(row)

    def _poll_shards(self, out: Batch) -> None:
        base = self.run_dir / WORKERS_DIR
        if not base.is_dir():
            return
        for journal in sorted(base.glob(f"**/w*/{TURNS_JOURNAL}")):
            shard = self._shards.get(journal.parent)
            if shard is None:
                shard = self._shards[journal.parent] = _Shard(
                    JournalTail(journal), JournalTail(journal.parent / METRICS_JOURNAL))
            for row in shard.tail.read():
                if shard.shift_s is None and row.get("started_at") is not None:
                    shard.shift_s = (to_float(row["started_at"])
                                     - to_float(row["started_mono_s"]) - self.t0_wall)
                self._take(self._on_run_timeline(row, shard.shift_s or 0.0), out)
            for m in shard.metrics.read():
                shifted = {**m, **{k: to_float(m[k]) + (shard.shift_s or 0.0)
                                   for k in ("t_start_s", "t_end_s") if m.get(k) is not None}}
                out.metrics.append(metrics_in_simulated_time(shifted, self.clock))

    def _on_run_timeline(self, row: JSONObject, shift_s: float) -> JSONObject:
        """A shard row (its loop clock, from its start) on the run's timeline, simulated."""
        moved: JSONObject = {**row, "started_mono_s": to_float(row["started_mono_s"]) + shift_s}
        return in_simulated_time(moved, self.clock)


def run_dirs_in(folder: Path) -> list[Path]:
    """The run directories directly inside a sweep or size folder, oldest first."""
    found = [p for p in folder.iterdir() if (p / MANIFEST).is_file()] if folder.is_dir() else []
    return sorted(found, key=lambda p: (p / MANIFEST).stat().st_mtime_ns)
