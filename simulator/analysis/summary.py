"""The run summary: pure functions over the turns table (one row per request attempt).

Vocabulary follows design.md: `turn_tok_s` is output / (send → last token) of one turn;
`sustained` (per session) is Σ output / Σ e2e with think time excluded;
`aggregate_tok_s` is Σ output over all sessions / the wall window from the first send
to the last token. Cache reuse is kept three ways and never mixed: the client-side
reusable prefix, the server-reported cache reads, and the server's counters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from simulator.analysis import metrics_registry as registry
from simulator.analysis.closed_loop import closed_loop_figures
from simulator.analysis.energy import energy_figures, fold, unmeasured_sources
from simulator.analysis.goodput import GoodputSlo, goodput_figures, goodput_from_manifest
from simulator.analysis.kv_tier import tier_figures
from simulator.analysis.metric_keys import MetricKey, SummaryRecord, as_record, figure
from simulator.analysis.pd import pd_figures
from simulator.analysis.queueing import queue_figures, server_queue_mean_s
from simulator.analysis.recall import recall_figures, without_probes
from simulator.analysis.steady import SteadyConfig, config_from_manifest, steady_figures
from simulator.records.manifest import Manifest
from simulator.util.numbers import finite_float, to_float, to_int

# Metrics that are numbers a user may put in an SLO or compare across runs (the registry's).
NUMERIC_KEYS: tuple[MetricKey, ...] = registry.NUMERIC_KEYS


VERBATIM_WARNING = ("WARNING: this run replays VERBATIM transcript content (imported with "
                    "--keep-content); results and manifest may contain source, paths and secrets.")


def ok_rows(turns: pd.DataFrame, kind: str | None = None) -> pd.DataFrame:
    """Successful requests, optionally only one `request_kind` ("turn" or "summary")."""
    mask = turns["ok"].astype(bool)
    if kind is not None:
        mask &= turns["request_kind"] == kind
    return turns[mask]


def sustained_tok_s(rows: pd.DataFrame) -> float | None:
    """Σ output_tokens / Σ e2e_s (tokens per second, think time excluded)."""
    sub = rows.dropna(subset=["output_tokens", "e2e_s"])
    dur = float(sub["e2e_s"].sum())
    return float(sub["output_tokens"].sum()) / dur if dur > 0 else None


def measure_wall_window_s(turns: pd.DataFrame) -> float | None:
    """Seconds from the first request sent to the last token received (any request)."""
    if turns.empty:
        return None
    ends = (turns["started_mono_s"] + turns["e2e_s"]).dropna()
    if ends.empty:
        return None
    window = float(ends.max()) - float(turns["started_mono_s"].min())
    return window if window > 0 else None


def _session_groups(rows: pd.DataFrame) -> tuple[np.ndarray, list[tuple[object, int, int]]]:
    """`rows`' positions grouped by session, and each group's (session_id, start, end)
    in them: sessions sorted as `groupby("session_id", sort=True)` sorts them, each
    session's rows in table order (a stable sort), so a group's slice holds what
    iterating that groupby gives, without building a frame per session."""
    sid = rows["session_id"].to_numpy(dtype=object)
    order = np.argsort(sid, kind="stable")
    ordered = sid[order]
    if not len(ordered):
        return order, []
    cut = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    starts = [0, *cut.tolist()]
    ends = [*cut.tolist(), len(ordered)]
    return order, [(ordered[a], a, b) for a, b in zip(starts, ends, strict=True)]


def per_session_sustained(ok: pd.DataFrame) -> pd.Series:
    """Sustained tok/s of each session (index: session_id), successful requests only.

    `sustained_tok_s` per session, on numpy slices: the same sums over the same values
    in the same order (pandas' `Series.sum` is numpy's), so the same floats."""
    order, groups = _session_groups(ok)
    out = ok["output_tokens"].to_numpy(dtype=float, na_value=np.nan)[order]
    e2e = ok["e2e_s"].to_numpy(dtype=float, na_value=np.nan)[order]
    keep = ~(np.isnan(out) | np.isnan(e2e))
    rates: dict[object, float] = {}
    for sid, a, b in groups:
        m = keep[a:b]
        dur = float(e2e[a:b][m].sum())
        if dur > 0:
            rates[sid] = float(out[a:b][m].sum()) / dur
    return pd.Series(rates, dtype=float)


def thirds(turn_ok: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """First and last third of each session's successful turns (by turn index), pooled.

    A session with fewer than 3 turns contributes to neither third. Rows come session
    by session (sorted), each session's in turn order (numpy's default sort on its
    turn indexes, as `sort_values` does).
    """
    order, groups = _session_groups(turn_ok)
    turn = turn_ok["turn_index"].to_numpy()[order]
    firsts: list[np.ndarray] = []
    lasts: list[np.ndarray] = []
    for _, a, b in groups:
        k = (b - a) // 3
        if k >= 1:
            pos = order[a:b][np.argsort(turn[a:b], kind="quicksort")]
            firsts.append(pos[:k])
            lasts.append(pos[-k:])
    if not firsts:
        empty = turn_ok.iloc[0:0]
        return empty, empty
    return turn_ok.iloc[np.concatenate(firsts)], turn_ok.iloc[np.concatenate(lasts)]


def compaction_rows(turns: pd.DataFrame) -> pd.DataFrame:
    """One row per compaction event: (session_id, turn_index, compaction, removed…).

    A retried request repeats its compaction label; the event is counted once.
    """
    has = turns["compaction"].notna() & (turns["compaction"].astype(str) != "")
    ev = turns.loc[has, ["session_id", "turn_index", "compaction",
                         "compaction_messages_removed", "compaction_tokens_removed"]]
    return ev.drop_duplicates(subset=["session_id", "turn_index", "compaction"])


def post_compaction_mask(turn_ok: pd.DataFrame, events: pd.DataFrame) -> pd.Series:
    """True for the successful turn sent right after a compaction (the slow one)."""
    keys = set(zip(events["session_id"], events["turn_index"], strict=True))
    pairs = zip(turn_ok["session_id"], turn_ok["turn_index"], strict=True)
    return pd.Series([p in keys for p in pairs], index=turn_ok.index, dtype=bool)


def _median(s: pd.Series) -> float | None:
    s = s.dropna()
    return finite_float(s.median()) if not s.empty else None


def _quantile(s: pd.Series, q: float) -> float | None:
    s = s.dropna()
    return finite_float(s.quantile(q)) if not s.empty else None


def _share(num: pd.Series, den: pd.Series) -> float | None:
    d = float(den.sum())
    return float(num.sum()) / d if d > 0 else None


def _cache_figures(ok: pd.DataFrame) -> SummaryRecord:
    """Server-reported cache-read share and client-side reusable share (0..1)."""
    rep = ok.dropna(subset=["cache_read_tokens", "prompt_tokens"])
    server = _share(rep["cache_read_tokens"], rep["prompt_tokens"]) if not rep.empty else None
    client = _share(ok["reusable_prefix_tokens"], ok["context_tokens_est"])
    shared, source = (server, "server") if server is not None else (client, "client")
    return {
        "server_cache_read_share": server,
        "client_reusable_share": client,
        "cache_shared_pct": None if shared is None else 100.0 * shared,
        "cache_shared_source": source if shared is not None else None,
    }


def _compaction_figures(turns: pd.DataFrame, turn_ok: pd.DataFrame) -> SummaryRecord:
    ev = compaction_rows(turns)
    post = post_compaction_mask(turn_ok, ev)
    return {
        "compaction_events": len(ev),
        "compactions_by_kind": {str(k): int(v) for k, v in
                                ev["compaction"].value_counts().sort_index().items()},
        "compaction_messages_removed": int(ev["compaction_messages_removed"].sum()),
        "compaction_tokens_removed": int(ev["compaction_tokens_removed"].sum()),
        "post_compaction_turn_tok_s_median": _median(turn_ok.loc[post, "turn_tok_s"]),
        "other_turn_tok_s_median": _median(turn_ok.loc[~post, "turn_tok_s"]),
    }


def _context_figures(turn_ok: pd.DataFrame) -> SummaryRecord:
    """Context estimate (tokens): mean over sessions of first / last, overall max."""
    if turn_ok.empty:
        return {"context_tokens_first": None, "context_tokens_max": None,
                "context_tokens_last": None}
    g = turn_ok.sort_values("turn_index").groupby("session_id")["context_tokens_est"]
    return {
        "context_tokens_first": finite_float(g.first().mean()),
        "context_tokens_max": finite_float(turn_ok["context_tokens_est"].max()),
        "context_tokens_last": finite_float(g.last().mean()),
    }


def _throughput_figures(turns: pd.DataFrame, ok: pd.DataFrame, turn_ok: pd.DataFrame,
                        window: float | None) -> SummaryRecord:
    out_tokens = float(ok["output_tokens"].fillna(0).sum())
    per_sess = per_session_sustained(ok)
    first, last = thirds(turn_ok)
    f_tok, l_tok = sustained_tok_s(first), sustained_tok_s(last)
    return {
        "wall_window_s": window,
        "output_tokens": int(out_tokens),
        "aggregate_tok_s": out_tokens / window if window else None,
        "per_session_tok_s": finite_float(per_sess.mean()) if not per_sess.empty else None,
        "turn_tok_s_min": finite_float(turn_ok["turn_tok_s"].min()),
        "turn_tok_s_median": _median(turn_ok["turn_tok_s"]),
        "turn_tok_s_max": finite_float(turn_ok["turn_tok_s"].max()),
        "decode_tok_s_median": _median(turn_ok["decode_tok_s"]),
        "first_third_tok_s": f_tok,
        "last_third_tok_s": l_tok,
        "drift_pct": 100.0 * (l_tok - f_tok) / f_tok if f_tok and l_tok is not None else None,
        "ttft_p50_s": _quantile(turn_ok["ttft_s"], 0.50),
        "ttft_p95_s": _quantile(turn_ok["ttft_s"], 0.95),
    }


def summarize(turns: pd.DataFrame, *, price_per_hour: float | None, simulated: bool,
              wall_window_s: float | None = None,
              server_metrics: pd.DataFrame | None = None,
              engine_stats: Mapping[str, object] | None = None,
              steady: SteadyConfig | None = None,
              goodput: GoodputSlo | None = None,
              telemetry: Sequence[Mapping[str, object]] | None = None) -> SummaryRecord:
    """The run's summary figures (JSON-safe dict) from its turns table, built once.

    `wall_window_s` overrides the window measured from the rows (seconds).
    `server_metrics` (windowed rows from `simulator.records.prometheus`) adds the
    server-counter cache share, KV usage peak and preemptions; `engine_stats` (the
    in-process twin's counters, saved as `engine`) gives them where nothing was scraped.
    They are None otherwise. `steady` (requested N and load shape) adds achieved
    concurrency and the steady-state window's figures (`simulator.analysis.steady`);
    `goodput` the per-request SLO of the goodput figures (`analysis.goodput`; default
    30 tok/s with TTFT ≤ 15 s). Keys and meanings: `metrics_registry`. Recall probe rows enter only the recall
    figures (`analysis/recall.py`), never the speed, cache or latency ones.
    """
    all_rows, turns = turns, without_probes(turns)
    ok = ok_rows(turns)
    turn_ok = ok_rows(turns, "turn")
    window = wall_window_s if wall_window_s is not None else measure_wall_window_s(turns)
    out: SummaryRecord = {
        "sessions": int(turns["session_id"].nunique()),
        "ok_turns": len(turn_ok),
        "requests": len(turns),
        # Requests we cancelled at a stop (Ctrl-C, deadline) did not fail, nor did a
        # context overflow, which is answered by a forced compaction: counted apart.
        "failed_requests": int(((~turns["ok"].astype(bool))
                                & ~turns["error_type"].isin(["cancelled", "context_overflow"])
                                ).sum()),
        "cancelled_requests": int(turns["error_type"].eq("cancelled").sum()),
        "overflow_requests": int(turns["error_type"].eq("context_overflow").sum()),
        "summary_requests": len(ok_rows(turns, "summary")),
        "errors_by_type": {str(k): int(v) for k, v in
                           turns["error_type"].dropna().value_counts().sort_index().items()},
    }
    out |= _throughput_figures(turns, ok, turn_ok, window)
    out |= _context_figures(turn_ok)
    out |= _compaction_figures(turns, turn_ok)
    out |= _cache_figures(ok)
    out |= spec_figures(ok)
    out["ngram_reference_tokens_per_pass"] = ngram_reference(ok)
    out["ngram_reference_tokens"] = ngram_reference_basis(ok)
    out |= server_figures(server_metrics)
    out |= queue_figures(turn_ok, out["server_queue_time_mean_s"])
    out |= closed_loop_figures(turns, len(turn_ok), window)
    out |= tier_figures(turn_ok)
    if engine_stats:
        # The in-process engine's own counters are exact; its timeline (like a scrape)
        # only samples gauges every few seconds and misses peaks between samples.
        out |= _known(engine_figures(engine_stats))
        out["engine"] = dict(engine_stats)
    out |= pd_figures(turn_ok, engine_stats)
    agg = out["aggregate_tok_s"]
    out["price_per_hour"] = price_per_hour
    out["usd_per_mtok"] = (price_per_hour / (agg * 3600.0) * 1e6
                           if price_per_hour is not None and agg else None)
    out["simulated"] = bool(simulated)
    out |= _steady_part(turns, turn_ok, steady, price_per_hour)
    out |= _energy_part(server_metrics, out, telemetry)
    out |= _goodput_part(turns, goodput or GoodputSlo(), window, out)
    out |= recall_figures(all_rows)
    return as_record({k: (finite_float(v) if isinstance(v, float | np.floating) else v)
                      for k, v in out.items()})


def _known(figures: SummaryRecord) -> SummaryRecord:
    """The figures that are known (None left out)."""
    return as_record({k: v for k, v in figures.items() if v is not None})


def _steady_part(turns: pd.DataFrame, turn_ok: pd.DataFrame, steady: SteadyConfig | None,
                 price_per_hour: float | None) -> SummaryRecord:
    """Steady-state figures, and what the whole-run `usd_per_mtok` counts: the ramp and
    tail, and the card's idle time while sessions think or wait on tools."""
    idle = bool((turn_ok["think_time_s"].fillna(0) > 0).any()) if not turn_ok.empty else False
    out: SummaryRecord = {"usd_per_mtok_counts_idle": idle}
    if steady is not None:
        out |= steady_figures(turns, steady, price_per_hour)
    return out


def _energy_part(server_metrics: pd.DataFrame | None, figures: SummaryRecord,
                 telemetry: Sequence[Mapping[str, object]] | None = None) -> SummaryRecord:
    """Energy figures from measured GPU power (`analysis/energy.py`; None throughout
    without a power series): sessions per kW counts the achieved sessions. A target the
    run's `telemetry` block says failed or lied measures nothing."""
    rows: list[dict[str, object]] = []
    if server_metrics is not None and not server_metrics.empty \
            and "source" in server_metrics.columns:
        rows = [{str(k): v for k, v in r.items()}
                for r in server_metrics[server_metrics["source"].notna()].to_dict("records")]
    sessions = figure(figures, "achieved_sessions")
    if sessions is None:
        sessions = figure(figures, "sessions")
    return energy_figures(fold(rows, unmeasured_sources(telemetry)),
                          figure(figures, "wall_window_s"),
                          int(figure(figures, "output_tokens") or 0),
                          None if sessions is None else float(sessions))


def _goodput_part(turns: pd.DataFrame, slo: GoodputSlo, wall_window_s: float | None,
                  figures: SummaryRecord) -> SummaryRecord:
    """Goodput over the run, and over the steady window when the run computed one
    (its keys then present, None without a window, as the other window figures)."""
    lo, hi = figures.get("window_start_s"), figures.get("window_end_s")
    window = (float(lo), float(hi)) if lo is not None and hi is not None else None
    out = goodput_figures(turns, slo, wall_window_s, window, figures.get("requested_sessions"))
    if "requested_sessions" in figures and window is None:
        out |= {"window_goodput_share": None, "window_goodput_tok_s": None,
                "window_goodput_per_session_tok_s": None}
    return out


def spec_figures(ok: pd.DataFrame) -> SummaryRecord:
    """Tokens per forward pass and acceptance from the per-request speculation columns
    (only the in-process twin fills them; None for real servers and older runs)."""
    none: SummaryRecord = {"tokens_per_forward_pass": None,
                            "spec_mean_acceptance_length": None, "spec_acceptance_share": None}
    if "spec_forward_passes" not in ok.columns:
        return none
    rows = ok[ok["spec_forward_passes"].notna() & ok["output_tokens"].notna()]
    passes = float(rows["spec_forward_passes"].sum()) if not rows.empty else 0.0
    if passes <= 0:
        return none
    drafts = float(rows["spec_drafts"].fillna(0).sum())
    draft_toks = float(rows["spec_draft_tokens"].fillna(0).sum())
    acc = float(rows["spec_accepted_tokens"].fillna(0).sum())
    return {"tokens_per_forward_pass": float(rows["output_tokens"].sum()) / passes,
            "spec_mean_acceptance_length": 1.0 + acc / drafts if drafts else None,
            "spec_acceptance_share": acc / draft_toks if draft_toks else None}


def ngram_reference(ok: pd.DataFrame) -> float | None:
    """Σ reply tokens / Σ passes under the reference n-gram proposer (`ngram_ref_passes`,
    speculation on or off): the twin's rows count its own output tokens, a real
    server's the client's (`ngram_ref_tokens`), never one divided by the other's passes;
    None for older runs."""
    if "ngram_ref_passes" not in ok.columns:
        return None
    rows = ok[ok["ngram_ref_passes"].notna()]
    if "ngram_ref_tokens" in rows.columns:
        client = rows["ngram_ref_tokens"].notna()
        out = rows.loc[client, "ngram_ref_tokens"].sum() \
            + rows.loc[~client, "output_tokens"].fillna(0).sum()
        rows = rows[client | rows["output_tokens"].notna()]
    else:
        rows = rows[rows["output_tokens"].notna()]
        out = rows["output_tokens"].sum()
    passes = float(rows["ngram_ref_passes"].sum()) if not rows.empty else 0.0
    return float(out) / passes if passes > 0 else None


def ngram_reference_basis(ok: pd.DataFrame) -> str | None:
    """Whose tokens `ngram_reference` counted: "twin tokens", or "client tokens
    (estimate)" when the client metered a real server's replies; None when nothing was."""
    if "ngram_ref_passes" not in ok.columns or not ok["ngram_ref_passes"].notna().any():
        return None
    client = "ngram_ref_tokens" in ok.columns and bool(ok["ngram_ref_tokens"].notna().any())
    return "client tokens (estimate)" if client else "twin tokens"


def server_figures(server_metrics: pd.DataFrame | None) -> SummaryRecord:
    """Run-window figures from server counters: deltas summed, gauges peaked.

    Never lifetime values: the scraper emits counter deltas per window only.
    """
    none: SummaryRecord = {"server_prefix_cache_hit_share": None, "kv_usage_peak": None, "preemptions": None,
            "kv_capacity_tokens": None, "server_queue_time_mean_s": None}
    if server_metrics is None or server_metrics.empty:
        return none
    deltas = server_metrics[server_metrics["kind"] == "delta"].groupby("metric")["value"].sum()
    gauges = server_metrics[server_metrics["kind"] == "gauge"].groupby("metric")["value"].max()
    q, h = deltas.get("prefix_cache_queries"), deltas.get("prefix_cache_hits")
    return {
        "server_prefix_cache_hit_share": float(h) / float(q) if q and h is not None else None,
        "kv_usage_peak": finite_float(gauges.get("kv_usage")),
        "preemptions": int(deltas["preemptions"]) if "preemptions" in deltas else None,
        "kv_capacity_tokens": finite_float(gauges.get("kv_capacity_tokens")),
        "server_queue_time_mean_s": server_queue_mean_s(deltas),
    }


def engine_figures(stats: Mapping[str, object]) -> SummaryRecord:
    """The server-side figures (`registry.ENGINE_KEYS`) from the twin's own counters."""
    q, h = stats.get("prefix_cache_queries"), stats.get("prefix_cache_hits")
    pre = stats.get("preemptions")
    return {
        "server_prefix_cache_hit_share": (to_float(h) / to_float(q)
                                          if q and h is not None else None),
        "kv_usage_peak": finite_float(stats.get("kv_usage_peak")),
        "preemptions": None if pre is None else to_int(pre),
        "kv_capacity_tokens": finite_float(stats.get("kv_capacity_tokens")),
        "server_queue_time_mean_s": None,    # the twin's rows carry queue_s instead
    }


# Figures only the engine knows (the twin's counters are saved in summary.json by the run).
ENGINE_KEYS: tuple[MetricKey, ...] = registry.ENGINE_KEYS


def summarize_run(manifest: Manifest, turns: pd.DataFrame,
                  server_metrics: pd.DataFrame | None = None,
                  saved: Mapping[str, object] | None = None) -> SummaryRecord:
    """`summarize` with the price and simulated flag taken from a run's manifest.

    `saved` (the run's summary.json) gives the engine's counters (`engine`) that the
    turns and server metrics cannot (the in-process twin has no /metrics to scrape);
    they become figures by the same `engine_figures` the run used.
    """
    engine = (saved or {}).get("engine")
    return summarize(turns, price_per_hour=manifest.price_per_hour,
                     goodput=goodput_from_manifest(manifest),
                     simulated=manifest.simulated,
                     server_metrics=server_metrics,
                     engine_stats=engine if isinstance(engine, dict) else None,
                     steady=config_from_manifest(manifest, bool((saved or {}).get(
                         "deadline_reached", False))),
                     telemetry=manifest.telemetry)
