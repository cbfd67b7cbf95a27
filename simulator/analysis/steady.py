"""Achieved concurrency and the steady-state window: pure functions over the turns table.

A point labelled "N sessions" measures N concurrent sessions only while N sessions are
active at once. From the rows' own timestamps (monotonic seconds since the run
started) this module derives each session's span (first send → last token), the
time-weighted mean of active sessions and of in-flight requests, and the steady-state
window:

* fixed-turn runs: from when every one of the N sessions has started and received
  its first turn's reply, until the first session ends;
* constant-load runs (`load.duration_s`, closed-loop replacement): from when the N
  initial sessions are past their first turn (or `load.warmup_s`) until dispatch
  stops at `duration_s` (less `load.cooldown_s`).

Only per-request timing is recorded (send, first token, last token), not every token's
arrival: each request's output tokens are apportioned to the window as its first token
at the first-token time and the other n − 1 spread evenly over its decode interval
(first → last token). TTFT counts requests whose first token falls in the window, ITL
((last − first) / (n − 1) per request) those whose decode midpoint does.

A window is also tested for saturation (`saturation`): when TTFT and in-flight requests
both rise significantly over it, the backlog was still growing and the point is not a
steady state (`saturated: true`, `steady_state: false`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator.analysis.metric_keys import MetricKey, SummaryRecord, as_record
from simulator.analysis.queueing import queue_share
from simulator.records.manifest import Manifest, ResolvedScenario
from simulator.scenario.model import LoadShape
from simulator.util.numbers import finite_float

STEADY_THRESHOLD = 0.9   # achieved / requested below this: not a measurement of N

# Saturation gate (load-methodology.md §4/§6, GuideLLM's over-saturation defaults): the
# slopes of TTFT and of in-flight requests over the window, each a one-sided t-test at
# this confidence; both significantly positive, with TTFT at the window's end at least
# SATURATION_MIN_TTFT_S and rising by SATURATION_MIN_RISE of its mean across the window
# (queue waits are autocorrelated, so a t-test alone over-reads small drifts), means the
# backlog was still growing: not a steady state. Closed loop: in-flight requests cannot
# exceed the active sessions; when they are pinned there (SATURATION_PINNED of them in
# flight on average) the in-flight slope is capped at 0, and the rising TTFT alone fires.
SATURATION_CONFIDENCE = 0.95
SATURATION_MIN_WINDOW_S = 30.0
SATURATION_MIN_SAMPLES = 10
SATURATION_MIN_TTFT_S = 2.5
SATURATION_MIN_RISE = 0.2
SATURATION_PINNED = 0.95


@dataclass(frozen=True, slots=True)
class SteadyConfig:
    """What the run asked for: N, and the constant-load shape if any (seconds)."""

    requested_sessions: int
    duration_s: float | None = None     # constant-load: dispatch stops here
    warmup_s: float | None = None       # window start (absolute, s since run start)
    cooldown_s: float = 0.0             # window ends this long before dispatch stops
    deadline_reached: bool = False
    warm_start: bool = False


def steady_config(sessions: int, load: LoadShape,
                  deadline_reached: bool = False) -> SteadyConfig | None:
    """The steady-state config of a run of `sessions` under `load` (its scenario's);
    None for a stepped ramp, whose every step has its own window (`analysis/ramp.py`)."""
    if load.ramp is not None:
        return None
    return SteadyConfig(sessions, load.duration_s, load.warmup_s, load.cooldown_s,
                        deadline_reached, load.warm_start)


def config_from_manifest(manifest: Manifest,
                         deadline_reached: bool = False) -> SteadyConfig | None:
    """`steady_config` as a run's manifest records it (older manifests: fixed turns)."""
    resolved = manifest.scenario_resolved or ResolvedScenario()
    return steady_config(manifest.sessions or resolved.sessions or 1, resolved.load,
                         deadline_reached)


def _ends(rows: pd.DataFrame) -> pd.Series:
    """Last-token (or failure) time of each row, s; the send time when unknown."""
    return (rows["started_mono_s"] + rows["e2e_s"].fillna(0.0)).astype(float)


def session_spans(turns: pd.DataFrame) -> pd.DataFrame:
    """One row per session: start_s (first send), first_done_s (its first turn's reply
    ended), end_s (last token of its last request); seconds since the run started."""
    if turns.empty:
        return pd.DataFrame(columns=["start_s", "first_done_s", "end_s"], dtype=float)
    t = turns.assign(_end=_ends(turns))
    g = t.groupby("session_id", sort=True)
    first_turn = t[t["turn_index"] == g["turn_index"].transform("min")]
    return pd.DataFrame({
        "start_s": g["started_mono_s"].min().astype(float),
        "first_done_s": first_turn.groupby("session_id")["_end"].max().astype(float),
        "end_s": g["_end"].max().astype(float),
    })


def mean_overlap_count(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> float:
    """Time-weighted mean over [lo, hi] of how many [start, end] intervals cover t."""
    if hi <= lo:
        return float("nan")
    cover = np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0.0, None)
    return float(cover.sum() / (hi - lo))


def tokens_in_window(rows: pd.DataFrame, lo: float, hi: float) -> np.ndarray:
    """Each row's output tokens apportioned to [lo, hi] (first token at its time, the
    other n − 1 evenly over the decode interval)."""
    n = rows["output_tokens"].fillna(0).to_numpy(dtype=float)
    sent = rows["started_mono_s"].to_numpy(dtype=float)
    last = sent + rows["e2e_s"].fillna(0.0).to_numpy(dtype=float)
    first = sent + rows["ttft_s"].to_numpy(dtype=float)
    first = np.where(np.isnan(first), last, first)
    first_in = ((first >= lo) & (first <= hi)).astype(float)
    span = last - first
    over = np.clip(np.minimum(last, hi) - np.maximum(first, lo), 0.0, None)
    rest = np.where(span > 0, over / np.where(span > 0, span, 1.0), first_in)
    return np.where(n > 0, np.minimum(n, 1.0) * first_in + np.maximum(n - 1.0, 0.0) * rest, 0.0)


@dataclass(frozen=True, slots=True)
class Window:
    start_s: float
    end_s: float

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s


def steady_window(spans: pd.DataFrame, cfg: SteadyConfig) -> tuple[Window | None, str]:
    """The steady-state window, or None and why there is none."""
    n = cfg.requested_sessions
    if len(spans) < n:
        why = f"only {len(spans)} of {n} sessions sent a request"
        return None, why + (" before the deadline" if cfg.deadline_reached else "")
    initial = spans.sort_values("start_s").iloc[:n]
    lo = float(initial["first_done_s"].max())
    if cfg.warmup_s is not None:
        lo = cfg.warmup_s
    if cfg.duration_s is not None:
        hi = cfg.duration_s - cfg.cooldown_s
        if hi <= lo:
            return None, (f"warm-up ({lo:.1f} s) reaches past the duration less cool-down "
                          f"({hi:.1f} s)")
        return Window(lo, hi), ""
    hi = float(spans["end_s"].min())
    if cfg.cooldown_s:
        hi = min(hi, float(spans["end_s"].max()) - cfg.cooldown_s)
    if hi > lo:
        return Window(lo, hi), ""
    last_start, first_end = float(initial["start_s"].max()), float(spans["end_s"].min())
    if last_start >= first_end:
        return None, (f"ramp longer than the sessions: the last session starts at "
                      f"{last_start:.1f} s, the first ends at {first_end:.1f} s")
    return None, ("too few turns: the first session ends before all "
                  f"{n} are past their first turn")


def _pct(values: np.ndarray, q: float) -> float | None:
    v = values[~np.isnan(values)]
    return float(np.quantile(v, q)) if v.size else None


def window_figures(turns: pd.DataFrame, w: Window, n: int) -> SummaryRecord:
    """Throughput and latency inside the window (see the module docstring)."""
    ok = turns[turns["ok"].astype(bool)]
    tok = tokens_in_window(ok, w.start_s, w.end_s)
    sent = ok["started_mono_s"].to_numpy(dtype=float)
    end = _ends(ok).to_numpy(dtype=float)
    busy = np.clip(np.minimum(end, w.end_s) - np.maximum(sent, w.start_s), 0.0, None)
    total = float(tok.sum())
    per_session = total / float(busy.sum()) if busy.sum() > 0 else None
    turn = ok[ok["request_kind"] == "turn"]
    t_done = _ends(turn).to_numpy(dtype=float)
    t_sent = turn["started_mono_s"].to_numpy(dtype=float)
    ttft = turn["ttft_s"].to_numpy(dtype=float)
    queue = (pd.to_numeric(turn["queue_s"], errors="coerce").to_numpy(dtype=float)
             if "queue_s" in turn.columns else np.full(len(turn), np.nan))
    first = t_sent + ttft
    t_last = _ends(turn).to_numpy(dtype=float)
    n_out = turn["output_tokens"].fillna(0).to_numpy(dtype=float)
    in_w = (first >= w.start_s) & (first <= w.end_s)
    mid = (first + t_last) / 2
    itl = np.where(n_out > 1, (t_last - first) / np.maximum(n_out - 1, 1), np.nan)
    itl = itl[(mid >= w.start_s) & (mid <= w.end_s)]
    return {
        "window_output_tokens": total,
        "window_aggregate_tok_s": total / w.length_s,
        "window_per_session_tok_s": per_session,
        "window_n_x_per_session_tok_s": None if per_session is None else n * per_session,
        "window_ttft_p50_s": _pct(ttft[in_w], 0.50),
        "window_ttft_p95_s": _pct(ttft[in_w], 0.95),
        "window_itl_p50_s": _pct(itl, 0.50),
        "window_itl_p95_s": _pct(itl, 0.95),
        "window_requests": int(in_w.sum()),
        "window_queue_time_p95_s": _pct(queue[in_w], 0.95),
        "window_queue_share_of_ttft": queue_share(queue[in_w], ttft[in_w]),
        "window_turns_per_s": float(((t_done >= w.start_s) & (t_done <= w.end_s)).sum())
        / w.length_s,
    }


WINDOW_KEYS: tuple[MetricKey, ...] = (
    "window_output_tokens", "window_aggregate_tok_s", "window_per_session_tok_s",
    "window_n_x_per_session_tok_s", "window_ttft_p50_s", "window_ttft_p95_s",
    "window_itl_p50_s", "window_itl_p95_s", "window_requests", "window_queue_time_p95_s",
    "window_queue_share_of_ttft", "window_turns_per_s")


def steady_figures(turns: pd.DataFrame, cfg: SteadyConfig,
                   price_per_hour: float | None = None) -> SummaryRecord:
    """Requested vs achieved concurrency (run and window), the window and its figures.

    `achieved_sessions` is the window's mean of active sessions, or the whole run's
    when there is no window; `steady_state` is False (with `steady_state_reason`) when
    there is no window, it holds fewer than 90% of the requested sessions, or the
    saturation gate fires (`saturation`).
    """
    n = cfg.requested_sessions
    blank: dict[str, object] = {"requested_sessions": n, "window_start_s": None,
                                "window_end_s": None, "window_s": None,
                                **dict.fromkeys(WINDOW_KEYS), "window_usd_per_mtok": None,
                                "window_sessions_per_s": None,
                                "saturated": None, "saturated_reason": None,
                                "window_ttft_slope": None, "window_in_flight_slope": None}
    out = as_record(blank)
    spans = session_spans(turns)
    if spans.empty:
        return out | {"achieved_sessions": 0.0, "achieved_sessions_run": 0.0,
                      "achieved_in_flight": 0.0, "achieved_in_flight_run": 0.0,
                      "steady_state": False, "steady_state_reason": "no request was sent"}
    s0, e0 = spans["start_s"].to_numpy(float), spans["end_s"].to_numpy(float)
    r0 = turns["started_mono_s"].to_numpy(float)
    r1 = _ends(turns).to_numpy(float)
    lo, hi = float(s0.min()), float(e0.max())
    out["achieved_sessions_run"] = finite_float(mean_overlap_count(s0, e0, lo, hi))
    out["achieved_in_flight_run"] = finite_float(mean_overlap_count(r0, r1, lo, hi))
    w, why = steady_window(spans, cfg)
    if w is not None and w.length_s < float(np.median(r1 - r0)):
        why = (f"the window ({w.length_s:.1f} s) is shorter than a median request "
               f"({float(np.median(r1 - r0)):.1f} s)")
        why = (f"duration too short: warm-up took {w.start_s:.1f} s; {why}"
               if cfg.duration_s is not None else f"too few turns: {why}")
        w = None
    if w is None:
        out["achieved_sessions"] = out["achieved_sessions_run"]
        out["achieved_in_flight"] = out["achieved_in_flight_run"]
    else:
        out["window_start_s"], out["window_end_s"] = w.start_s, w.end_s
        out["window_s"] = w.length_s
        out["achieved_sessions"] = finite_float(mean_overlap_count(s0, e0, w.start_s, w.end_s))
        out["achieved_in_flight"] = finite_float(mean_overlap_count(r0, r1, w.start_s, w.end_s))
        out |= window_figures(turns, w, n)
        ends = spans["end_s"].to_numpy(float)
        out["window_sessions_per_s"] = float(
            ((ends >= w.start_s) & (ends <= w.end_s)).sum()) / w.length_s
        agg = out["window_aggregate_tok_s"]
        if price_per_hour is not None and agg:
            out["window_usd_per_mtok"] = price_per_hour / (agg * 3600.0) * 1e6
        out |= saturation(turns, w, out["achieved_sessions"])
    achieved = out["achieved_sessions"] or 0.0
    if w is not None and achieved < STEADY_THRESHOLD * n:
        why = f"achieved {achieved:.1f} of {n} sessions in the window"
    elif out.get("saturated"):
        why = str(out.get("saturated_reason"))
    if cfg.deadline_reached and why:
        why += " (deadline reached)"
    out["steady_state"] = w is not None and not why
    out["steady_state_reason"] = why or None
    return out


def t_critical(df: int, confidence: float = SATURATION_CONFIDENCE) -> float:
    """One-sided Student-t quantile (Cornish–Fisher expansion around the normal one;
    within 0.5% of the exact value for df ≥ 5, 2% at df = 3)."""
    if df < 1:
        raise ValueError("t_critical: df must be ≥ 1")
    z = statistics.NormalDist().inv_cdf(confidence)
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def slope_test(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """Least-squares slope of y on x and its t statistic (slope / standard error);
    None with fewer than 3 points or no spread in x. A perfect fit gives t = ±inf."""
    n = len(x)
    if n < 3:
        return None
    xm, ym = float(x.mean()), float(y.mean())
    sxx = float(((x - xm) ** 2).sum())
    if sxx <= 0:
        return None
    slope = float(((x - xm) * (y - ym)).sum()) / sxx
    resid = y - (ym + slope * (x - xm))
    se = math.sqrt(float((resid ** 2).sum()) / (n - 2) / sxx)
    if se == 0:
        return slope, (math.inf if slope > 0 else -math.inf if slope < 0 else 0.0)
    return slope, slope / se


def in_flight_at(r0: np.ndarray, r1: np.ndarray, t: np.ndarray) -> np.ndarray:
    """How many [start, end) request intervals cover each time in t."""
    return (np.searchsorted(np.sort(r0), t, side="right")
            - np.searchsorted(np.sort(r1), t, side="right")).astype(float)


def saturation(turns: pd.DataFrame, w: Window,
               active_sessions: float | None = None) -> SummaryRecord:
    """The validity gate over the window: `saturated` (None when the window is too short
    or has too few requests to test), its reason, and the two slopes (TTFT in s per s,
    in-flight requests per s) tested on requests sent in the window. `active_sessions`
    (the window's mean) tells when in-flight requests are pinned at the closed loop's cap."""
    out: SummaryRecord = {"saturated": None, "saturated_reason": None,
                          "window_ttft_slope": None, "window_in_flight_slope": None}
    if w.length_s < SATURATION_MIN_WINDOW_S:
        out["saturated_reason"] = (f"not tested: window {w.length_s:.1f} s < "
                                   f"{SATURATION_MIN_WINDOW_S:g} s")
        return out
    r0 = turns["started_mono_s"].to_numpy(float)
    r1 = _ends(turns).to_numpy(float)
    sent_in = np.sort(r0[(r0 >= w.start_s) & (r0 <= w.end_s)])
    ok = turns[turns["ok"].astype(bool) & (turns["request_kind"] == "turn")]
    ttft = ok["ttft_s"].to_numpy(dtype=float)
    first = ok["started_mono_s"].to_numpy(dtype=float) + ttft
    keep = ~np.isnan(first) & (first >= w.start_s) & (first <= w.end_s)
    if min(int(keep.sum()), len(sent_in)) < SATURATION_MIN_SAMPLES:
        out["saturated_reason"] = (f"not tested: fewer than {SATURATION_MIN_SAMPLES} "
                                   "requests in the window")
        return out
    tt = slope_test(first[keep], ttft[keep])
    fl = slope_test(sent_in, in_flight_at(r0, r1, sent_in))
    if tt is None or fl is None:
        out["saturated_reason"] = "not tested: no spread in time"
        return out
    out["window_ttft_slope"], out["window_in_flight_slope"] = tt[0], fl[0]
    crit_t, crit_f = t_critical(int(keep.sum()) - 2), t_critical(len(sent_in) - 2)
    mean_ttft = float(ttft[keep].mean())
    ttft_end = mean_ttft + tt[0] * (w.end_s - float(first[keep].mean()))
    rise = tt[0] * w.length_s
    ttft_up = (tt[1] > crit_t and ttft_end >= SATURATION_MIN_TTFT_S
               and rise >= SATURATION_MIN_RISE * mean_ttft)
    in_flight = mean_overlap_count(r0, r1, w.start_s, w.end_s)
    pinned = (active_sessions is not None and active_sessions > 0
              and in_flight >= SATURATION_PINNED * active_sessions)
    out["saturated"] = bool(ttft_up and (fl[1] > crit_f or pinned))
    if out["saturated"]:
        why = (f"in-flight requests rising {fl[0]:.3g}/s (t={fl[1]:.1f})" if fl[1] > crit_f
               else f"in-flight requests pinned at the sessions ({in_flight:.1f} of "
                    f"{active_sessions:.1f} on average)")
        out["saturated_reason"] = (
            f"saturated: TTFT rising {tt[0]:.3g} s/s (t={tt[1]:.1f}, +{rise:.1f} s over the "
            f"window) to {ttft_end:.1f} s, {why} ({SATURATION_CONFIDENCE:.0%} one-sided)")
    return out
