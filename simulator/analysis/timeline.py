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
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.analysis.plots import legend_entries, mode_word, new_figure

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


__all__ = ["client_series", "ecdf", "percentiles", "plot_cdfs", "plot_timeline",
           "server_series"]
