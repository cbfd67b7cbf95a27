"""Coordinated omission in a closed loop (load-methodology.md §5).

A session sends its next turn only after the last reply (plus think/tool time), so a
slow server delays the next request and offered load shrinks: latency percentiles
alone look better than users feel. So the summary reports the rates the loop achieved
(turns/s, sessions/s) beside latency, and the schedule lag of each request: how late it
was sent against its planned start (previous reply + think/tool time, or the end of a
retry back-off), which is the client's own delay (request limiter, a busy event loop).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.analysis.metric_keys import SummaryRecord


def closed_loop_figures(turns: pd.DataFrame, ok_turns: int,
                        wall_window_s: float | None) -> SummaryRecord:
    """Schedule lag over every attempt that records it, and whole-run rates (per s)."""
    lag = (pd.to_numeric(turns["schedule_lag_s"], errors="coerce").to_numpy(dtype=float)
           if "schedule_lag_s" in turns.columns else np.array([]))
    lag = lag[~np.isnan(lag)]
    span = wall_window_s if wall_window_s else None
    return {
        "schedule_lag_p95_s": float(np.quantile(lag, 0.95)) if lag.size else None,
        "schedule_lag_max_s": float(lag.max()) if lag.size else None,
        "turns_per_s": ok_turns / span if span else None,
        "sessions_per_s": int(turns["session_id"].nunique()) / span if span else None,
    }
