"""Read a results directory written by `endurance run` (the recorder's layout).

`RUN_DIR/manifest.json`, `RUN_DIR/turns.parquet` and, when the server was scraped,
`RUN_DIR/server_metrics.parquet`. Anything missing or unreadable is an InputError
with a one-line message naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from simulator.analysis import metrics_registry as registry
from simulator.errors import InputError
from simulator.records.manifest import Manifest, read_manifest
from simulator.records.prometheus import SERVER_METRICS_COLUMNS
from simulator.records.rows import COLUMNS
from simulator.util import bounded
from simulator.util.visible import visible

# Columns the analysis cannot do without (the rest may be absent in older runs).
REQUIRED_COLUMNS: tuple[str, ...] = (
    "session_id", "turn_index", "request_kind", "started_mono_s", "context_tokens_est",
    "reusable_prefix_tokens", "output_tokens", "e2e_s", "turn_tok_s", "ttft_s", "ok",
)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _read_parquet(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    try:
        df = pd.read_parquet(path)
    except FileNotFoundError:
        raise InputError(f"{path}: missing") from None
    except (OSError, ValueError) as exc:   # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"{path}: corrupted parquet: {_one_line(exc)}") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing columns {', '.join(missing)}")
    return df


def load_turns(run_dir: Path) -> pd.DataFrame:
    """turns.parquet with every TurnRecord column (absent optional ones filled with None)."""
    df = _read_parquet(run_dir / "turns.parquet", REQUIRED_COLUMNS)
    for col in COLUMNS:
        if col not in df.columns:
            df[col] = None
    return df


def turn_records(run_dir: Path) -> list[dict[str, object]]:
    """`load_turns` as plain rows (one mapping per attempt), for the pure code that takes
    rows rather than a frame (`twin.model.fit_points`)."""
    return [{str(k): v for k, v in r.items()} for r in load_turns(run_dir).to_dict("records")]


def load_saved_summary(run_dir: str | Path) -> dict[str, object] | None:
    """The run's summary.json (None when absent, e.g. a run killed before finalizing),
    with keys older versions wrote renamed to the metric registry's (`turns` → `ok_turns`)."""
    path = Path(run_dir) / "summary.json"
    if not path.exists():
        return None
    data = bounded.json_file(path, what="summary")
    return registry.upgrade(data) if isinstance(data, dict) else None


def load_run(run_dir: str | Path) -> tuple[Manifest, pd.DataFrame, pd.DataFrame | None]:
    """(manifest, turns, server_metrics or None) of one run directory."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a directory (expected a run directory under results/)")
    manifest = read_manifest(run_dir)
    if not (run_dir / "turns.parquet").exists() and manifest.status == "running":
        raise InputError(f"{run_dir}: run incomplete (manifest status 'running', no turns.parquet:"
                         " still going, or killed); continue it with "
                         f"`endurance run --resume {run_dir}`")
    turns = load_turns(run_dir)
    sm_path = run_dir / "server_metrics.parquet"
    server = _read_parquet(sm_path, SERVER_METRICS_COLUMNS) if sm_path.exists() else None
    return manifest, turns, server


def run_label(manifest: Manifest, run_dir: Path) -> str:
    """A short name for legends and table headers: the label, else the run id."""
    label = manifest.label or manifest.run_id or run_dir.name
    return visible(str(label), 200)     # data, never layout: control/bidi chars escaped


# Scenario settings that may differ between runs that still replay the same turns:
# the compaction policy (the point of most comparisons), the twin's hardware, retries.
UNPAIRED_SETTINGS = frozenset({"compaction", "twin", "retry", "description", "probes"})


def workload_identity(manifest: Manifest) -> str | None:
    """A key equal for runs that replay the same workload (scenario and seed).

    From the resolved scenario without `UNPAIRED_SETTINGS` when the manifest has it,
    else the scenario hash; None when the manifest names neither.
    """
    resolved = manifest.scenario_resolved
    if resolved is not None:
        kept = {k: v for k, v in resolved.raw.items() if k not in UNPAIRED_SETTINGS}
        return json.dumps([kept, manifest.seed], sort_keys=True, default=str)
    h = manifest.scenario_hash      # an older manifest's `scenario.hash` is upgraded to it
    return None if h is None else json.dumps([h, manifest.seed], default=str)


def differing_settings(a: Manifest, b: Manifest) -> list[str]:
    """Top-level resolved-scenario keys whose values differ between two manifests."""
    if a.scenario_resolved is None or b.scenario_resolved is None:
        return []
    ra, rb = a.scenario_resolved.raw, b.scenario_resolved.raw
    return sorted(k for k in set(ra) | set(rb) if ra.get(k) != rb.get(k))
