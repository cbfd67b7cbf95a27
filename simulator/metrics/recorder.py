"""The recorder: the only writer of `results/<run-id>/`.

Rows are appended to `turns.jsonl` and flushed to the OS on every write, so a crash
of the process (even SIGKILL) loses nothing that was recorded. `finalize` converts the
journal to `turns.parquet`, writes `summary.json` and sets the manifest's status.
Until then the manifest says `running`, so a partial directory never looks complete.
`history.jsonl` keeps what `--resume` needs to rebuild each session's conversation
(see `session.resume`); the writer holds a lock on `turns.jsonl` while it runs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from simulator.metrics.records import COLUMNS, TurnRecord
from simulator.session.resume import lock_journal

if TYPE_CHECKING:  # pandas is imported when a run finishes: start-up stays short
    import pandas as pd

TURNS_JOURNAL = "turns.jsonl"
METRICS_JOURNAL = "server_metrics.jsonl"
HISTORY_JOURNAL = "history.jsonl"
TURNS_PARQUET = "turns.parquet"
METRICS_PARQUET = "server_metrics.parquet"
MANIFEST = "manifest.json"
SUMMARY = "summary.json"


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_journal(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL journal; a torn last line (crash mid-write) is ignored."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            rows.append(json.loads(line))
    return rows


def drop_torn_tail(path: Path) -> None:
    """Cut a torn last line (a crash mid-write) so appended rows start on a fresh line."""
    if not path.exists():
        return
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0 or (f.seek(size - 1) is not None and f.read(1) == b"\n"):
            return
        pos = size
        while pos > 0:          # scan back in 64 kB chunks for the last newline
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            i = f.read(step).rfind(b"\n")
            if i >= 0:
                f.truncate(pos + i + 1)
                return
        f.truncate(0)


def turns_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in ("input_tokens", "cache_read_tokens", "cache_creation_tokens", "prompt_tokens",
                "output_tokens", "output_tokens_est", "http_status"):
        df[col] = df[col].astype("Int64")
    return df


class Recorder:
    def __init__(self, run_dir: Path, manifest: dict[str, Any], *, resume: bool = False) -> None:
        self.run_dir = run_dir
        self.manifest = dict(manifest)
        run_dir.mkdir(parents=True, exist_ok=resume)
        mode = "a" if resume else "x"
        self._turns: IO[str] = open(run_dir / TURNS_JOURNAL, mode, encoding="utf-8")
        lock_journal(self._turns, run_dir)
        if resume:
            for name in (TURNS_JOURNAL, METRICS_JOURNAL, HISTORY_JOURNAL):
                drop_torn_tail(run_dir / name)
        self._metrics: IO[str] = open(run_dir / METRICS_JOURNAL, mode, encoding="utf-8")
        self._history: IO[str] = open(run_dir / HISTORY_JOURNAL, mode, encoding="utf-8")
        self.rows_written = 0
        self.manifest["status"] = "running"
        self.manifest.setdefault("started_at", time.time())
        _write_json_atomic(run_dir / MANIFEST, self.manifest)

    def write(self, record: TurnRecord) -> None:
        self._turns.write(json.dumps(record.to_row(), separators=(",", ":")) + "\n")
        self._turns.flush()
        self.rows_written += 1

    def write_history(self, row: dict[str, Any]) -> None:
        """One row of `history.jsonl` (a stored reply or a session's failure)."""
        self._history.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._history.flush()

    def write_metrics(self, row: dict[str, Any]) -> None:
        self._metrics.write(json.dumps(row, separators=(",", ":"), default=str) + "\n")
        self._metrics.flush()

    def update_manifest(self, **fields: Any) -> None:
        self.manifest.update(fields)
        _write_json_atomic(self.run_dir / MANIFEST, self.manifest)

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """(turns, server metrics or None) as journaled so far (every row is flushed)."""
        import pandas as pd
        mrows = read_journal(self.run_dir / METRICS_JOURNAL)
        return (turns_frame(read_journal(self.run_dir / TURNS_JOURNAL)),
                pd.DataFrame(mrows) if mrows else None)

    def finalize(self, status: str, summary: dict[str, Any] | None,
                 frames: tuple[pd.DataFrame, pd.DataFrame | None] | None = None) -> None:
        """Close journals, write parquet, summary and the final manifest. Synchronous
        on purpose: it runs in `finally` blocks and must not await. `frames` are the
        journals already read by the caller (`frames()`), so they are parsed once."""
        for f in (self._metrics, self._history, self._turns):   # turns last: the lock
            if not f.closed:
                f.close()
        turns, server = frames if frames is not None else self.frames()
        turns.to_parquet(self.run_dir / TURNS_PARQUET, index=False)
        if server is not None:
            server.to_parquet(self.run_dir / METRICS_PARQUET, index=False)
        if summary is not None:
            _write_json_atomic(self.run_dir / SUMMARY, summary)
        self.manifest.update(status=status, ended_at=time.time(), rows=len(turns))
        _write_json_atomic(self.run_dir / MANIFEST, self.manifest)
