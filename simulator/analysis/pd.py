"""Per-run figures of prefill/decode disaggregation (the twin's `fleet.prefill`).

From the rows: the share of turns prefilled on a prefill instance, the KV they pulled
and how long decode instances waited for it, and TTFT split into queue (prefill and
decode queues), transfer (KV wait) and prefill (the rest: compute on whichever instance
prefilled, and the decode instance's first step). From the engine's `pd` block:
each side's utilisation. All None on a run without P/D rows.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from simulator.analysis.metric_keys import MetricKey, SummaryRecord, as_record

KEYS: tuple[MetricKey, ...] = ("remote_prefill_share", "kv_transfer_gb", "kv_transfer_wait_p95_s",
        "ttft_queue_share", "ttft_prefill_share", "ttft_transfer_share",
        "prefill_utilization", "decode_utilization")


def _num(frame: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)


def pd_figures(turn_ok: pd.DataFrame, engine: Mapping[str, object] | None) -> SummaryRecord:
    """The registry's P/D figures (every key None without P/D rows)."""
    out = as_record(dict.fromkeys(KEYS))
    if "prefill_where" not in turn_ok.columns:
        return out
    where = turn_ok["prefill_where"]
    rows = turn_ok[where.notna()]
    if rows.empty:
        return out
    remote = rows[rows["prefill_where"] == "remote"]
    out["remote_prefill_share"] = len(remote) / len(rows)
    nbytes = _num(rows, "kv_transfer_bytes")
    out["kv_transfer_gb"] = float(np.nansum(nbytes)) / 1e9
    wait = np.nan_to_num(_num(rows, "kv_transfer_wait_s"))
    if len(remote):
        out["kv_transfer_wait_p95_s"] = float(np.quantile(
            np.nan_to_num(_num(remote, "kv_transfer_wait_s")), 0.95))
    ttft, queue = _num(rows, "ttft_s"), np.nan_to_num(_num(rows, "queue_s"))
    have = ~np.isnan(ttft)
    total = float(ttft[have].sum())
    if total > 0:
        q, t = float(queue[have].sum()) / total, float(wait[have].sum()) / total
        out["ttft_queue_share"], out["ttft_transfer_share"] = q, t
        out["ttft_prefill_share"] = max(0.0, 1.0 - q - t)
    pdx = (engine or {}).get("pd")
    if isinstance(pdx, Mapping):
        out["prefill_utilization"] = pdx.get("prefill_utilization")
        out["decode_utilization"] = pdx.get("decode_utilization")
    return out
