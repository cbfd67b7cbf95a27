"""The speed–recall frontier: one scenario run under several values of one setting
(`endurance sweep … --set compaction.kind=none,prune,block`), each with R seeds.

Pure over the runs' summaries and turns tables: speed is the mean over replicates
(with its min–max), recall and retention are pooled over every replicate's probes
(the bootstrap then resamples sessions of all replicates). A point is on the frontier
when no other point is at least as fast and at least as good at recall, and better in
one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from simulator.analysis import plots
from simulator.analysis.recall import recall_figures

SPEED_KEY = "run_per_session_tok_s"      # whole-run sustained tok/s (point_figures)


def _speed(summary: dict[str, Any]) -> float | None:
    v = summary.get(SPEED_KEY, summary.get("per_session_tok_s"))
    return None if v is None else float(v)


def _mean(vals: Sequence[float | None]) -> float | None:
    xs = [v for v in vals if v is not None]
    return float(np.mean(xs)) if xs else None


def point_row(setting: str, value: str, summaries: Sequence[dict[str, Any]],
              turns: Sequence[pd.DataFrame]) -> dict[str, Any]:
    """One value of the swept setting: speed over replicates, recall pooled."""
    speeds = [_speed(s) for s in summaries]
    known = [v for v in speeds if v is not None]
    allrows = pd.concat(list(turns), ignore_index=True) if turns else None
    pooled = recall_figures(allrows) if allrows is not None else {}
    shared = recall_figures(scheduled_probes(allrows)) if allrows is not None else {}
    return {
        "setting": setting, "value": value, "replicates": len(summaries),
        "sustained_tok_s": _mean(speeds),
        "sustained_tok_s_min": min(known) if known else None,
        "sustained_tok_s_max": max(known) if known else None,
        "aggregate_tok_s": _mean([s.get("run_aggregate_tok_s", s.get("aggregate_tok_s"))
                                  for s in summaries]),
        "server_cache_read_share": _mean([s.get("server_cache_read_share") for s in summaries]),
        "ttft_p95_s": _mean([s.get("run_ttft_p95_s", s.get("ttft_p95_s")) for s in summaries]),
        "compaction_events": _mean([s.get("compaction_events") for s in summaries]),
        **{k: pooled.get(k) for k in (
            "probe_requests", "probes_answered", "probe_recall", "probe_recall_ci_low",
            "probe_recall_ci_high", "fact_retention", "fact_retention_ci_low",
            "fact_retention_ci_high", "recall_ci_unit", "recall_by_kind", "recall_by_age")},
        # the probes every policy asks (every_turns, at_turns, the end): comparable
        # across policies, where after-compaction probes come at policy-chosen moments
        **{f"scheduled_{k}": shared.get(k) for k in (
            "probe_requests", "probe_recall", "probe_recall_ci_low", "probe_recall_ci_high",
            "fact_retention")},
        "simulated": any(bool(s.get("simulated")) for s in summaries),
    }


def scheduled_probes(turns: pd.DataFrame) -> pd.DataFrame:
    """Probe rows asked at a scheduled point (`turn` or `end` among their reasons) and
    every non-probe row."""
    if "probe_reason" not in turns.columns:
        return turns
    reason = turns["probe_reason"].fillna("").astype(str)
    keep = (turns["request_kind"] != "probe") | reason.str.contains(r"\b(?:turn|end)\b")
    return turns[keep]


def frontier_recall(r: dict[str, Any]) -> tuple[float | None, float | None, float | None]:
    """(recall, low, high) a point is placed by: the scheduled probes' (the same moments
    under every policy) when there are any, else all probes'."""
    if r.get("scheduled_probe_recall") is not None:
        return (r["scheduled_probe_recall"], r.get("scheduled_probe_recall_ci_low"),
                r.get("scheduled_probe_recall_ci_high"))
    return r.get("probe_recall"), r.get("probe_recall_ci_low"), r.get("probe_recall_ci_high")


def mark_frontier(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with `frontier` set: not dominated in (sustained tok/s, recall)."""
    def pt(r: dict[str, Any]) -> tuple[float, float] | None:
        s, c = r.get("sustained_tok_s"), frontier_recall(r)[0]
        return None if s is None or c is None else (float(s), float(c))
    out = []
    for r in rows:
        p = pt(r)
        dominated = p is None or any(
            q is not None and q[0] >= p[0] and q[1] >= p[1] and q != p
            for q in (pt(o) for o in rows))
        out.append({**r, "frontier": not dominated})
    return out


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{100 * float(v):.1f}%"


def _num(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):,.1f}"


def format_policy_table(rows: Sequence[dict[str, Any]]) -> str:
    """Terminal table: one line per value, speed beside recall (95% CI)."""
    sim = any(r.get("simulated") for r in rows)
    head = ["value", "runs", "sustained tok/s (min–max)", "cache read", "retention",
            "probe recall [95% CI]", "probes", "scheduled recall [95% CI]", "frontier"]
    table = [head]
    for r in rows:
        ci = "" if r.get("probe_recall_ci_low") is None else \
            f" [{_pct(r['probe_recall_ci_low'])}–{_pct(r['probe_recall_ci_high'])}]"
        sci = "" if r.get("scheduled_probe_recall_ci_low") is None else \
            f" [{_pct(r['scheduled_probe_recall_ci_low'])}–" \
            f"{_pct(r['scheduled_probe_recall_ci_high'])}]"
        span = "" if r.get("replicates", 1) < 2 or r.get("sustained_tok_s_min") is None else \
            f" ({_num(r['sustained_tok_s_min'])}–{_num(r['sustained_tok_s_max'])})"
        table.append([str(r["value"]), str(r["replicates"]),
                      _num(r.get("sustained_tok_s")) + span,
                      _pct(r.get("server_cache_read_share")), _pct(r.get("fact_retention")),
                      _pct(r.get("probe_recall")) + ci, str(r.get("probe_requests") or 0),
                      _pct(r.get("scheduled_probe_recall")) + sci,
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


def plot_frontier(rows: Sequence[dict[str, Any]]) -> Figure:
    """Sustained tok/s against probe recall, one point per value (recall's 95% interval
    as a horizontal bar), the frontier joined."""
    fig = plots.new_figure(8.0, 5.0)
    ax = fig.add_subplot()
    pts = [r for r in rows if r.get("sustained_tok_s") is not None
           and frontier_recall(r)[0] is not None]
    for r in pts:
        rec, lo, hi = frontier_recall(r)
        x, y = 100 * float(rec or 0.0), float(r["sustained_tok_s"])
        xerr = None if lo is None or hi is None else [[x - 100 * float(lo)], [100 * float(hi) - x]]
        ax.errorbar([x], [y], xerr=xerr, fmt="o", capsize=3,
                    label=f"{r['value']} ({_pct(r.get('fact_retention'))} retained)")
        ax.annotate(str(r["value"]), (x, y), textcoords="offset points",
                    xytext=(-5, 6) if x > 75 else (5, 6), ha="right" if x > 75 else "left",
                    fontsize="small")
    front = sorted((r for r in pts if r.get("frontier")),
                   key=lambda r: float(frontier_recall(r)[0] or 0.0))
    if len(front) > 1:
        ax.plot([100 * float(frontier_recall(r)[0] or 0.0) for r in front],
                [float(r["sustained_tok_s"]) for r in front], "--", color="grey",
                alpha=0.6, label="frontier")
    sim = any(r.get("simulated") for r in rows)
    setting = rows[0]["setting"] if rows else ""
    ax.set(title=f"Speed vs recall over {setting} — {plots.mode_word(sim)}",
           xlabel="probe recall (%) at the scheduled probes (every_turns, the end)",
           ylabel="sustained tok/s (per session)")
    ax.set_xlim(-2, 102)
    top = max((float(r["sustained_tok_s"]) for r in pts), default=1.0)
    ax.set_ylim(0, 1.15 * top)             # room for the labels above the top point
    ax.grid(alpha=0.3)
    plots.legend_below(fig, ax, ncol=3)
    return fig


def write_frontier_plot(rows: list[dict[str, Any]], path: Any) -> Any:
    """Save the speed–recall plot as PNG; returns its path."""
    from pathlib import Path

    from simulator.analysis.render import figure_png
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(figure_png(plot_frontier(rows)))
    return p


def split_listed_set(sets: Sequence[str]) -> tuple[str, list[str], list[str]] | None:
    """(key, values, the other --set options) when one `--set KEY=a,b,c` lists values;
    None when none does. A value in brackets or braces is one YAML value, not a list."""
    listed = []
    for i, s in enumerate(sets):
        key, sep, val = s.partition("=")
        if sep and "," in val and not val.strip().startswith(("[", "{")):
            listed.append(i)
    if not listed:
        return None
    if len(listed) > 1:
        from simulator.errors import InputError
        raise InputError("--set: only one setting may list values (KEY=a,b,c) in a sweep")
    key, _, val = sets[listed[0]].partition("=")
    values = [v.strip() for v in val.split(",") if v.strip()]
    return key.strip(), values, [s for j, s in enumerate(sets) if j != listed[0]]


def _age_key(label: str) -> float:
    head = label.split("-")[0].rstrip("+")
    return float(head) if head.isdigit() else float("inf")


def plot_recall_by_age(series: Sequence[tuple[str, dict[str, Any]]], *,
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


def write_age_plot(rows: Sequence[dict[str, Any]], path: Any) -> Any:
    """Save recall vs fact age, one line per swept value, as PNG; returns its path."""
    from pathlib import Path

    from simulator.analysis.render import figure_png
    p = Path(path)
    p.write_bytes(figure_png(plot_recall_by_age(
        [(str(r["value"]), r.get("recall_by_age") or {}) for r in rows],
        simulated=any(r.get("simulated") for r in rows))))
    return p
