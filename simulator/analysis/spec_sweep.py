"""`endurance sweep … --spec off,ngram:5,ngram:24`: "spec on or off for N sessions?"

One table and one plot: per-session tok/s and N × per-session tok/s (the calibration's
"aggregate") against N, one line per speculation setting, plus each point's gain over
the first setting. The runs themselves are ordinary sweep points; this module only
loops over the settings and renders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simulator.errors import InputError
from simulator.twin.spec_decode.ngram import parse_spec


def spec_list(text: str) -> list[str]:
    """`off,ngram:5,ngram:24` → the settings, each checked (InputError if one is bad)."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if len(specs) < 2:
        raise InputError(f"--spec: a comparison needs two or more settings, got {text!r}")
    for s in specs:
        try:
            parse_spec(s)
        except ValueError as exc:
            raise InputError(f"--spec: {exc}") from None
    return specs


def run_spec_sweep(run_point: Callable[[str, int], dict[str, Any]], specs: Sequence[str],
                   counts: Sequence[int]) -> list[dict[str, Any]]:
    """One row per (setting, N): the run's per-session tok/s and N × it."""
    rows = []
    for spec in specs:
        for n in counts:
            summary = run_point(spec, n)
            per = summary.get("per_session_tok_s")
            engine = summary.get("engine") or {}
            rows.append({"spec": spec, "sessions": n, "per_session_tok_s": per,
                         "n_x_per_session_tok_s": per * n if per is not None else None,
                         "aggregate_tok_s": summary.get("aggregate_tok_s"),
                         "tokens_per_forward_pass": engine.get("tokens_per_forward_pass"),
                         "spec_mean_acceptance_length":
                             engine.get("spec_mean_acceptance_length"),
                         "simulated": summary.get("simulated")})
    return rows


def _f(v: Any, fmt: str = ",.1f") -> str:
    return "—" if v is None else format(v, fmt)


def format_spec_table(rows: Sequence[dict[str, Any]]) -> str:
    """Plain-text table: N, then per setting per-session and N × per-session tok/s, and
    the ratio of N × per-session to the first setting's (>1: this setting wins)."""
    specs = list(dict.fromkeys(r["spec"] for r in rows))
    counts = list(dict.fromkeys(r["sessions"] for r in rows))
    by = {(r["spec"], r["sessions"]): r for r in rows}
    head = ["sessions"]
    for s in specs:
        head += [f"{s} per-session", f"{s} N×per-session"]
        if s != specs[0]:
            head.append(f"{s} vs {specs[0]}")
    lines = [head]
    for n in counts:
        base = by.get((specs[0], n), {}).get("n_x_per_session_tok_s")
        line = [str(n)]
        for s in specs:
            r = by.get((s, n), {})
            agg = r.get("n_x_per_session_tok_s")
            line += [_f(r.get("per_session_tok_s")), _f(agg, ",.0f")]
            if s != specs[0]:
                line.append(f"{agg / base:.2f}×" if agg and base else "—")
        lines.append(line)
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
                     for row in lines)


def write_spec_plot(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """PNG: N × per-session (solid) and per-session (dashed) tok/s vs N per setting."""
    from simulator.analysis.plots import legend_entries, new_figure
    from simulator.analysis.render import figure_png
    fig = new_figure(8.0, 4.5, right=1.0 - 0.8 / 8.0)
    ax = fig.add_subplot()
    ax2 = ax.twinx()
    for i, spec in enumerate(dict.fromkeys(r["spec"] for r in rows)):
        pts = [r for r in rows if r["spec"] == spec]
        n = [r["sessions"] for r in pts]
        color = f"C{i}"
        ax.plot(n, [r["n_x_per_session_tok_s"] or float("nan") for r in pts], "o-",
                color=color, label=f"{spec}: N × per-session")
        ax2.plot(n, [r["per_session_tok_s"] or float("nan") for r in pts], "s--",
                 color=color, label=f"{spec}: per-session")
    counts = sorted({r["sessions"] for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(x) for x in counts])
    ax.set(title="Speculative decoding: on or off, by number of sessions",
           xlabel="concurrent sessions", ylabel="N × per-session tok/s")
    ax2.set_ylabel("per-session tok/s (dashed)")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(*legend_entries(ax, ax2), loc="best", fontsize="small")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(figure_png(fig))
    return path
