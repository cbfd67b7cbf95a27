"""Tables and plots of the sweeps' many-run answers, one renderer per kind.

`RENDER[name]` gives the table and the plot of a sweep's rows (`sweep`, `spec-sweep`,
`policy-sweep`, `copy-sweep`); the tier and fleet answers of `size` have their own.
Rows are read under summary.json's names: `window_*` figures are the steady-state
window's, the plain names the whole run's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from simulator.analysis.copy_sweep import BreakEven, CopyRow, break_even, read_copy_rows
from simulator.analysis.fleet_sizing import FleetSizing
from simulator.analysis.metric_keys import fact, figure
from simulator.analysis.point_row import PointRow, read_point_rows
from simulator.analysis.policy_sweep import PolicyRow, frontier_recall, read_policy_rows
from simulator.analysis.run_summary import record_of
from simulator.analysis.tier_sizing import KNEE_SHARE, TierRow, knee, read_tier_rows
from simulator.report import plots
from simulator.report.console import format_sweep_table
from simulator.report.plots import legend_entries, new_figure
from simulator.util.formats import number, percent
from simulator.util.numbers import to_float, to_int


def _dash(v: float | None, fmt: str = ",.1f") -> str:
    return "—" if v is None else format(v, fmt)


def _na(v: float | None, fmt: str = ".2f") -> str:
    return "n/a" if v is None else format(float(v), fmt)


def format_spec_table(rows: Sequence[PointRow]) -> str:
    """Plain-text table: N, then per setting per-session and N × per-session tok/s, and
    the ratio of N × per-session to the first setting's (>1: this setting wins)."""
    specs = list(dict.fromkeys(r["spec"] for r in rows))
    counts = list(dict.fromkeys(r["requested_sessions"] for r in rows))
    by: dict[tuple[str, int | None], PointRow] = {
        (r["spec"], r["requested_sessions"]): r for r in rows}
    head = ["sessions"]
    for s in specs:
        head += [f"{s} per-session", f"{s} N×per-session"]
        if s != specs[0]:
            head.append(f"{s} vs {specs[0]}")
    lines = [head]
    for n in counts:
        base = by.get((specs[0], n), {}).get("window_n_x_per_session_tok_s")
        line = [str(n)]
        for s in specs:
            r = by.get((s, n), {})
            agg = figure(r, "window_n_x_per_session_tok_s")
            line += [_dash(figure(r, 'window_per_session_tok_s')), _dash(agg, ",.0f")]
            if s != specs[0]:
                line.append(f"{agg / base:.2f}×" if agg and base else "—")
        lines.append(line)
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
                     for row in lines)


def write_spec_plot(rows: Sequence[PointRow], path: str | Path) -> Path:
    """PNG: N × per-session (solid) and per-session (dashed) tok/s vs N per setting."""
    fig = new_figure(8.0, 4.5, right=1.0 - 0.8 / 8.0)
    ax = fig.add_subplot()
    ax2 = ax.twinx()
    for i, spec in enumerate(dict.fromkeys(r["spec"] for r in rows)):
        pts = [r for r in rows if r["spec"] == spec]
        n = [to_int(r["requested_sessions"]) for r in pts]
        color = f"C{i}"
        ax.plot(n, [r["window_n_x_per_session_tok_s"] or float("nan") for r in pts], "o-",
                color=color, label=f"{spec}: N × per-session")
        ax2.plot(n, [r["window_per_session_tok_s"] or float("nan") for r in pts], "s--",
                 color=color, label=f"{spec}: per-session")
    counts = sorted({r["requested_sessions"] or 0 for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(x) for x in counts])
    ax.set(title="Speculative decoding: on or off, by number of sessions",
           xlabel="concurrent sessions", ylabel="N × per-session tok/s")
    ax2.set_ylabel("per-session tok/s (dashed)")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(*legend_entries(ax, ax2), loc="best", fontsize="small")
    return plots.write_png(fig, path)


def format_break_even(b: BreakEven) -> str:
    """One line: where `spec` starts to pay for N sessions, and how that was found."""
    head = f"{b['requested_sessions']} session{'s' if b['requested_sessions'] != 1 else ''}, {b['spec']}"
    ref = _na(b.get("reference_tokens_per_pass"))
    if b["kind"] == "interpolated":
        lo, hi = b["between"]
        return (f"{head}: pays from copy ≈ {b['copy']:.2f} (reference ≈ {ref} tok/pass), "
                f"interpolated between the levels {lo:g} and {hi:g}")
    if b["kind"] == "below":
        return (f"{head}: pays at every level measured, from copy {b['copy']:g} "
                f"(reference {ref} tok/pass) up")
    if b["kind"] == "above":
        return (f"{head}: does not pay at any level measured, up to copy {b['copy']:g} "
                f"(reference {ref} tok/pass)")
    return f"{head}: no speed measured"


def format_copy_table(rows: Sequence[CopyRow]) -> str:
    """Terminal table: per N and level, the reference tokens/pass, each speed, the
    ratio (min–max over seeds); then one break-even line per (N, setting)."""
    sim = any(r.get("simulated") for r in rows)
    head = ["sessions", "copy", "reference tok/pass", "setting", "setting tok/s",
            "baseline tok/s", "ratio (min–max)"]
    table = [head]
    for r in rows:
        span = "" if r["replicates"] < 2 or r["ratio_min"] is None else \
            f" ({r['ratio_min']:.2f}–{r['ratio_max']:.2f})"
        table.append([str(r["requested_sessions"]), f"{r['copy']:g}", _na(r["reference_tokens_per_pass"]),
                      r["spec"], _na(r["spec_tok_s"], ",.1f"),
                      _na(r["baseline_tok_s"], ",.1f"),
                      ("n/a" if r["ratio"] is None else f"{r['ratio']:.2f}×") + span])
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(t, widths, strict=True)) for t in table]
    base = rows[0]["baseline"] if rows else "?"
    reps = rows[0]["replicates"] if rows else 0
    title = (f"speculation by copy share (vs {base}) — "
             + ("SIMULATED (twin)" if sim else "real endpoint"))
    notes = [f"ratio: setting ÷ {base} sustained per-session tok/s (whole run), per seed, "
             f"mean over {reps} seed{'s' if reps != 1 else ''}; copy: the code-edit turns' "
             "repeat_fraction; reference tok/pass: what ngram:24 would see, measured in "
             "the level's runs",
             *[format_break_even(b) for b in break_even(rows)]]
    return "\n".join([title, *lines, *notes])


def plot_copy(rows: Sequence[CopyRow]) -> Figure:
    """Speed ratio against the measured reference tokens/pass, one line per (N,
    setting), min–max over seeds as error bars, the break-even line at 1×."""
    fig = plots.new_figure(8.0, 4.8)
    ax = fig.add_subplot()
    series = list(dict.fromkeys((r["requested_sessions"], r["spec"]) for r in rows))
    for i, (n, spec) in enumerate(series):
        pts = [r for r in rows if (r["requested_sessions"], r["spec"]) == (n, spec)
               and r["ratio"] is not None]
        x = [r["reference_tokens_per_pass"] if r["reference_tokens_per_pass"] is not None
             else float("nan") for r in pts]
        # a row with a ratio has its seeds' min and max (`copy_rows`)
        y = [to_float(r["ratio"]) for r in pts]
        lo = [to_float(r["ratio_min"]) for r in pts]
        hi = [to_float(r["ratio_max"]) for r in pts]
        err = [[v - m for v, m in zip(y, lo, strict=True)],
               [m - v for v, m in zip(y, hi, strict=True)]]
        ax.errorbar(x, y, yerr=err, fmt="o-", capsize=3, color=f"C{i % 10}",
                    label=f"{n} session{'s' if n != 1 else ''}, {spec}")
        for r, xv, yv in zip(pts, x, y, strict=True):
            ax.annotate(f"{r['copy']:g}", (xv, yv), textcoords="offset points",
                        xytext=(4, -10), fontsize="x-small", color=f"C{i % 10}")
    ax.axhline(1.0, color="grey", ls="--", alpha=0.7)
    base = rows[0]["baseline"] if rows else "?"
    sim = any(r.get("simulated") for r in rows)
    ax.set(title=f"Where speculation pays — {plots.mode_word(sim)}",
           xlabel="reference tokens per pass (ngram:24; labels: copy share)",
           ylabel=f"speed ÷ {base} (per-session tok/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    plots.legend_below(fig, ax, ncol=3)
    return fig


def write_copy_plot(rows: Sequence[CopyRow], path: str | Path) -> Path:
    """Save the plot as PNG; returns its path."""
    return plots.write_png(plot_copy(rows), path)


def format_policy_table(rows: Sequence[PolicyRow]) -> str:
    """Terminal table: one line per value, speed beside recall (95% CI)."""
    sim = any(r.get("simulated") for r in rows)
    head = ["value", "runs", "sustained tok/s (min–max)", "cache read", "retention",
            "probe recall [95% CI]", "probes", "scheduled recall [95% CI]", "frontier"]
    table = [head]
    for r in rows:
        ci = "" if r.get("probe_recall_ci_low") is None else \
            f" [{percent(r['probe_recall_ci_low'])}–{percent(r['probe_recall_ci_high'])}]"
        sci = "" if r.get("scheduled_probe_recall_ci_low") is None else \
            f" [{percent(r['scheduled_probe_recall_ci_low'])}–" \
            f"{percent(r['scheduled_probe_recall_ci_high'])}]"
        span = "" if r.get("replicates", 1) < 2 or r.get("sustained_tok_s_min") is None else \
            f" ({number(r['sustained_tok_s_min'])}–{number(r['sustained_tok_s_max'])})"
        table.append([str(r["value"]), str(r["replicates"]),
                      number(r.get("sustained_tok_s")) + span,
                      percent(r.get("mean_server_cache_read_share")), percent(r.get("fact_retention")),
                      percent(r.get("probe_recall")) + ci, str(r.get("probe_requests") or 0),
                      percent(r.get("scheduled_probe_recall")) + sci,
                      "yes" if r.get("frontier") else ""])
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip()
             for t in table]
    setting = rows[0]["setting"] if rows else "?"
    title = f"sweep over {setting} — " + ("SIMULATED (twin)" if sim else "real endpoint")
    notes = ["sustained tok/s: Σ output / Σ e2e per session (whole run, mean over runs); "
             "recall and retention pooled over every run's probes; scheduled recall: "
             "only the probes every policy asks (every_turns, at_turns, the end), the "
             "comparable figure (after-compaction probes come when each policy compacts)"]
    if sim:
        notes.append("twin: recall = retention by construction (it answers from the prompt)")
    if not any(r.get("probe_requests") for r in rows):
        notes.append("no recall probes: add a `probes:` section (scenarios/claude-code-recall.yaml)")
    return "\n".join([title, *lines, *notes])


def plot_frontier(rows: Sequence[PolicyRow]) -> Figure:
    """Sustained tok/s against probe recall, one point per value (recall's 95% interval
    as a horizontal bar), the frontier joined."""
    fig = plots.new_figure(8.0, 5.0)
    ax = fig.add_subplot()
    pts = [r for r in rows if r.get("sustained_tok_s") is not None
           and frontier_recall(r)[0] is not None]
    for r in pts:
        rec, lo, hi = frontier_recall(r)
        x, y = 100 * float(rec or 0.0), to_float(r["sustained_tok_s"])
        xerr = None if lo is None or hi is None else [[x - 100 * float(lo)], [100 * float(hi) - x]]
        ax.errorbar([x], [y], xerr=xerr, fmt="o", capsize=3,
                    label=f"{r['value']} ({percent(r.get('fact_retention'))} retained)")
        ax.annotate(str(r["value"]), (x, y), textcoords="offset points",
                    xytext=(-5, 6) if x > 75 else (5, 6), ha="right" if x > 75 else "left",
                    fontsize="small")
    front = sorted((r for r in pts if r.get("frontier")),
                   key=lambda r: float(frontier_recall(r)[0] or 0.0))
    if len(front) > 1:
        ax.plot([100 * float(frontier_recall(r)[0] or 0.0) for r in front],
                [to_float(r["sustained_tok_s"]) for r in front], "--",
                color="grey", alpha=0.6, label="frontier")
    sim = any(r.get("simulated") for r in rows)
    setting = rows[0]["setting"] if rows else ""
    ax.set(title=f"Speed vs recall over {setting} — {plots.mode_word(sim)}",
           xlabel="probe recall (%) at the scheduled probes (every_turns, the end)",
           ylabel="sustained tok/s (per session)")
    ax.set_xlim(-2, 102)
    top = max((to_float(r["sustained_tok_s"]) for r in pts), default=1.0)
    ax.set_ylim(0, 1.15 * top)             # room for the labels above the top point
    ax.grid(alpha=0.3)
    plots.legend_below(fig, ax, ncol=3)
    return fig


def write_frontier_plot(rows: Sequence[PolicyRow], path: str | Path) -> Path:
    """Save the speed–recall plot as PNG; returns its path."""
    return plots.write_png(plot_frontier(rows), path)


def _age_key(label: str) -> float:
    head = label.split("-")[0].rstrip("+")
    return float(head) if head.isdigit() else float("inf")


def plot_recall_by_age(series: Sequence[tuple[str, Mapping[str, Mapping[str, float | None]]]], *,
                       simulated: bool) -> Figure:
    """Probe recall (solid) and fact retention (dotted) against fact age, one line per
    run or policy (`recall_by_age` breakdowns)."""
    fig = plots.new_figure(8.0, 4.5)
    ax = fig.add_subplot()
    labels = sorted({b for _, by_age in series for b in by_age}, key=_age_key)
    x = list(range(len(labels)))
    for i, (name, by_age) in enumerate(series):
        color = f"C{i % 10}"
        rec = [by_age.get(b, {}).get("probe_recall") for b in labels]
        ret = [by_age.get(b, {}).get("fact_retention") for b in labels]
        ax.plot(x, [np.nan if v is None else 100 * v for v in rec], "o-", color=color,
                label=f"{name}: recall")
        ax.plot(x, [np.nan if v is None else 100 * v for v in ret], ":", color=color,
                label=f"{name}: retention")
    ax.set_xticks(x, labels)
    ax.set(title=f"Recall vs fact age — {plots.mode_word(simulated)}",
           xlabel="fact age (turns since planted)", ylabel="% of probes")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    plots.legend_below(fig, ax, ncol=2)
    return fig


def write_age_plot(rows: Sequence[PolicyRow], path: str | Path) -> Path:
    """Save recall vs fact age, one line per swept value, as PNG; returns its path."""
    return plots.write_png(plot_recall_by_age(
        [(str(r["value"]), r.get("recall_by_age") or {}) for r in rows],
        simulated=any(r.get("simulated") for r in rows)), path)


def format_tier_table(data: Sequence[Mapping[str, object]]) -> str:
    """One line per tier size: sessions meeting the SLOs, range, binding, cards."""
    rows = read_tier_rows(data)
    head = ["tier GiB", "policy", "sessions", "range", "binding", "cards"]
    table = [head]
    for r in rows:
        lo, hi = r.get("sessions_range") or (r["sessions"], r["sessions"])
        cards = r.get("cards")
        table.append([f"{r['kv_offload_gib']:g}", str(r.get("policy", "")), str(r["sessions"]),
                      f"{lo}–{hi}", f"{r.get('binding')} [{r.get('binding_kind')}]",
                      "n/a" if not cards else f"{cards[0]}–{cards[1]}"])
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(t, widths, strict=True)) for t in table]
    k = knee(rows)
    base = next((r["sessions"] for r in rows if r["kv_offload_gib"] == 0), None)
    notes = []
    if base is not None:
        notes.append(f"HBM alone (tier 0): {base} sessions")
    notes.append("knee: no tier size meets the SLOs" if k is None else
                 f"knee: {k:g} GiB reaches ≥{KNEE_SHARE:.0%} of the most sessions any tier gave")
    return "\n".join(["sessions per card by host KV tier — SIMULATED (twin)", *lines, *notes])


def plot_tiers(rows: Sequence[TierRow]) -> Figure:
    """Sessions meeting the SLOs against tier size, one line per policy."""
    fig = new_figure(7.0, 4.0)
    ax = fig.add_subplot()
    for policy in sorted({str(r.get("policy", "")) for r in rows}):
        mine = sorted((r for r in rows if str(r.get("policy", "")) == policy),
                      key=lambda r: r["kv_offload_gib"])
        ax.plot([r["kv_offload_gib"] for r in mine], [r["sessions"] for r in mine], "o-",
                label=policy)
    k = knee(rows)
    if k is not None:
        ax.axvline(k, color="grey", ls=":", label=f"knee {k:g} GiB")
    ax.set(title="Sessions per card vs host KV tier — simulated",
           xlabel="host KV tier (GiB, --kv-offload-gib)", ylabel="sessions meeting the SLOs")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def format_fleet_sizing(f: FleetSizing) -> str:
    lines = [f"fleet behind {f.router}: a team of {f.team_sessions} sessions needs "
             + (f"{f.replicas} replica(s)" if f.replicas else
                f"more than {f.max_replicas} replicas")
             + (f" (division said {f.division})" if f.division else "")]
    for p in sorted(f.probes, key=lambda p: p.replicas):
        s = record_of(p.summary)
        fl = fact(s, "fleet") or {}
        tok, ttft = figure(s, "window_per_session_tok_s"), figure(s, "window_ttft_p95_s")
        share = None if (v := fl.get("cache_read_share")) is None else to_float(v)
        lines.append(f"  R={p.replicas:>3}: {'pass' if p.passed else 'FAIL'}"
                     + (f"  per-session {tok:,.1f} tok/s" if tok is not None else "")
                     + (f", TTFT p95 {ttft:.2f} s" if ttft is not None else "")
                     + (f", cache read {share:.1%}" if share is not None else "")
                     + (f"  ({'; '.join(p.failed)})" if p.failed else ""))
    return "\n".join(lines)


def write_tier_plot(rows: Sequence[Mapping[str, object]], path: Path) -> Path:
    """Save the sessions-per-tier plot as PNG; returns its path."""
    return plots.write_png(plot_tiers(read_tier_rows(rows)), path)


def _policy_plots(rows: Sequence[PolicyRow], path: Path) -> list[Path]:
    out = [Path(write_frontier_plot(rows, path))]
    if any(r.get("probe_requests") for r in rows):
        out.append(Path(write_age_plot(rows, path.with_name("recall-vs-age.png"))))
    return out


@dataclass(frozen=True)
class Renderer:
    """How a sweep kind's rows are shown: a table and the plots written beside it (rows
    as the sweep made them or its JSON holds them; each kind reads its own record)."""

    table: Callable[[Sequence[Mapping[str, object]]], str]
    write: Callable[[Sequence[Mapping[str, object]], Path], list[Path]]


RENDER: Mapping[str, Renderer] = {
    "sweep": Renderer(lambda rows: format_sweep_table(read_point_rows(rows)),
                      lambda rows, p: [plots.write_sweep_plot(read_point_rows(rows), p)]),
    "spec-sweep": Renderer(lambda rows: format_spec_table(read_point_rows(rows)),
                           lambda rows, p: [write_spec_plot(read_point_rows(rows), p)]),
    "policy-sweep": Renderer(lambda rows: format_policy_table(read_policy_rows(rows)),
                             lambda rows, p: _policy_plots(read_policy_rows(rows), p)),
    "copy-sweep": Renderer(lambda rows: format_copy_table(read_copy_rows(rows)),
                           lambda rows, p: [write_copy_plot(read_copy_rows(rows), p)]),
}
