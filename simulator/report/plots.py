"""Figures for reports, comparisons and sweeps (matplotlib, Agg canvas, no pyplot).

Each function takes tables and returns a Figure; saving is the caller's business.
Figures are built on `FigureCanvasAgg` directly, so no global backend or pyplot state
is touched (safe in servers, tests and notebooks alike).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from simulator.analysis.goodput import goodput_label, judged_requests
from simulator.analysis.metric_keys import fact, figure
from simulator.analysis.point_row import PointRow
from simulator.analysis.ramp import held_steps, read_ramp
from simulator.analysis.summary import (
    compaction_rows,
    post_compaction_mask,
)
from simulator.analysis.timeline import client_series, ecdf, percentiles, server_series
from simulator.report import plots
from simulator.util.numbers import to_float, to_int

MAX_LINES = 8      # beyond this many sessions, draw the median and a min–max band


def new_figure(width: float = 10.0, height: float = 4.5, *, right: float = 0.98) -> Figure:
    """A Figure bound to an Agg canvas (inches). Margins are fixed (in inches, turned
    into fractions) rather than solved by a layout engine, which doubles drawing time."""
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=0.85 / width, right=right, bottom=0.55 / height,
                        top=1.0 - 0.4 / height)
    return fig


def legend_entries(ax: Axes, *twins: Axes) -> tuple[list[Artist], list[str]]:
    """Legend handles and labels of a panel and its twin axes (`twinx`), in order, so
    one legend names the lines of both y axes."""
    handles, labels = ax.get_legend_handles_labels()
    for t in twins:
        h, lab = t.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    return handles, labels


def legend_below(fig: Figure, ax: Axes, *, ncol: int = 3, title: str | None = None) -> None:
    """The axes' legend under the plot, outside the data: the bottom margin grows by
    the legend's rows (inches, turned into a fraction of the figure's height)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    ncol = max(1, min(ncol, len(handles)))
    rows = -(-len(handles) // ncol) + (1 if title else 0)
    height = fig.get_figheight()
    fig.subplots_adjust(bottom=(0.75 + 0.22 * rows) / height)
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.01), ncol=ncol,
               fontsize="small", frameon=False, title=title, title_fontsize="small")


def _finished(fig: Figure, ax: Axes, ncol: int, title: str | None = None) -> Figure:
    """A line plot's common ending: y from 0, a light grid, the legend below."""
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    legend_below(fig, ax, ncol=ncol, title=title)
    return fig


DENSE_MARKERS = 40   # more compactions than this: a rug under the axis, not lines across it


def mark_compactions(ax: Axes, turns: list[int]) -> None:
    """Compaction turns as faint vertical lines, or a rug of ticks along the bottom when
    they are dense (per-turn pruning would otherwise paint a solid curtain)."""
    if len(turns) <= DENSE_MARKERS:
        for i, x in enumerate(turns):
            ax.axvline(x, color="tab:red", alpha=0.35, lw=1,
                       label="compaction" if i == 0 else None)
        return
    ax.plot(turns, [0.0] * len(turns), "|", color="tab:red", ms=9, mew=0.8, alpha=0.7,
            transform=ax.get_xaxis_transform(), clip_on=False,
            label=f"compaction ({len(turns)} turns; rug)")


def mode_word(simulated: bool) -> str:
    return "simulated (twin)" if simulated else "real endpoint"


def rolling_median(s: pd.Series, n: int | None = None) -> pd.Series:
    """Centred rolling median; default window ≈ 1/30 of the series, odd, ≥ 5."""
    win = n or max(5, (len(s) // 30) | 1)
    return s.rolling(win, center=True, min_periods=1).median()


def _per_turn(turn_ok: pd.DataFrame, col: str) -> pd.DataFrame:
    """Median, min and max of `col` across sessions at each turn index."""
    g = turn_ok.groupby("turn_index")[col]
    return pd.DataFrame({"median": g.median(), "min": g.min(), "max": g.max()})


def plot_turn_throughput(turns: pd.DataFrame, turn_ok: pd.DataFrame, *,
                         simulated: bool) -> Figure:
    """Turn tok/s over turns, rolling median, compactions and the slow turn after them."""
    fig = new_figure()
    ax = fig.add_subplot()
    per = _per_turn(turn_ok, "turn_tok_s")
    label = "turn tok/s" if turn_ok["session_id"].nunique() == 1 else "turn tok/s (median of sessions)"
    ax.plot(per.index, per["median"], ".", ms=3, alpha=0.5, color="tab:blue", label=label)
    ax.plot(per.index, rolling_median(per["median"]), color="tab:blue", lw=2,
            label="rolling median")
    events = compaction_rows(turns)
    marked = sorted(int(x) for x in set(events["turn_index"]))
    mark_compactions(ax, marked)
    post = turn_ok[post_compaction_mask(turn_ok, events)]
    if not post.empty and len(marked) <= DENSE_MARKERS:   # dense: every turn is one
        ax.plot(post["turn_index"], post["turn_tok_s"], "v", color="tab:red", ms=7,
                label="turn right after compaction")
    ax.set(title=f"Turn throughput over turns — {mode_word(simulated)}",
           xlabel="turn index", ylabel="turn tok/s (output tokens / request time)")
    return _finished(fig, ax, ncol=4)


def plot_context(turn_ok: pd.DataFrame, *, simulated: bool) -> Figure:
    """Client-estimated context tokens per turn: the saw-tooth of compaction."""
    fig = new_figure()
    ax = fig.add_subplot()
    sessions = sorted(turn_ok["session_id"].unique())
    if len(sessions) <= MAX_LINES:
        for sid in sessions:
            g = turn_ok[turn_ok["session_id"] == sid].sort_values("turn_index")
            ax.plot(g["turn_index"], g["context_tokens_est"], lw=1.5, label=str(sid))
    else:
        per = _per_turn(turn_ok, "context_tokens_est")
        ax.fill_between(per.index, per["min"], per["max"], alpha=0.25, label="min–max")
        ax.plot(per.index, per["median"], lw=1.5, label="median of sessions")
    ax.set(title=f"Context size over turns — {mode_word(simulated)}",
           xlabel="turn index", ylabel="context tokens (client estimate, cl100k)")
    return _finished(fig, ax, ncol=4, title="session")


def _window_turn_positions(turn_ok: pd.DataFrame, t_mid: np.ndarray) -> np.ndarray:
    """Turn index reached by each time (seconds): the highest turn sent so far, so the
    positions grow with time even when sessions interleave (interpolated)."""
    order = turn_ok.sort_values("started_mono_s")
    reached = np.maximum.accumulate(order["turn_index"].to_numpy(float))
    pos: np.ndarray = np.interp(t_mid, order["started_mono_s"].to_numpy(float), reached)
    return pos


def server_window_shares(server_metrics: pd.DataFrame) -> pd.DataFrame:
    """Per window: prefix-cache hit share from counter deltas (hits / queries)."""
    d = server_metrics[server_metrics["kind"] == "delta"]
    wide = d.pivot_table(index=["t_start_s", "t_end_s"], columns="metric", values="value",
                         aggfunc="sum")
    if not {"prefix_cache_hits", "prefix_cache_queries"} <= set(wide.columns):
        return pd.DataFrame(columns=["t_mid_s", "share"])
    wide = wide[wide["prefix_cache_queries"] > 0]
    mids = [(a + b) / 2 for a, b in wide.index]
    share = (wide["prefix_cache_hits"] / wide["prefix_cache_queries"]).to_numpy()
    return pd.DataFrame({"t_mid_s": mids, "share": share})


def plot_cache(turn_ok: pd.DataFrame, server_metrics: pd.DataFrame | None, *,
               simulated: bool) -> Figure:
    """Cache reuse over turns, three series kept apart (client, server usage, counters)."""
    fig = new_figure()
    ax = fig.add_subplot()
    t = turn_ok.assign(
        client=turn_ok["reusable_prefix_tokens"] / turn_ok["context_tokens_est"].clip(lower=1),
        server=turn_ok["cache_read_tokens"].astype(float)
        / turn_ok["prompt_tokens"].astype(float).where(lambda p: p > 0))
    g = t.groupby("turn_index")[["client", "server"]].mean()
    ax.plot(g.index, 100 * g["client"], lw=1.5, label="client: reusable prefix / context")
    if g["server"].notna().any():
        ax.plot(g.index, 100 * g["server"], lw=1.2, ls="--",
                label="server-reported: cache read / prompt tokens")
    if server_metrics is not None and not server_metrics.empty and not turn_ok.empty:
        w = server_window_shares(server_metrics)
        if not w.empty:
            x = _window_turn_positions(turn_ok, w["t_mid_s"].to_numpy(float))
            ax.plot(x, 100 * w["share"], "s-", ms=4, lw=1, color="tab:green",
                    label="server counters: prefix-cache hits / queries per scrape window")
    ax.set(title=f"Prefix-cache reuse over turns — {mode_word(simulated)}",
           xlabel="turn index", ylabel="share of prompt tokens (%)", ylim=(0, 105))
    ax.grid(alpha=0.3)
    legend_below(fig, ax, ncol=2)
    return fig


def plot_ttft_vs_context(turns: pd.DataFrame, turn_ok: pd.DataFrame, *,
                         simulated: bool) -> Figure:
    """TTFT against context size; turns after a compaction highlighted (cold cache)."""
    fig = new_figure(8.0, 4.5)
    ax = fig.add_subplot()
    post = post_compaction_mask(turn_ok, compaction_rows(turns))
    ax.scatter(turn_ok.loc[~post, "context_tokens_est"], turn_ok.loc[~post, "ttft_s"], s=10,
               alpha=0.6, label="turns")
    if post.any():
        ax.scatter(turn_ok.loc[post, "context_tokens_est"], turn_ok.loc[post, "ttft_s"], s=30,
                   marker="v", color="tab:red", label="turn right after compaction")
    ax.set(title=f"Time to first token vs context size — {mode_word(simulated)}",
           xlabel="context tokens (client estimate)", ylabel="TTFT (s)")
    return _finished(fig, ax, ncol=2)


def plot_session_lanes(turn_ok: pd.DataFrame, *, simulated: bool,
                       max_sessions: int = 64) -> Figure:
    """One lane per session over wall time; each request a bar coloured by turn tok/s."""
    sessions = sorted(turn_ok["session_id"].unique())[:max_sessions]
    fig = new_figure(10.0, max(3.0, 0.25 * len(sessions) + 1.5), right=1.0)
    ax = fig.add_subplot()
    vmax = float(turn_ok["turn_tok_s"].max() or 1.0)
    coll = None
    for lane, sid in enumerate(sessions):
        g = turn_ok[turn_ok["session_id"] == sid]
        bars = list(zip(g["started_mono_s"], g["e2e_s"].fillna(0), strict=True))
        coll = ax.broken_barh(bars, (lane - 0.4, 0.8), array=g["turn_tok_s"].to_numpy(float),
                              cmap="viridis", clim=(0, vmax))
    if coll is not None:
        fig.colorbar(coll, ax=ax, label="turn tok/s")
    ax.set_yticks(range(len(sessions)), [str(s) for s in sessions], fontsize="small")
    ax.set(title=f"Session lanes (requests over time) — {mode_word(simulated)}",
           xlabel="time since run start (s)", ylabel="session")
    return fig


def plot_overlay(runs: Sequence[tuple[str, pd.DataFrame]], *, simulated: Sequence[bool]) -> Figure:
    """Rolling-median turn tok/s of several runs on one axis (compare)."""
    fig = new_figure()
    ax = fig.add_subplot()
    for (label, turn_ok), sim in zip(runs, simulated, strict=True):
        per = turn_ok.groupby("turn_index")["turn_tok_s"].median()
        line, = ax.plot(per.index, rolling_median(per), lw=2,
                        label=f"{label} ({'simulated' if sim else 'real'})")
        ax.plot(per.index, per, ".", ms=2, alpha=0.3, color=line.get_color())
    kinds = {"simulated" if s else "real" for s in simulated}
    ax.set(title=f"Turn throughput, rolling median — {' + '.join(sorted(kinds))}",
           xlabel="turn index", ylabel="turn tok/s")
    return _finished(fig, ax, ncol=2)


def plot_sweep(rows: Sequence[PointRow]) -> Figure:
    """The steady window's aggregate and per-session tok/s against the number of
    concurrent sessions (rows under summary.json's names)."""
    fig = new_figure(8.0, 4.5, right=1.0 - 0.8 / 8.0)
    ax = fig.add_subplot()
    n = [to_int(r["requested_sessions"]) for r in rows]
    agg = [figure(r, "window_aggregate_tok_s") or np.nan for r in rows]
    per = [figure(r, "window_per_session_tok_s") or np.nan for r in rows]
    ax.plot(n, agg, "o-", color="tab:blue", label="aggregate tok/s")
    ax.set_xscale("log", base=2)
    ax.set_xticks(n, [str(x) for x in n])
    ax2 = ax.twinx()
    ax2.plot(n, per, "s--", color="tab:orange", label="per-session sustained tok/s")
    # A point that never reached steady state has no window figure: a gap in the line,
    # and a hollow marker at its whole-run aggregate (never a value drawn at 0).
    bad = [(to_float(r["requested_sessions"]), float(run_agg)) for r in rows
           if fact(r, "steady_state") is False
           and isinstance(run_agg := figure(r, "aggregate_tok_s"), int | float)]
    if bad:
        ax.plot([x for x, _ in bad], [y for _, y in bad], "o", mfc="none", color="tab:red",
                ms=9, label="not steady (whole-run aggregate)")
    sim = {bool(fact(r, "simulated")) for r in rows}
    ax.set(title=f"Throughput vs sessions — {' + '.join(mode_word(s) for s in sorted(sim))}",
           xlabel="concurrent sessions", ylabel="aggregate tok/s")
    ax2.set_ylabel("per-session tok/s")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(*legend_entries(ax, ax2), loc="center right")
    return fig


def figure_png(fig: Figure) -> bytes:
    """PNG bytes of a figure (Agg)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def write_png(fig: Figure, path: str | Path) -> Path:
    """Save a figure as PNG at `path` (its folder made if need be); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(figure_png(fig))
    return out


def write_sweep_plot(rows: Sequence[PointRow], path: str | Path) -> Path:
    """Save the aggregate / per-session tok/s vs sessions plot of a sweep as PNG."""
    return write_png(plots.plot_sweep(rows), path)


# ------------------------------------------------------------------ figures
def plot_timeline(turns: pd.DataFrame, server: pd.DataFrame | None, *,
                  simulated: bool) -> Figure:
    """Stacked panels against time: KV usage and preemptions, running/waiting requests,
    aggregate tok/s, active sessions and requests in flight."""
    srv = server_series(server)
    cli = client_series(turns)
    has_srv = not srv.empty and srv[["kv_usage", "requests_running"]].notna().any().any()
    panels = 4 if has_srv else 2
    fig = new_figure(10.0, 1.9 * panels + 1.2)
    axes = fig.subplots(panels, 1, sharex=True)
    ax_list: list[Axes] = list(np.atleast_1d(axes))
    fig.subplots_adjust(hspace=0.35, top=1.0 - 0.45 / fig.get_figheight(),
                        bottom=0.5 / fig.get_figheight(), right=1.0 - 2.6 / 10.0)
    dialects = set(server["dialect"].dropna()) if server is not None and "dialect" in server \
        else set()
    src = "twin engine log" if dialects == {"twin"} else "server /metrics"
    i = 0
    if has_srv:
        ax = ax_list[i]
        ax.plot(srv["t_end_s"], 100 * srv["kv_usage"], color="tab:purple", lw=1.4,
                label="KV-cache usage")
        ax.set_ylim(0, 105)
        ax.set_ylabel("KV usage (%)")
        pre = srv["preemptions"].fillna(0)
        ax2 = ax.twinx()
        ax2.bar(srv["t_end_s"], pre, width=_bar_width(srv), color="tab:red", alpha=0.5,
                label="preemptions\n(per window)")
        ax2.set_ylabel("preemptions")
        ax2.set_ylim(bottom=0, top=max(1.0, float(pre.max()) * 1.15))
        _legend_right(ax, ax2)
        ax.set_title(f"Server state over time ({src}) — {mode_word(simulated)}")
        i += 1
        ax = ax_list[i]
        ax.plot(srv["t_end_s"], srv["requests_running"], lw=1.4, label="running")
        ax.plot(srv["t_end_s"], srv["requests_waiting"], lw=1.4, ls="--", label="waiting")
        ax.set_ylabel("requests")
        ax.set_ylim(bottom=0)
        _legend_right(ax)
        i += 1
    ax = ax_list[i]
    ax.plot(cli["t_s"], cli["output_tok_s"], lw=1.0, color="tab:blue",
            label="client: output tok/s\n(replies finished per bin)")
    if has_srv and srv["generation_tok_s"].notna().any():
        ax.step(srv["t_end_s"], srv["generation_tok_s"], where="pre", lw=1.4,
                color="tab:green", label="server: generation tok/s\n(per window)")
    ax.set_ylabel("aggregate tok/s")
    ax.set_ylim(bottom=0)
    if not has_srv:
        ax.set_title(f"Load over time (client side; no server metrics) — {mode_word(simulated)}")
    _legend_right(ax)
    i += 1
    ax = ax_list[i]
    ax.step(cli["t_s"], cli["active_sessions"], where="post", lw=1.4, color="tab:orange",
            label="active sessions")
    ax.plot(cli["t_s"], cli["in_flight"], lw=1.0, color="tab:gray", alpha=0.8,
            label="requests in flight")
    ax.set_ylabel("count")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time since run start (s" + (", simulated)" if simulated else ")"))
    _legend_right(ax)
    for a in ax_list:
        a.grid(alpha=0.3)
    return fig


def _bar_width(srv: pd.DataFrame) -> float:
    t = srv["t_end_s"].to_numpy(float)
    return float(np.median(np.diff(t))) * 0.8 if len(t) > 1 else 1.0


def _legend_right(ax: Axes, *twins: Axes) -> None:
    """The panel's legend beside it, outside the data."""
    handles, labels = legend_entries(ax, *twins)
    offset = 1.1 if twins else 1.01
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(offset, 1.0),
              fontsize="small", frameon=False)


def plot_cdfs(turn_ok: pd.DataFrame, *, simulated: bool) -> Figure:
    """CDFs of TTFT, inter-token time and turn tok/s, p50/p90/p99 marked."""
    fig = new_figure(12.0, 4.2)
    axes = fig.subplots(1, 3)
    fig.subplots_adjust(wspace=0.3, left=0.06, bottom=0.2, top=0.82)
    itl = 1.0 / turn_ok["decode_tok_s"].where(lambda v: v > 0)
    series = [("TTFT (s)", turn_ok["ttft_s"]),
              ("inter-token time (s; per request: 1 / decode tok/s)", itl),
              ("turn tok/s", turn_ok["turn_tok_s"])]
    for ax, (xlabel, values) in zip(axes, series, strict=True):
        x, y = ecdf(values)
        ax.plot(x, y, lw=1.6, color="tab:blue")
        marks = percentiles(values)
        for p, v in marks.items():
            ax.axvline(v, color="tab:red", lw=0.8, ls=":")
            ax.plot([v], [p / 100], "o", color="tab:red", ms=4)
        # the values above the panel, where they can never cover the curve or each other
        ax.set_title("  ".join(f"p{p} {v:.3g}" for p, v in marks.items()),
                     fontsize="small", color="tab:red")
        ax.set(xlabel=xlabel, ylim=(0, 1.02))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of turns ≤ x")
    fig.suptitle(f"Distributions over {len(turn_ok)} turns (p50/p90/p99 in red) — "
                 f"{mode_word(simulated)}")
    return fig


def plot_ramp(turns: pd.DataFrame, server: pd.DataFrame | None, fact: Mapping[str, object],
              *, simulated: bool) -> Figure:
    """A stepped ramp against time: aggregate output tok/s and active sessions, each
    request's TTFT, the steps' goodput share, and KV usage; each step's window shaded
    (green passed, red failed, grey unjudged), its count written above it, the answer
    (the boundary) named in the title."""
    ramp = read_ramp(fact)
    steps = [v for v, _ in held_steps(ramp)]
    tiers = ramp.get("tiers") or []
    cli = client_series(turns)
    srv = server_series(server)
    fig = new_figure(10.0, 9.0)
    axes = fig.subplots(4, 1, sharex=True)
    ax_tok, ax_ttft, ax_good, ax_kv = axes
    ax_tok.plot(cli["t_s"], cli["output_tok_s"], color="tab:blue", lw=1, label="output tok/s")
    twin = ax_tok.twinx()
    twin.step(cli["t_s"], cli["active_sessions"], where="post", color="tab:orange", lw=1,
              label="active sessions")
    ax_tok.set_ylabel("tok/s")
    twin.set_ylabel("sessions")
    ax_tok.legend(*legend_entries(ax_tok, twin), loc="upper left", fontsize=7)
    ok = turns[(turns["request_kind"] == "turn") & turns["ok"].astype(bool)]
    ax_ttft.scatter(ok["started_mono_s"] + ok["ttft_s"].fillna(0.0), ok["ttft_s"], s=3,
                    color="tab:purple")
    ax_ttft.set_ylabel("TTFT (s)")
    rows = judged_requests(turns)
    share = [figure(s.figures, "window_goodput_share") for s in steps]
    for s, g in zip(steps, share, strict=True):
        if ((lo := s.window_start_s) is not None and g is not None
                and (hi := s.window_end_s) is not None):    # a window has both ends
            ax_good.hlines(100 * g, lo, hi, color="tab:green")
    ax_good.set_ylabel(goodput_label(ramp.get("goodput_slo")).replace("goodput", "goodput %", 1)
                       .replace(" (", "\n(", 1), fontsize=8)
    ax_good.set_ylim(-2, 102)
    if not srv.empty and srv["kv_usage"].notna().any():
        ax_kv.plot(srv["t_end_s"], 100 * srv["kv_usage"], color="tab:red", lw=1)
    ax_kv.set_ylabel("KV usage %")
    ax_kv.set_xlabel("seconds since the run started (shaded: each step's window)")
    for s in steps:
        lo, hi, passed = s.window_start_s, s.window_end_s, s.passed
        color = "grey" if not passed else ("tab:green" if passed[0] else "tab:red")
        for ax in axes:
            ax.axvline(s.started_s, color="black", lw=0.5, ls=":")
            if lo is not None and hi is not None:
                ax.axvspan(lo, hi, color=color, alpha=0.12)
        ax_tok.annotate(f"{s.sessions}", (s.started_s, 1.0),
                        xycoords=("data", "axes fraction"), fontsize=7, va="top")
    for ax in axes:
        ax.grid(alpha=0.3)
    answer = "; ".join(f"{t['name']}: {t['sessions']} session(s)" for t in tiers)
    fig.suptitle(f"Stepped ramp — {mode_word(simulated)}"
                 + (f" — answer {answer}" if answer else "")
                 + (f" ({len(rows)} judged requests)" if len(rows) else ""), fontsize=10)
    fig.subplots_adjust(hspace=0.15, top=0.94)
    return fig
