"""The recorder: the only writer of `results/<run-id>/`.

Rows are appended to `turns.jsonl` and flushed to the OS on every write, so a crash
of the process (even SIGKILL) loses nothing that was recorded. `finalize` converts the
journal to `turns.parquet`, writes `summary.json` and sets the manifest's status.
Until then the manifest says `running`, so a partial directory never looks complete.
`history.jsonl` keeps what `--resume` needs to rebuild each session's conversation
(see `session.resume`); the writer holds a lock on `turns.jsonl` while it runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import IO, TYPE_CHECKING

from simulator.clock import RunClock
from simulator.errors import InputError
from simulator.records.manifest import MANIFEST, Manifest, parse_manifest
from simulator.records.ownership import clear_owner, write_owner
from simulator.records.rows import (
    COLUMNS,
    TurnRecord,
    in_simulated_time,
    metrics_in_simulated_time,
)
from simulator.util import bounded
from simulator.util.jsontypes import JSONObject
from simulator.util.redact import redact

if TYPE_CHECKING:  # pandas is imported when a run finishes: start-up stays short
    import pandas as pd
    import pyarrow as pa

TURNS_JOURNAL = "turns.jsonl"
METRICS_JOURNAL = "server_metrics.jsonl"
HISTORY_JOURNAL = "history.jsonl"
EVENTS_JOURNAL = "events.jsonl"     # run events: a ramp's steps (`session/ramp.py`)
# the journals of rows: what a resume repairs and a worker's shard writes
ROW_JOURNALS = (TURNS_JOURNAL, METRICS_JOURNAL, HISTORY_JOURNAL)
TURNS_PARQUET = "turns.parquet"
METRICS_PARQUET = "server_metrics.parquet"
SUMMARY = "summary.json"


INDENT_MAX_CHARS = 1 << 20   # past this a JSON file is written compact (no indent)


def _json_text(data: object) -> str:
    """Indented JSON for a person to read, compact past INDENT_MAX_CHARS: a team replay's
    manifest embeds its day, where indenting doubles tens of MB that nobody reads."""
    compact = json.dumps(data, default=str)
    return compact if len(compact) > INDENT_MAX_CHARS else json.dumps(data, indent=2,
                                                                       default=str)


def _write_json_atomic(path: Path, data: object) -> None:
    """Write JSON via a temporary file, secrets redacted (URLs, key-named fields)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(_json_text(redact(data)) + "\n", encoding="utf-8")
    except BaseException:
        tmp.unlink(missing_ok=True)     # a full disk must not keep a torn copy (or its space)
        raise
    os.replace(tmp, path)


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    """`manifest.json` replaced atomically by `manifest` (secrets redacted)."""
    _write_json_atomic(run_dir / MANIFEST, manifest.to_json())


def salvage_failed(run_dir: Path, status_reason: str) -> None:
    """Last resort when the disk is full: drop the derived files a failed finalize may
    have left torn (the journal keeps every row), then mark the manifest failed — with
    its reason if a new copy fits, else by patching `"running"` to `"failed" ` in place
    (same length: no new blocks needed)."""
    for name in (TURNS_PARQUET, METRICS_PARQUET, SUMMARY):
        with contextlib.suppress(OSError):
            (run_dir / name).unlink()
    path = run_dir / MANIFEST
    try:
        data = bounded.json_file(path, what="manifest")
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        m = parse_manifest(data, str(path))
        write_manifest(run_dir, dataclasses.replace(
            m, status="failed", status_reason=status_reason, ended_at=time.time()))
        return
    except (OSError, ValueError, InputError):
        pass
    with contextlib.suppress(OSError):
        raw = path.read_bytes()
        at = raw.find(b'"status": "running"')
        if at >= 0:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(fd, b'"status": "failed" ', at)
            finally:
                os.close(fd)


def prewarm_finalize() -> None:
    """Import what `finalize` and the summary need (≈1–2 s of imports on a busy machine)
    ahead of time, on the calling (main) thread before the run starts, so a stop never
    waits for imports. Never call it from a background thread: a thread importing while
    the main thread imports the same circular package gets a partially initialised
    module (`ImportError: cannot import name ...`, issue 23)."""
    import importlib
    for name in ("pandas", "pyarrow.parquet", "simulator.analysis.summary"):
        try:
            importlib.import_module(name)
        except Exception:
            return


def iter_journal(path: Path) -> Iterator[JSONObject]:
    """Rows of a JSONL journal one at a time; a torn last line (crash mid-write) is
    ignored."""
    if not path.exists():
        return
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.endswith("\n"):
                return
            try:
                row = bounded.json_row(line)
            except (ValueError, RecursionError):
                row = None
            if not isinstance(row, dict):
                raise InputError(f"{path}:{n}: corrupted journal line (not a JSON object)")
            yield row


def read_journal(path: Path) -> list[JSONObject]:
    """Every row of a JSONL journal (`iter_journal` as a list)."""
    return list(iter_journal(path))


def _complete_length(path: Path) -> int:
    """Bytes of `path` up to and including its last newline (0 if none or no file)."""
    if not path.exists():
        return 0
    with path.open("rb") as f:
        pos = f.seek(0, os.SEEK_END)
        while pos > 0:          # scan back in 64 kB chunks for the last newline
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            i = f.read(step).rfind(b"\n")
            if i >= 0:
                return pos + i + 1
    return 0


def drop_torn_tail(path: Path) -> None:
    """Cut a torn last line (a crash mid-write) so appended rows start on a fresh line."""
    if path.exists() and (end := _complete_length(path)) != path.stat().st_size:
        os.truncate(path, end)


NULLABLE_INT_COLUMNS = ("input_tokens", "cache_read_tokens", "cache_creation_tokens",
                        "prompt_tokens", "output_tokens", "output_tokens_est", "http_status",
                        "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens",
                        "spec_forward_passes", "ngram_ref_passes", "ngram_ref_tokens",
                        "kv_transfer_bytes")


def turns_frame(rows: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    import pandas as pd
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in NULLABLE_INT_COLUMNS:
        df[col] = df[col].astype("Int64")
    return df


def turns_frame_from_journal(path: Path) -> pd.DataFrame:
    """`turns_frame(read_journal(path))`, parsed by Arrow straight from the bytes.

    A Python dict per row costs ~3 kB: 139k rows took 606 MiB above the imports to
    convert that way, and 91 MiB (4× faster) this way (`benchmarks/memory.py --journal`).
    A torn last line (crash mid-write) is ignored, as `read_journal` does."""
    import pyarrow as pa
    import pyarrow.json as pj
    end = _complete_length(path)
    if end == 0:
        return turns_frame([])
    # streamed from the file, one thread: the parser holds one block at a time
    source = pa.input_stream(str(path)) if end == path.stat().st_size \
        else pa.BufferReader(path.read_bytes()[:end])
    try:
        with source:
            table = pj.read_json(source, read_options=pj.ReadOptions(use_threads=False),
                                 parse_options=pj.ParseOptions(
                                     explicit_schema=turns_arrow_schema(),
                                     unexpected_field_behavior="ignore"))
    except pa.ArrowInvalid:  # a value the schema cannot hold, e.g. 64.0 in an int column
        return turns_frame(read_journal(path))
    import pandas as pd
    df: pd.DataFrame = table.to_pandas()
    # nullable ints: Arrow would give float64 with NaN; keep pandas' Int64 as turns_frame does
    ints = table.select(list(NULLABLE_INT_COLUMNS)).to_pandas(
        types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    for col in NULLABLE_INT_COLUMNS:
        df[col] = ints[col]
    return df


def turns_arrow_schema() -> pa.Schema:
    """The Arrow schema of a turns journal row, from `TurnRecord`'s annotations."""
    import pyarrow as pa
    arrow = {"str": pa.string(), "RequestKind": pa.string(), "int": pa.int64(),
             "float": pa.float64(), "bool": pa.bool_()}
    return pa.schema([pa.field(f.name, arrow[str(f.type).split(" | ")[0]])
                      for f in fields(TurnRecord)])


def lock_journal(f: IO[str], run_dir: Path) -> None:
    """Hold an exclusive lock on an open journal for the writer's lifetime, so a second
    writer (a `--resume` of a run that is still going) is refused, not interleaved."""
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise InputError(f"{run_dir}: the run is still in progress (its journal is locked "
                         "by another endurance process)") from None


class Recorder:
    def __init__(self, run_dir: Path, manifest: Manifest, *, resume: bool = False,
                 clock: RunClock | None = None) -> None:
        self.run_dir = run_dir
        # rows are measured on the loop clock and written in the run's simulated time;
        # a resumed run's clock comes back from its manifest (the run's server facts)
        self.clock = clock if clock is not None else RunClock(
            rate=manifest.time_scale or 1.0)
        run_dir.mkdir(parents=True, exist_ok=resume)
        mode = "a" if resume else "x"
        self._turns: IO[str] = open(run_dir / TURNS_JOURNAL, mode, encoding="utf-8")
        lock_journal(self._turns, run_dir)
        write_owner(run_dir)
        if resume:
            for name in ROW_JOURNALS:
                drop_torn_tail(run_dir / name)
        self._metrics: IO[str] = open(run_dir / METRICS_JOURNAL, mode, encoding="utf-8")
        self._history: IO[str] = open(run_dir / HISTORY_JOURNAL, mode, encoding="utf-8")
        self.rows_written = 0
        self._events: IO[str] | None = None
        self._listeners: list[Callable[[JSONObject], None]] = []
        self._metrics_listeners: list[Callable[[Mapping[str, object]], None]] = []
        self._event_listeners: list[Callable[[Mapping[str, object]], None]] = []
        self._stamp = {k: v for k, v in (("run", manifest.run_id), (
            "scenario_hash", manifest.scenario_hash)) if v is not None}
        self.manifest = dataclasses.replace(
            manifest, status="running", started_at=manifest.started_at or time.time())
        write_manifest(run_dir, self.manifest)

    def write(self, record: TurnRecord) -> None:
        self.write_row(in_simulated_time(record.to_row(), self.clock))

    def write_row(self, row: JSONObject, line: str | None = None) -> None:
        """One turn row as the journal holds it (in this run's time already); `line`,
        when given, is its JSON already."""
        self._turns.write((line or json.dumps(row, separators=(",", ":"))) + "\n")
        self._turns.flush()
        self.rows_written += 1
        for listen in self._listeners:
            listen(row)

    def subscribe(self, listen: Callable[[JSONObject], None]) -> None:
        """Call `listen(row)` with every turn row once it is journaled (simulated time):
        live views of a run (a ramp's controller, a dashboard) read rows here, never the
        journal file."""
        self._listeners.append(listen)

    def subscribe_metrics(self, listen: Callable[[Mapping[str, object]], None]) -> None:
        """Call `listen(row)` with every /metrics window row once it is journaled."""
        self._metrics_listeners.append(listen)

    def subscribe_events(self, listen: Callable[[Mapping[str, object]], None]) -> None:
        """Call `listen(row)` with every run event once it is journaled."""
        self._event_listeners.append(listen)

    def write_event(self, row: Mapping[str, object]) -> None:
        """One row of `events.jsonl` (a run event, e.g. a ramp step), flushed."""
        if self._events is None:
            self._events = open(self.run_dir / EVENTS_JOURNAL, "a", encoding="utf-8")
        stamped = {**self._stamp, **row}
        self._events.write(json.dumps(stamped, separators=(",", ":"), default=str) + "\n")
        self._events.flush()
        for listen in self._event_listeners:
            listen(stamped)

    def write_success(self, history_row: Mapping[str, object], record: TurnRecord) -> None:
        """A successful request: its history line, carrying the turn row, then the turn
        row. A kill between the two leaves the row in the history line, and `--resume`
        writes it back (`ownership.rows_to_rebuild`): the two are durable together."""
        row = in_simulated_time(record.to_row(), self.clock)
        line = json.dumps(row, separators=(",", ":"))
        head = {**self._stamp, **history_row}
        if "row" in head:               # the row would take that key's place: dump it all
            self.write_history({**history_row, "row": row})
        else:                           # the row's JSON once, spliced in as the last key
            self._history.write(json.dumps(head, separators=(",", ":"))[:-1] +
                                ("," if head else "") + '"row":' + line + "}\n")
            self._history.flush()
        self.write_row(row, line)

    def write_history(self, row: Mapping[str, object]) -> None:
        """One row of `history.jsonl` (a stored reply or a session's failure), stamped
        with the run id and scenario hash (kept when the row has them: a merged worker
        row) so `--resume` can refuse rows of another run."""
        self._history.write(json.dumps({**self._stamp, **row}, separators=(",", ":")) + "\n")
        self._history.flush()

    def write_metrics(self, row: Mapping[str, object]) -> None:
        row = metrics_in_simulated_time(row, self.clock)
        self._metrics.write(json.dumps(row, separators=(",", ":"), default=str) + "\n")
        self._metrics.flush()
        for listen in self._metrics_listeners:
            listen(row)

    def update_manifest(self, manifest: Manifest) -> None:
        """Hold `manifest` (a copy of `self.manifest` with fields replaced) and write it."""
        self.manifest = manifest
        write_manifest(self.run_dir, manifest)

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """(turns, server metrics or None) as journaled so far (every row is flushed)."""
        import pandas as pd
        mrows = read_journal(self.run_dir / METRICS_JOURNAL)
        return (turns_frame_from_journal(self.run_dir / TURNS_JOURNAL),
                pd.DataFrame(mrows) if mrows else None)

    def finalize(self, status: str, summary: Mapping[str, object] | None,
                 frames: tuple[pd.DataFrame, pd.DataFrame | None] | None = None) -> None:
        """Close journals, write parquet, summary and the final manifest. Synchronous
        on purpose: it runs in `finally` blocks and must not await. `frames` are the
        journals already read by the caller (`frames()`), so they are parsed once."""
        for f in (self._events, self._metrics, self._history, self._turns):   # turns last
            if f is not None and not f.closed:
                f.close()
        turns, server = frames if frames is not None else self.frames()
        turns.to_parquet(self.run_dir / TURNS_PARQUET, index=False)
        if server is not None:
            server.to_parquet(self.run_dir / METRICS_PARQUET, index=False)
        if summary is not None:
            _write_json_atomic(self.run_dir / SUMMARY, summary)
        self.update_manifest(dataclasses.replace(
            self.manifest, status=status, ended_at=time.time(), rows=len(turns)))
        clear_owner(self.run_dir)
