"""Per-run figures about where KV came from across idle gaps (`summary["kv_tier"]`).

An agent turn that follows a tool call or think time (`think_time_s` > 0) finds its
context in HBM, in a host tier, or nowhere (re-prefill): `post_idle_ttft` is the TTFT
of those turns, the figure a host tier moves. The host share needs the in-process
twin's `kv_host_cached_tokens` column (present only with a tier); real servers' rows
leave it None.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.analysis.metric_keys import SummaryRecord

POST_IDLE_MIN_S = 1e-9      # any idle gap at all: tool latency or user think time


def _quantile(s: pd.Series, q: float) -> float | None:
    v = pd.to_numeric(s, errors="coerce").dropna()
    return float(np.quantile(v.to_numpy(dtype=float), q)) if len(v) else None


def _sum(frame: pd.DataFrame, col: str) -> float | None:
    if col not in frame.columns:
        return None
    v = pd.to_numeric(frame[col], errors="coerce").dropna()
    return float(v.sum()) if len(v) else None


def tier_figures(turn_ok: pd.DataFrame) -> SummaryRecord:
    """`{"kv_tier": {...}}` from the successful turn rows (empty dict when none)."""
    if turn_ok.empty or "think_time_s" not in turn_ok.columns:
        return {}
    idle = pd.to_numeric(turn_ok["think_time_s"], errors="coerce").fillna(0.0)
    after = turn_ok[(idle > POST_IDLE_MIN_S) & (turn_ok["turn_index"] > 0)]
    cached = _sum(turn_ok, "cache_read_tokens")
    host = _sum(turn_ok, "kv_host_cached_tokens")
    pre = _sum(turn_ok, "preemptions")
    return {"kv_tier": {
        "post_idle_turns": len(after),
        "post_idle_ttft_p50_s": _quantile(after["ttft_s"], 0.50) if len(after) else None,
        "post_idle_ttft_p95_s": _quantile(after["ttft_s"], 0.95) if len(after) else None,
        "post_idle_ttft_mean_s": (float(pd.to_numeric(after["ttft_s"], errors="coerce").mean())
                                  if len(after) else None),
        "host_cached_tokens": host,
        "host_share_of_cached": (host / cached if host is not None and cached else None),
        "preempted_turns": (int((pd.to_numeric(turn_ok["preemptions"], errors="coerce")
                                 .fillna(0) > 0).sum()) if pre is not None else None),
    }}
