"""The fleet page of a run behind a router: per replica and aggregate (pure).

From the turns table's `replica` column (every fleet run: the twin's and a client-routed
one), each replica's requests, prompt tokens, cache-read share of them as the server
reported it per reply, and TTFT; from the engine counters (twin) or the per-replica
scraped `/metrics` rows (real servers), each replica's server-side prefix-cache hit
share. Load imbalance is the busiest replica's requests over the mean (1.0 = even).
A session's spread is how many replicas its requests went to (1.0 = perfect affinity).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from simulator.util.numbers import to_float


def _share(num: float, den: float) -> float | None:
    return float(num) / float(den) if den else None


def fleet_summary(turns: pd.DataFrame, engine_stats: Mapping[str, object] | None = None,
                  server: pd.DataFrame | None = None) -> dict[str, object] | None:
    """The `fleet` fact of summary.json, or None for a run without replicas."""
    if "replica" not in turns.columns or turns["replica"].isna().all():
        return None
    rows = turns[turns["replica"].notna()]
    ok = rows[rows["ok"].astype(bool)]
    server_share = _server_shares(engine_stats, server)
    per: list[dict[str, object]] = []
    counts: list[int] = []
    for rep, g in ok.groupby("replica", sort=True):
        prompt = float(g["prompt_tokens"].fillna(0).sum())
        read = float(g["cache_read_tokens"].fillna(0).sum())
        ttft = g["ttft_s"].dropna()
        per.append({"replica": str(rep), "requests": len(g),
                    "sessions": int(g["session_id"].nunique()),
                    "prompt_tokens": int(prompt), "cache_read_tokens": int(read),
                    "cache_read_share": _share(read, prompt),
                    "server_prefix_cache_hit_share": server_share.get(str(rep)),
                    "ttft_p50_s": float(ttft.median()) if len(ttft) else None,
                    "ttft_p90_s": float(ttft.quantile(0.9)) if len(ttft) else None})
        counts.append(len(g))
    mean = sum(counts) / len(counts) if counts else 0.0
    spread = ok.groupby("session_id")["replica"].nunique()
    prompt_all = float(ok["prompt_tokens"].fillna(0).sum())
    out: dict[str, object] = {
        "replicas": len(per),
        "cache_read_share": _share(float(ok["cache_read_tokens"].fillna(0).sum()), prompt_all),
        "load_imbalance": max(counts) / mean if mean else None,
        "session_spread_mean": float(spread.mean()) if len(spread) else None,
        "per_replica": per,
    }
    if engine_stats is not None:
        out["router"] = engine_stats.get("router")
        out["session_moves"] = engine_stats.get("session_moves")
        reps = engine_stats.get("replicas")
        out["replicas"] = max(len(per), len(reps) if isinstance(reps, list | tuple) else 0)
    return out


def _server_shares(engine_stats: Mapping[str, object] | None,
                   server: pd.DataFrame | None) -> dict[str, float | None]:
    """Replica → server prefix-cache hit share (hits / queried tokens)."""
    reps = (engine_stats or {}).get("replicas")
    if isinstance(reps, list):
        return {str(r["replica"]): _share(to_float(r["prefix_cache_hits"]),
                                          to_float(r["prefix_cache_queries"]))
                for r in reps if isinstance(r, Mapping)}
    if server is None or "replica" not in server.columns:
        return {}
    deltas = server[(server["kind"] == "delta") & server["replica"].notna()]
    out: dict[str, float | None] = {}
    for rep, g in deltas.groupby("replica"):
        by = g.groupby("metric")["value"].sum()
        out[str(rep)] = _share(by.get("prefix_cache_hits", 0.0),
                               by.get("prefix_cache_queries", 0.0))
    return out
