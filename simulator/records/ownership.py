"""Who is writing a run: owner records, parent-death signals, worker-journal recovery.

Each journal writer (the run's process, and every `--workers` shard) leaves
`owner.json` — its PID and the kernel's start time of that PID — next to its journal.
PID and start time together name one process even after the PID is reused, so
`--resume` can refuse a run whose writer, or any of whose workers, is still alive
instead of writing beside it. Workers ask the kernel to SIGTERM them when their parent
dies (Linux `PR_SET_PDEATHSIG`), and poll the parent elsewhere, so a SIGKILLed parent
cannot leave them running orphaned. A parent killed before it merged its workers'
journals leaves their rows under `workers/w*/`; `merge_orphan_journals` folds them into
the run's journals before a resume reads them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

from simulator.errors import InputError
from simulator.util import bounded
from simulator.util.jsontypes import JSONObject, JSONValue
from simulator.util.numbers import to_int

OWNER_FILE = "owner.json"
WORKERS_DIR = "workers"       # where a sharded run's workers journal, each in its w<N>/
PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 1.0


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on; None without such a process or /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2 (comm) may contain spaces and parentheses: split after the last ')'.
    return stat[stat.rfind(")") + 2:].split()


def start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot; Linux), or None when
    the process does not exist or the platform has no /proc."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None     # field 22 overall
    except (IndexError, ValueError):
        return None


def is_alive(pid: int, started: int | None) -> bool:
    """True when the process `pid` that started at `started` still runs."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                            # exists, owned by someone else
    fields = _stat(pid)
    if fields and fields[0] in ("Z", "X"):
        return False                    # exited, not yet reaped
    now = start_time(pid)
    if started is None or now is None:
        return True                     # cannot tell a reused PID: assume alive
    return now == started


def write_owner(directory: Path) -> None:
    """Record this process as the writer of the journals in `directory`."""
    pid = os.getpid()
    data = {"pid": pid, "start_time": start_time(pid), "ppid": os.getppid()}
    with contextlib.suppress(OSError):
        (directory / OWNER_FILE).write_text(json.dumps(data) + "\n", encoding="utf-8")


def clear_owner(directory: Path) -> None:
    """The writer is done with `directory` (its journals are closed)."""
    with contextlib.suppress(OSError):
        (directory / OWNER_FILE).unlink()


def live_owner(directory: Path) -> int | None:
    """The PID of the still-running writer recorded in `directory`, else None."""
    try:
        data = bounded.json_file(directory / OWNER_FILE, what="owner file", max_bytes=4096)
        pid, started = int(data["pid"]), data.get("start_time")
    except (InputError, KeyError, TypeError, ValueError):
        return None
    if pid == os.getpid():
        return None
    return pid if is_alive(pid, started if isinstance(started, int) else None) else None


def refuse_if_running(run_dir: Path, workers_dir: str = WORKERS_DIR) -> None:
    """InputError when the run's process or any of its workers is still alive."""
    pid = live_owner(run_dir)
    if pid is not None:
        raise InputError(f"{run_dir}: the run is still in progress (pid {pid}); "
                         "stop it before resuming")
    for shard in sorted((run_dir / workers_dir).glob("w*")):
        pid = live_owner(shard)
        if pid is not None:
            raise InputError(f"{run_dir}: its worker {shard.name} is still running (pid {pid}); "
                             f"stop it (kill {pid}) before resuming")


def die_with_parent() -> None:
    """Called at worker start-up: SIGTERM this process when its parent dies (Linux
    prctl), plus a daemon thread that notices a changed parent PID on any platform."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent or parent == 1:   # the parent died before prctl took hold
        os.kill(os.getpid(), signal.SIGTERM)
        return
    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watchdog",
                     daemon=True).start()


def _watch_parent(parent: int) -> None:
    """Watchdog: SIGTERM this process once its parent is gone (re-parented)."""
    stop = threading.Event()
    while not stop.wait(PARENT_POLL_S):
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)
            # a second SIGTERM later cancels in-flight requests at once
            stop.wait(10 * PARENT_POLL_S)
            os.kill(os.getpid(), signal.SIGTERM)
            return


# (session, turn, request kind, attempt, fact id): a fact id as the row holds it
TurnKey: TypeAlias = tuple[str, int, str, int, JSONValue]


def turn_key(row: Mapping[str, JSONValue]) -> TurnKey:
    """A journal row's identity (a probe row's: its fact too — one probe per fact)."""
    return (str(row.get("session_id")), to_int(row.get("turn_index") or 0),
            str(row.get("request_kind")), to_int(row.get("attempt") or 0), row.get("fact_id"))


def duplicated(rows: Sequence[Mapping[str, JSONValue]]) -> list[int]:
    """Pure: the indices of rows whose `turn_key` an earlier row holds (a row appended
    twice, by a copy or a merge done by hand): kept, each turn would count twice."""
    seen: set[TurnKey] = set()
    out: list[int] = []
    for i, row in enumerate(rows):
        key = turn_key(row)
        if key in seen:
            out.append(i)
        seen.add(key)
    return out


def drop_duplicated_rows(path: Path, rows: Sequence[Mapping[str, JSONValue]]) -> int:
    """Rewrite the journal `path` (whose complete lines are `rows`, one a line) without
    its `duplicated` rows, atomically (a temporary file replaced); the number dropped."""
    drop = set(duplicated(rows))
    if not drop:
        return 0
    with path.open("rb") as f:
        lines = f.read().splitlines(keepends=True)
    kept = [line for i, line in enumerate(lines[:len(rows)]) if i not in drop]
    tmp = path.with_name(path.name + ".dedup")
    tmp.write_bytes(b"".join(kept))
    os.replace(tmp, path)
    return len(drop)


def rows_to_rebuild(turn_rows: Iterable[Mapping[str, JSONValue]],
                    history_rows: Iterable[Mapping[str, object]]) -> list[JSONObject]:
    """Pure: the turn rows a journal lacks that its history lines carry — a run killed
    after a success's history line and before its turn row (`Recorder.write_success`)
    — in history order, each once."""
    return missing_rows({turn_key(r) for r in turn_rows}, history_rows)


def missing_rows(have: set[TurnKey],
                 history_rows: Iterable[Mapping[str, object]]) -> list[JSONObject]:
    """`rows_to_rebuild` given the turn keys the journal has (updated in place)."""
    out: list[JSONObject] = []
    for h in history_rows:
        row = h.get("row")
        if isinstance(row, dict) and turn_key(row) not in have:
            have.add(turn_key(row))
            out.append(row)
    return out


def without_row(history_row: Mapping[str, object]) -> dict[str, object]:
    """A worker's history line as the parent journals it: the turn row it carries is in
    the worker's time, and the parent has that row (merged, or rebuilt) already."""
    return {k: v for k, v in history_row.items() if k != "row"}


def history_key(row: Mapping[str, object]) -> tuple[str, object, object, bool]:
    return (str(row.get("session")), row.get("turn"), row.get("kind"), "failed" in row)
