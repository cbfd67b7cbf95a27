"""A sweep row or a sizing probe as a typed record, and the reader of old ones (pure).

A row carries its coordinates (what the point ran: session count, seed, setting,
replicas, …), then every figure and the sweep facts of its run under the registry's
names (`sweep_row`): `window_per_session_tok_s` is the steady window's,
`per_session_tok_s` the whole run's, exactly as in the run's summary.json. At run time
a row is the plain dict sweep.json and size.json hold, so the files are unchanged;
mypy checks every key code reads. `read_point_row` reads a row of any age.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simulator.analysis import metrics_registry as registry
from simulator.analysis.metric_keys import SummaryRecord, as_record
from simulator.analysis.run_summary import Summary, record_of


class PointRow(SummaryRecord, total=False):
    """A sweep row or a probe: the run's figures and facts, and the point's coordinates."""

    seed_offset: int
    passed: bool
    failed: list[str]
    run_dir: str
    run_dirs: list[str]
    spec: str                 # --spec setting (spec-sweep)
    kv_offload_gib: float     # host KV tier (GiB) of an outer dimension
    replicas: int             # fleet size (fleet search, replicas dimension)
    router: str
    pd: object                # "P:D" of a P/D dimension, or a P/D probe's engine block
    prefill: int
    decode: int


def sweep_row(coords: Mapping[str, object], summary: Summary) -> PointRow:
    """A sweep row or a probe: its coordinates, then every registry figure and the
    sweep facts of its run (None where unknown), under the names summary.json uses."""
    rec: Mapping[str, object] = record_of(summary)
    row = dict(coords)
    for k in (*registry.NUMERIC_KEYS, *registry.SWEEP_FACT_KEYS):
        row.setdefault(k, rec.get(k))
    row["simulated"] = bool(rec.get("simulated", False))
    return as_record(row, PointRow)


def upgrade_point_row(row: Mapping[str, object]) -> dict[str, object]:
    """A sweep row or probe as written before one name meant one figure (`sessions` the
    requested count, the window's figures under the whole run's names, the whole run's
    as `run_<key>`), under today's names; a row of today passes unchanged."""
    if "run_aggregate_tok_s" not in row and "requested_sessions" in row:
        return dict(row)
    out = {k: v for k, v in row.items()
           if k not in registry.WINDOW_OF and not k.startswith("run_")}
    out["requested_sessions"] = row.get("requested_sessions", row.get("sessions"))
    out.pop("sessions", None)
    for key, window in registry.WINDOW_OF.items():
        if key in row:
            out[window] = row[key]
        if f"run_{key}" in row:
            out[key] = row[f"run_{key}"]
    if "run_dirs" in row:
        out["run_dirs"] = row["run_dirs"]
    return out


def read_point_row(row: Mapping[str, object]) -> PointRow:
    """A row read from sweep.json or size.json (of any age) as a typed record."""
    return as_record(upgrade_point_row(row), PointRow)


def read_point_rows(rows: Sequence[Mapping[str, object]]) -> list[PointRow]:
    """Rows of a sweep (as `sweep` made them, or read from sweep.json) as typed records."""
    return [read_point_row(r) for r in rows]
