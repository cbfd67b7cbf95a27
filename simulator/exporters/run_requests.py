"""A run's requests, in order per session, each with its full chain of block hashes.

Reads `turns.jsonl` (one row per attempt, in write order) and `blocks.jsonl` (one
row per attempt per session, in the same order: `metrics.blocks`) and the manifest's
resolved scenario (model, and which replayed sessions are sub-agents of which).
Rows stream; per session only the previous request's hashes are held.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.errors import InputError
from simulator.records.blocks import BLOCKS_JOURNAL
from simulator.records.recorder import TURNS_JOURNAL, load_manifest


@dataclass
class SentRequest:
    session_id: str
    row: dict[str, Any]          # the TurnRecord row
    hashes: list[str]            # chained block hashes of what was sent
    tools_tokens: int
    system_tokens: int


@dataclass
class RunInfo:
    run_dir: Path
    model: str
    parents: dict[str, tuple[str, float]]   # sub-agent session id → (parent id, offset s)
    block_size: int = 64


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        fh = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: missing") from None
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{n}: corrupted JSON: {exc.msg}") from None
            if isinstance(d, dict):
                yield n, d


def run_info(run_dir: Path) -> RunInfo:
    m = load_manifest(run_dir)
    if not (run_dir / BLOCKS_JOURNAL).is_file():
        raise InputError(f"{run_dir}: no {BLOCKS_JOURNAL}; run the scenario with "
                         f"--set record_blocks=true to export it as a trace")
    if m.get("resumed_from") or m.get("resumes"):
        raise InputError(f"{run_dir}: a resumed run's block hashes do not line up with "
                         f"its rows; export a run that ran in one go")
    s = m.get("scenario_resolved") or {}
    parents: dict[str, tuple[str, float]] = {}
    replay = s.get("replay") or {}
    rec = replay.get("sessions") or []
    n = int(s.get("sessions") or len(rec) or 1)
    for i in range(n):
        if not rec:
            break
        r = rec[i % len(rec)]
        if r.get("parent") is not None:
            copy = i // len(rec)
            parents[f"s{i:04d}"] = (f"s{r['parent'] + copy * len(rec):04d}",
                                    float(r.get("start_offset_s") or 0.0))
    return RunInfo(run_dir, str(s.get("model") or "default"), parents)


def sent_requests(run_dir: Path) -> Iterator[SentRequest]:
    """Every attempt sent, in the order rows were written, with its block hashes."""
    per: dict[str, list[dict[str, Any]]] = {}
    for _, b in _jsonl(run_dir / BLOCKS_JOURNAL):
        per.setdefault(str(b.get("session_id")), []).append(b)
    cursor: dict[str, int] = {}
    chains: dict[str, list[str]] = {}
    for n, row in _jsonl(run_dir / TURNS_JOURNAL):
        sid = str(row.get("session_id"))
        k = cursor.get(sid, 0)
        rows = per.get(sid, [])
        if k >= len(rows):
            raise InputError(f"{run_dir / TURNS_JOURNAL}:{n}: no block row for session "
                             f"{sid}'s request {k} (blocks.jsonl is shorter than turns.jsonl)")
        b = rows[k]
        rows[k] = {}                      # release as we go
        cursor[sid] = k + 1
        hashes = chains.get(sid, [])[: int(b.get("keep", 0))] + list(b.get("new", []))
        chains[sid] = hashes
        yield SentRequest(sid, row, hashes, int(b.get("tools_tokens", 0)),
                          int(b.get("system_tokens", 0)))
