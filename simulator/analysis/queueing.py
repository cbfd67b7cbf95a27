"""Queue wait: how much of the time to first token a request spent waiting for the
server to start it (arrival → first scheduled, seconds).

The in-process twin records it per request (`TurnRecord.queue_s`); a vLLM server
exposes it as the histogram `vllm:request_queue_time_seconds`, whose sum and count
deltas over the run give a mean (`server_queue_time_mean_s`). `size` names
`queueing` as the binding constraint when a TTFT SLO fails and queue wait is the
larger part of TTFT (`QUEUE_BOUND_SHARE`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from simulator.analysis.metric_keys import SummaryRecord

QUEUE_BOUND_SHARE = 0.5   # queue wait ≥ this share of TTFT: TTFT fails from queueing


def queue_share(queue_s: np.ndarray, ttft_s: np.ndarray) -> float | None:
    """Σ queue / Σ TTFT over requests that know both (None when none does)."""
    both = ~(np.isnan(queue_s) | np.isnan(ttft_s))
    total = float(ttft_s[both].sum())
    if not both.any() or total <= 0:
        return None
    return min(1.0, float(queue_s[both].sum()) / total)


def _col(rows: pd.DataFrame, name: str) -> np.ndarray:
    if name not in rows.columns:
        return np.full(len(rows), np.nan)
    return pd.to_numeric(rows[name], errors="coerce").to_numpy(dtype=float)


def _q(v: np.ndarray, q: float) -> float | None:
    v = v[~np.isnan(v)]
    return float(np.quantile(v, q)) if v.size else None


def queue_figures(turn_ok: pd.DataFrame, server_queue_mean_s: float | None) -> SummaryRecord:
    """Whole-run queue figures over ok turn rows; the share falls back to the server's
    mean queue time / the mean TTFT when the rows carry no queue times."""
    queue, ttft = _col(turn_ok, "queue_s"), _col(turn_ok, "ttft_s")
    share = queue_share(queue, ttft)
    if share is None and server_queue_mean_s is not None:
        mean_ttft = float(np.nanmean(ttft)) if (~np.isnan(ttft)).any() else math.nan
        if mean_ttft > 0:
            share = min(1.0, server_queue_mean_s / mean_ttft)
    return {"queue_time_p50_s": _q(queue, 0.50), "queue_time_p95_s": _q(queue, 0.95),
            "queue_share_of_ttft": share}


def server_queue_mean_s(deltas: pd.Series) -> float | None:
    """Mean queue time over the run from the histogram's sum and count deltas (s)."""
    total, count = deltas.get("queue_time_sum_s"), deltas.get("queue_time_count")
    if total is None or not count:
        return None
    return float(total) / float(count)
