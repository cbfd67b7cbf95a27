"""What a performance engineer looks at after a multi-session run: the server's state
over time (KV usage, preemptions, running/waiting requests, aggregate tok/s, active
sessions) and the distributions (CDFs of TTFT, inter-token time and turn tok/s with
p50/p90/p99 marked).

Server series come from `server_metrics` rows (a real server's `/metrics` scrapes, or
the in-process twin's engine log, same canonical names); the client series (output
tok/s, active sessions, requests in flight) from the turn rows, so a run without
server metrics still gets a timeline. Times are seconds since the run started.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

PERCENTILES = (50, 90, 99)


# ------------------------------------------------------------------ pure tables
def server_series(server: pd.DataFrame | None) -> pd.DataFrame:
    """One row per scrape window (`t_end_s`): gauges sampled at the window's end and
    counter deltas turned into rates (per second of the window)."""
    cols = ["t_end_s", "kv_usage", "requests_running", "requests_waiting", "preemptions",
            "generation_tok_s"]
    if server is None or server.empty:
        return pd.DataFrame(columns=cols)
    wide = server.pivot_table(index=["t_start_s", "t_end_s"], columns="metric",
                              values="value", aggfunc="sum").reset_index()
    span = (wide["t_end_s"] - wide["t_start_s"]).where(lambda d: d > 0)
    out = pd.DataFrame({"t_end_s": wide["t_end_s"]})
    for g in ("kv_usage", "requests_running", "requests_waiting", "preemptions"):
        out[g] = wide.get(g, np.nan)
    out["generation_tok_s"] = (wide["generation_tokens"] / span
                               if "generation_tokens" in wide else np.nan)
    return out.sort_values("t_end_s").reset_index(drop=True)


def client_series(turns: pd.DataFrame, bin_s: float | None = None) -> pd.DataFrame:
    """Per time bin (`t_s` = bin start): output tok/s of requests that finished in it,
    requests in flight at its middle and sessions active (between their first send and
    their last reply) at its middle. `bin_s` defaults to ≈ 1/100 of the run."""
    rows = turns.dropna(subset=["started_mono_s"])
    if rows.empty:
        return pd.DataFrame(columns=["t_s", "output_tok_s", "in_flight", "active_sessions"])
    start = rows["started_mono_s"].to_numpy(float)
    end = (rows["started_mono_s"] + rows["e2e_s"].fillna(0.0)).to_numpy(float)
    horizon = float(end.max()) if len(end) else 0.0
    width = bin_s or max(horizon / 100.0, 1e-3)
    edges = np.arange(0.0, horizon + width, width)
    out_tok = rows["output_tokens"].fillna(0).to_numpy(float)
    tok, _ = np.histogram(end, bins=edges, weights=out_tok)
    mids = edges[:-1] + width / 2
    in_flight = ((start[None, :] <= mids[:, None]) & (end[None, :] > mids[:, None])).sum(1)
    per = rows.assign(_end=end).groupby("session_id").agg(first=("started_mono_s", "min"),
                                                          last=("_end", "max"))
    f, la = per["first"].to_numpy(float), per["last"].to_numpy(float)
    active = ((f[None, :] <= mids[:, None]) & (la[None, :] >= mids[:, None])).sum(1)
    return pd.DataFrame({"t_s": edges[:-1], "output_tok_s": tok / width,
                         "in_flight": in_flight, "active_sessions": active})


def ecdf(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their cumulative share (0..1], NaNs dropped."""
    v = np.sort(values.dropna().to_numpy(float))
    return v, np.arange(1, len(v) + 1) / max(len(v), 1)


def percentiles(values: pd.Series, ps: tuple[int, ...] = PERCENTILES) -> dict[int, float]:
    v = values.dropna().to_numpy(float)
    return {p: float(np.percentile(v, p)) for p in ps} if len(v) else {}


__all__ = ["client_series", "ecdf", "percentiles", "server_series"]
