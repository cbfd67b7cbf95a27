"""A run's requests, in order per session, each with its full chain of block hashes.

Reads `turns.jsonl` (one row per attempt, in write order) and `blocks.jsonl` (one
row per attempt per session, in the same order: `metrics.blocks`) and the manifest's
resolved scenario (model, and which replayed sessions are sub-agents of which).
Rows stream; per session only the previous request's hashes are held.

Only a run that completed in one go, written by this version of endurance, exports:
a killed (`running`), interrupted, failed or resumed run's block rows need not line up
with its turn rows. Every line is read bounded (`simulator.util.bounded`) and every
field the exporters use is checked for its type: a garbled journal is one line naming
the file, the line and the field, exit 2.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, overload

from simulator import __version__
from simulator.errors import InputError
from simulator.records.blocks import BLOCKS_JOURNAL
from simulator.records.manifest import read_manifest
from simulator.records.recorder import TURNS_JOURNAL
from simulator.util import bounded
from simulator.util.ids import session_id
from simulator.util.jsontypes import JSONObject
from simulator.util.numbers import to_int

MAX_LINE_CHARS = 256 << 20     # one journal line (a block row of a 10M-token prompt: ~3 MB)


@dataclass
class SentRequest:
    session_id: str
    row: JSONObject              # the TurnRecord row, as journaled
    hashes: list[str]            # chained block hashes of what was sent
    tools_tokens: int
    system_tokens: int


@dataclass
class RunInfo:
    run_dir: Path
    model: str
    parents: dict[str, tuple[str, float]]   # sub-agent session id → (parent id, offset s)
    block_size: int = 64


def _jsonl(path: Path) -> Iterator[tuple[int, JSONObject]]:
    try:
        bounded.regular_file(path, "journal")
        fh = path.open(encoding="utf-8")
    except ValueError as exc:
        raise InputError(f"{path}: {'missing' if 'no such' in str(exc) else exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    n = 0
    with fh:
        while True:
            n += 1
            try:
                line = bounded.read_line(fh, MAX_LINE_CHARS)
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}:{n}: not UTF-8 text (byte {exc.start} of a "
                                 "chunk)") from None
            except ValueError as exc:
                raise InputError(f"{path}:{n}: {exc}") from None
            if line is None:
                return
            if not line.strip():
                continue
            try:
                d = bounded.json_value(line)
            except (ValueError, RecursionError) as exc:
                raise InputError(f"{path}:{n}: corrupted JSON: {bounded.decode_error(exc)}") \
                    from None
            if not isinstance(d, dict):
                raise InputError(f"{path}:{n}: expected a JSON object")
            yield n, d


_WANT = {str: "a string", int: "a non-negative integer", bool: "true or false",
         list: "a list", (int, float): "a number"}


_T = TypeVar("_T")


@overload
def _field(d: Mapping[str, object], key: str, where: str, kind: type[_T]) -> _T | None: ...
@overload
def _field(d: Mapping[str, object], key: str, where: str, kind: type[_T],
           default: _T) -> _T: ...
@overload
def _field(d: Mapping[str, object], key: str, where: str, kind: tuple[type, ...]) -> object: ...


def _field(d: Mapping[str, object], key: str, where: str, kind: type | tuple[type, ...],
           default: object = None) -> object:
    """`d[key]` of `kind` (None or absent: `default`); InputError naming it otherwise.
    A bool is not a number, numbers are finite and below 1e15, integers non-negative."""
    v = d.get(key)
    if v is None:
        return default
    number = kind is int or kind == (int, float)
    ok = isinstance(v, kind) and not (number and isinstance(v, bool))
    if ok and number and isinstance(v, int | float):
        ok = abs(v) < 1e15 and (kind is not int or v >= 0)
    if not ok:
        raise InputError(f"{where}: field {key!r}: expected {_WANT.get(kind, 'another type')}"
                         f", got {bounded.shown(v)}")
    return v


NUM = (int, float)


def check_turn_row(row: Mapping[str, object], where: str) -> None:
    """The fields of a turn row the exporters read, each of its type."""
    _field(row, "session_id", where, str)
    for key in ("turn_index", "prompt_tokens", "context_tokens_est", "output_tokens"):
        _field(row, key, where, int)
    for key in ("started_mono_s", "e2e_s", "ttft_s", "think_time_s"):
        _field(row, key, where, NUM)
    for key in ("request_kind", "stop_reason", "model"):
        _field(row, key, where, str)
    _field(row, "ok", where, bool)
    if row.get("ok") and row.get("started_mono_s") is None:
        raise InputError(f"{where}: field 'started_mono_s': missing")


def run_info(run_dir: Path) -> RunInfo:
    m = read_manifest(run_dir)
    mpath = run_dir / "manifest.json"
    if not (run_dir / BLOCKS_JOURNAL).is_file():
        raise InputError(f"{run_dir}: no {BLOCKS_JOURNAL}; run the scenario with "
                         f"--set record_blocks=true to export it as a trace")
    if m.was_resumed:
        raise InputError(f"{run_dir}: a resumed run's block hashes do not line up with "
                         f"its rows; export a run that ran in one go")
    status = m.status
    if status != "completed":
        why = {"running": " (killed, or still running)"}.get(str(status), "")
        raise InputError(f"{run_dir}: status {bounded.shown(status)}{why}; export a run "
                         "that completed")
    made_by = m.endurance_version
    if made_by != __version__:
        raise InputError(f"{run_dir}: written by endurance {bounded.shown(made_by)}; export "
                         f"reads runs of this version ({__version__})")
    if m.scenario_resolved is None:
        raise InputError(f"{mpath}: field 'scenario_resolved': expected an object")
    s = dict(m.scenario_resolved.raw)
    parents: dict[str, tuple[str, float]] = {}
    replay = s.get("replay") or {}
    if not isinstance(replay, dict):
        raise InputError(f"{mpath}: field 'scenario_resolved.replay': expected an object")
    rec = replay.get("sessions") or []
    if not isinstance(rec, list) or not all(isinstance(r, dict) for r in rec):
        raise InputError(f"{mpath}: field 'scenario_resolved.replay.sessions': expected a "
                         "list of objects")
    n = _field(s, "sessions", f"{mpath}: scenario_resolved", int) or len(rec) or 1
    for j, r in enumerate(rec):
        where = f"{mpath}: scenario_resolved.replay.sessions[{j}]"
        parent = _field(r, "parent", where, int)
        if parent is not None and parent >= len(rec):
            raise InputError(f"{where}: field 'parent': no session {parent}")
        _field(r, "start_offset_s", where, NUM)
    for i in range(min(n, 1_000_000)):
        if not rec:
            break
        r = rec[i % len(rec)]
        if r.get("parent") is not None:
            copy = i // len(rec)
            parents[session_id(i)] = (session_id(r["parent"] + copy * len(rec)),
                                      float(r.get("start_offset_s") or 0.0))
    model = m.scenario_resolved.model
    return RunInfo(run_dir, model[:256] if model else "default", parents)


def sent_requests(run_dir: Path) -> Iterator[SentRequest]:
    """Every attempt sent, in the order rows were written, with its block hashes."""
    per: dict[str, list[JSONObject]] = {}
    bpath = run_dir / BLOCKS_JOURNAL
    for n, b in _jsonl(bpath):
        where = f"{bpath}:{n}"
        _field(b, "keep", where, int)
        new = _field(b, "new", where, list, [])
        if not all(isinstance(h, str) for h in new):
            raise InputError(f"{where}: field 'new': expected a list of block hashes "
                             "(strings)")
        _field(b, "tools_tokens", where, int)
        _field(b, "system_tokens", where, int)
        per.setdefault(str(b.get("session_id")), []).append(b)
    cursor: dict[str, int] = {}
    chains: dict[str, list[str]] = {}
    tpath = run_dir / TURNS_JOURNAL
    for n, row in _jsonl(tpath):
        check_turn_row(row, f"{tpath}:{n}")
        sid = str(row.get("session_id"))
        k = cursor.get(sid, 0)
        rows = per.get(sid, [])
        if k >= len(rows):
            raise InputError(f"{tpath}:{n}: no block row for session "
                             f"{sid}'s request {k} (blocks.jsonl is shorter than turns.jsonl)")
        b = rows[k]
        rows[k] = {}                      # release as we go
        cursor[sid] = k + 1
        sent = b.get("new") or []         # checked above: a list of strings
        hashes = chains.get(sid, [])[: to_int(b.get("keep") or 0)] \
            + [h for h in (sent if isinstance(sent, list) else []) if isinstance(h, str)]
        chains[sid] = hashes
        yield SentRequest(sid, row, hashes, to_int(b.get("tools_tokens") or 0),
                          to_int(b.get("system_tokens") or 0))
