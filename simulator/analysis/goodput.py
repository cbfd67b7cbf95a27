"""Goodput: the requests that met their per-request SLOs, and the tokens they carried.

DistServe's goodput is the rate of requests that meet every per-request SLO; here a turn
request meets the run's goodput SLO (`GoodputSlo`, the scenario's `goodput:` section)
when its time to first token is at most `ttft_s` and its output speed — decode tok/s,
(output − 1) / (last − first token), what a user watching the stream sees — is at least
`output_tok_s`. A reply of one token has no decode speed and meets on its TTFT alone. A
turn request that failed (cancelled-at-stop and context-overflow attempts excepted, as in
`failed_requests`) did not meet it.

Whole run: `goodput_share` (of those requests), `goodput_requests_per_s` and
`goodput_tok_s` (over the run's wall window). Steady-state window: the requests whose
first token falls in it (as its TTFT figures) for the share, and their output tokens
apportioned to the window (`steady.tokens_in_window`) for `window_goodput_tok_s`, also per
requested session. The defaults are AA-AgentPerf's loosest tier: 30 tok/s per user with
TTFT ≤ 15 s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from simulator.analysis.metric_keys import SummaryRecord
from simulator.analysis.steady import tokens_in_window
from simulator.records.manifest import Manifest
from simulator.scenario.model import GoodputSpec
from simulator.util.numbers import to_float


class SloLike(Protocol):
    """What goodput reads of an SLO (`analysis.slo.Slo`, whose module imports this one)."""

    @property
    def metric(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def threshold(self) -> float: ...


DEFAULT_TTFT_S = 15.0
DEFAULT_OUTPUT_TOK_S = 30.0
NOT_FAILURES = ("cancelled", "context_overflow")   # not the server's failures


@dataclass(frozen=True, slots=True)
class GoodputSlo:
    """The per-request SLO a request must meet to count as goodput."""

    ttft_s: float = DEFAULT_TTFT_S
    output_tok_s: float = DEFAULT_OUTPUT_TOK_S

    def as_fact(self) -> dict[str, float]:
        return {"ttft_s": self.ttft_s, "output_tok_s": self.output_tok_s}


def goodput_slo(spec: GoodputSpec | None) -> GoodputSlo:
    """The goodput SLO a scenario's `goodput:` section sets, else the default."""
    return GoodputSlo() if spec is None else GoodputSlo(spec.ttft_s, spec.output_tok_s)


def goodput_from_manifest(manifest: Manifest) -> GoodputSlo:
    """The goodput SLO a run's manifest records (its resolved scenario), else the default."""
    resolved = manifest.scenario_resolved
    return goodput_slo(None if resolved is None else resolved.goodput)


def judged_requests(turns: pd.DataFrame) -> pd.DataFrame:
    """The turn requests goodput is judged on: every turn attempt that ended, but for
    the cancelled-at-stop and context-overflow ones."""
    kind = turns["request_kind"] == "turn"
    return turns[kind & ~turns["error_type"].isin(NOT_FAILURES)]


def meets(rows: pd.DataFrame, slo: GoodputSlo) -> np.ndarray:
    """Which rows met the goodput SLO (bool per row, failed rows never)."""
    ok = rows["ok"].astype(bool).to_numpy()
    ttft = pd.to_numeric(rows["ttft_s"], errors="coerce").to_numpy(dtype=float)
    speed = pd.to_numeric(rows["decode_tok_s"], errors="coerce").to_numpy(dtype=float)
    out_n = pd.to_numeric(rows["output_tokens"], errors="coerce").fillna(0).to_numpy(float)
    fast = np.where(out_n <= 1, True, np.nan_to_num(speed, nan=-1.0) >= slo.output_tok_s)
    met: np.ndarray = ok & (np.nan_to_num(ttft, nan=np.inf) <= slo.ttft_s) & fast
    return met


def goodput_figures(turns: pd.DataFrame, slo: GoodputSlo, wall_window_s: float | None,
                    window: tuple[float, float] | None, requested: int | None
                    ) -> SummaryRecord:
    """The whole run's goodput figures, and the steady window's when there is one."""
    rows = judged_requests(turns)
    good = meets(rows, slo)
    n = len(rows)
    out: SummaryRecord = {"goodput_slo": slo.as_fact(),
                          "goodput_share": float(good.sum()) / n if n else None,
                          "goodput_requests_per_s": None, "goodput_tok_s": None}
    if wall_window_s:
        tokens = pd.to_numeric(rows["output_tokens"], errors="coerce").fillna(0).to_numpy(float)
        out["goodput_requests_per_s"] = float(good.sum()) / wall_window_s
        out["goodput_tok_s"] = float(tokens[good].sum()) / wall_window_s
    if window is not None:
        out |= window_goodput(rows, good, window, requested)
    return out


def window_goodput(rows: pd.DataFrame, good: np.ndarray, window: tuple[float, float],
                   requested: int | None) -> SummaryRecord:
    """Goodput inside [lo, hi]: the share of the requests whose first token (or failure)
    falls in it, and the met requests' output tokens apportioned to it per second."""
    lo, hi = window
    sent = rows["started_mono_s"].to_numpy(dtype=float)
    ttft = pd.to_numeric(rows["ttft_s"], errors="coerce").to_numpy(dtype=float)
    e2e = pd.to_numeric(rows["e2e_s"], errors="coerce").fillna(0.0).to_numpy(dtype=float)
    first = np.where(np.isnan(ttft), sent + e2e, sent + ttft)
    in_w = (first >= lo) & (first <= hi)
    length = hi - lo
    tok = tokens_in_window(rows[good], lo, hi).sum() if good.any() else 0.0
    rate = float(tok) / length if length > 0 else None
    return {"window_goodput_share": float(good[in_w].sum()) / int(in_w.sum())
            if in_w.any() else None,
            "window_goodput_tok_s": rate,
            "window_goodput_per_session_tok_s": (rate / requested
                                                 if rate is not None and requested else None)}


# SLOs that name goodput's own quantities: a TTFT bound, and an output speed a user sees
TTFT_SLO_METRICS = frozenset({"ttft_p50_s", "ttft_p95_s", "window_ttft_p50_s",
                              "window_ttft_p95_s"})
SPEED_SLO_METRICS = frozenset({"per_session_tok_s", "window_per_session_tok_s",
                               "decode_tok_s_median", "turn_tok_s_min", "turn_tok_s_median"})


def goodput_of_slos(slos: Sequence[SloLike], base: GoodputSlo | None = None) -> GoodputSlo | None:
    """The goodput SLO that follows `slos` where they name its quantities: TTFT ≤ the
    tightest TTFT bound (`ttft_p95_s<=5`), output speed ≥ the highest speed floor
    (`per_session_tok_s>=20`); the other threshold stays `base`'s (the default). None
    when the SLOs name neither, so goodput keeps its own thresholds."""
    base = base or GoodputSlo()
    ttft = [s.threshold for s in slos if s.metric in TTFT_SLO_METRICS and s.op in ("<=", "<")]
    speed = [s.threshold for s in slos if s.metric in SPEED_SLO_METRICS
             and s.op in (">=", ">")]
    if not ttft and not speed:
        return None
    return GoodputSlo(min(ttft) if ttft and min(ttft) > 0 else base.ttft_s,
                      max(speed) if speed else base.output_tok_s)


def goodput_label(slo: Mapping[str, object] | None) -> str:
    """How the goodput figure was counted, for wherever it is shown."""
    if not slo:
        return "goodput"
    return (f"goodput (TTFT ≤ {to_float(slo['ttft_s']):g} s, "
            f"≥ {to_float(slo['output_tok_s']):g} tok/s)")
