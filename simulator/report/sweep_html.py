"""`endurance report SWEEP_DIR`: one self-contained HTML page for a sweep or size folder.

Per-session tok/s and TTFT p95 against N (SLO lines for a `size` folder), KV usage and
preemptions, $/1M tokens, achieved vs requested concurrency, and for each point a
timeline of active sessions with its steady-state window shaded. Every figure is the
steady-state window's unless named "whole run"; points that never reached steady state
are drawn as red crosses and listed with the reason.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.analysis import metrics_registry as registry
from simulator.analysis.load import load_run
from simulator.analysis.metric_keys import FactKey, MetricKey, fact, figure
from simulator.analysis.point_row import PointRow, read_point_row
from simulator.analysis.steady import session_spans
from simulator.analysis.target import target_of_runs
from simulator.errors import InputError
from simulator.report.console import flag
from simulator.report.html import build_html
from simulator.report.plots import figure_png, mode_word, new_figure
from simulator.report.team_size_html import is_team_size, render_team_report
from simulator.util.bounded import json_file
from simulator.util.numbers import to_float, to_int


def is_sizing_dir(path: Path) -> bool:
    """A `sweep` or `size` output folder (not a run directory)."""
    return (path / "sweep.json").is_file() or (path / "size.json").is_file()


def _by_sessions(rows: list[PointRow]) -> list[PointRow]:
    return sorted(rows, key=lambda r: to_int(r["requested_sessions"]))


def load_points(folder: Path) -> tuple[list[PointRow], list[str]]:
    """(one row per point, SLO texts) from sweep.json or size.json (first seed's probes),
    under today's names (`analysis.point_row.read_point_row` reads older files)."""
    if (folder / "sweep.json").is_file():
        rows = [read_point_row(r) for r in _rows_of(folder / "sweep.json")]
        return _by_sessions(rows), []
    data = json_file(folder / "size.json", what="size answer")
    dirs: dict[str, list[str]] = data.get("run_dirs", {})
    rows = []
    for p in data.get("probes", []):
        if p.get("seed_offset", 0):
            continue
        row = read_point_row(p)
        runs = dirs.get(str(row["requested_sessions"]), [])
        row["run_dirs"] = runs[:1]
        rows.append(row)
    return _by_sessions(rows), list(data.get("slos", []))


def _xy(rows: list[PointRow], key: MetricKey) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = np.array([r["requested_sessions"] for r in rows], dtype=float)
    y = np.array([v if isinstance(v := r.get(key), int | float) else np.nan for r in rows],
                 dtype=float)
    bad = np.array([fact(r, "steady_state") is False for r in rows])
    return n, y, bad


def _slo_lines(ax: Axes, slos: list[str], key: str) -> None:
    """The SLOs judged on the figure `key` (an SLO on a metric reads its window's)."""
    for s in slos:
        for op in (">=", "<=", ">", "<"):
            metric, sep, value = s.partition(op)
            if sep and key in (metric, registry.WINDOW_OF.get(metric)):
                ax.axhline(float(value), color="tab:red", ls=":", label=f"SLO {s}")
                break


def _metric_plot(rows: list[PointRow], panels: list[tuple[MetricKey, str, MetricKey | None]],
                 title: str, slos: list[str]) -> Figure:
    """One panel per (key, y label, whole-run key or None) against sessions."""
    fig = new_figure(10.0, 3.6)
    for i, (key, label, run_key) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        n, y, bad = _xy(rows, key)
        ax.plot(n, y, "o-", color="tab:blue", label="steady-state window")
        if run_key is not None:
            _, yr, _ = _xy(rows, run_key)
            ax.plot(n, yr, ".:", color="tab:gray", label="whole run")
        for i, x in enumerate(n[bad]):      # no value to draw: mark N, imply none
            ax.axvline(x, color="tab:red", ls=":", lw=1,
                       label="not steady (no window figure)" if i == 0 else None)
        _slo_lines(ax, slos, key)
        ax.set_xscale("log", base=2)
        ax.set_xticks(n, [str(int(x)) for x in n])
        ax.set(xlabel="requested sessions", ylabel=label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.subplots_adjust(wspace=0.35, top=0.85)
    return fig


def _achieved_plot(rows: list[PointRow]) -> Figure:
    fig = new_figure(6.0, 4.0)
    ax = fig.add_subplot()
    n, ach, bad = _xy(rows, "achieved_sessions")
    _, run, _ = _xy(rows, "achieved_sessions_run")
    ax.plot(n, n, "-", color="black", lw=0.8, label="requested")
    ax.plot(n, 0.9 * n, "--", color="tab:red", lw=0.8, label="90% of requested")
    ax.plot(n, ach, "o-", color="tab:blue", label="achieved (window, or run if none)")
    ax.plot(n, run, ".:", color="tab:gray", label="achieved, whole run")
    if bad.any():
        ax.plot(n[bad], ach[bad], "o", mfc="none", color="tab:red", ms=10, label="not steady")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(n, [str(int(x)) for x in n])
    ax.set(title="Achieved vs requested concurrency", xlabel="requested sessions",
           ylabel="time-weighted mean active sessions")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def active_sessions_steps(turns: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(times s, active sessions from each time on): the step function of session spans."""
    sp = session_spans(turns)
    t = np.concatenate([sp["start_s"].to_numpy(float), sp["end_s"].to_numpy(float)])
    d = np.concatenate([np.ones(len(sp)), -np.ones(len(sp))])
    order = np.lexsort((d, t))        # at equal times an end before a start
    return t[order], np.cumsum(d[order])


def _timeline_plot(rows: list[PointRow]) -> Figure | None:
    panels = [(r, r["run_dirs"][0]) for r in rows if r.get("run_dirs")]
    if not panels:
        return None
    fig = new_figure(10.0, 1.6 + 1.5 * len(panels))
    for i, (r, run_dir) in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        try:
            _, turns, _ = load_run(run_dir)
        except InputError:
            ax.set_title(f"{r['requested_sessions']} sessions: run directory missing", fontsize=8)
            continue
        t, active = active_sessions_steps(turns)
        ax.step(t, active, where="post", color="tab:blue", lw=1)
        ax.axhline(to_int(r["requested_sessions"]), color="black", lw=0.6, ls="--")
        lo, hi = fact(r, "window_start_s"), fact(r, "window_end_s")
        if lo is not None and hi is not None:
            ax.axvspan(lo, hi, color="tab:green", alpha=0.2)
        flag = "steady" if fact(r, "steady_state") else f"NOT steady: {fact(r, 'steady_state_reason')}"
        ax.set_title(f"{r['requested_sessions']} sessions requested — {flag}", fontsize=8,
                     loc="left")
        ax.set_ylim(bottom=0)
        ax.set_ylabel("active", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.axes[-1].set_xlabel("seconds since the run started (green: steady-state window)")
    fig.subplots_adjust(hspace=0.7, top=1.0 - 0.3 / (1.6 + 1.5 * len(panels)))
    return fig


def _table_html(rows: list[PointRow]) -> str:
    cols: list[tuple[MetricKey | FactKey, str, str]] = [("requested_sessions", "requested", "{:d}"),
            ("achieved_sessions", "achieved", "{:.1f}"),
            ("steady_state", "steady", "{}"),
            ("window_aggregate_tok_s", "aggregate tok/s", "{:,.1f}"),
            ("window_n_x_per_session_tok_s", "N×per-session tok/s", "{:,.1f}"),
            ("window_per_session_tok_s", "per-session tok/s", "{:,.1f}"),
            ("window_ttft_p95_s", "TTFT p95 s", "{:.2f}"), ("kv_usage_peak", "KV peak", "{:.1%}"),
            ("preemptions", "preemptions", "{:,.0f}"),
            ("window_usd_per_mtok", "$/1M tok", "{:.3f}"),
            ("aggregate_tok_s", "whole-run aggregate tok/s", "{:,.1f}"),
            ("usd_per_mtok", "whole-run $/1M tok", "{:.3f}"),
            ("steady_state_reason", "why not steady", "{}")]

    def cell(fmt: str, v: object) -> str:
        if v is None:
            return "n/a"
        if isinstance(v, bool):
            return "yes" if v else "no"
        if fmt == "{:d}":
            return str(to_int(v))
        return fmt.format(v) if fmt == "{}" else fmt.format(to_float(v))

    head = "".join(f"<th>{html.escape(h)}</th>" for _, h, _ in cols)
    body = "\n".join("<tr>" + "".join(f"<td>{html.escape(cell(f, r.get(k)))}</td>"
                                      for k, _, f in cols) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>\n{body}</table>"


def _size_data(folder: Path) -> dict[str, object] | None:
    f = folder / "size.json"
    if not f.is_file():
        return None
    data = json_file(f, what="size answer")
    if not isinstance(data, dict):
        raise InputError(f"{f}: expected a JSON object")
    return data


def _rows_of(path: Path) -> list[dict[str, object]]:
    """sweep.json's list of point rows (one InputError line when it is no list of
    objects)."""
    rows = json_file(path, what="sweep table")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError(f"{path}: expected a JSON list of points")
    return rows


def _texts(v: object) -> list[str]:
    """A list of labels as size.json holds it (SLOs, failed metrics; [] when missing)."""
    return [str(x) for x in v] if isinstance(v, list) else []


def _objects(v: list[object]) -> list[dict[str, object]]:
    """The objects of a JSON list (size.json's probes)."""
    return [x for x in v if isinstance(x, dict)]


def _target(folder: Path, rows: list[PointRow]) -> str:
    """Hardware, model, quantisation and scenario: from size.json, else the first run."""
    data = _size_data(folder) or {}
    found = data.get("target") or target_of_runs(d for r in rows for d in r.get("run_dirs") or [])
    return str(found) if found else "unknown (no readable run directory)"


def answer_facts(folder: Path) -> list[tuple[str, str]]:
    """A size folder's answer first: sessions meeting the SLOs, the binding constraint,
    the range over seeds and the cards for the team (none for a sweep)."""
    data = _size_data(folder)
    if data is None:
        return []
    n, slos = data.get("sessions", 0), " and ".join(_texts(data.get("slos", [])))
    out = [("answer", f"{n} session(s) per card meet {slos}" if n else
            f"no session count meets {slos}")]
    out.append(("binding constraint", f"{data.get('binding')} [{data.get('binding_kind')}]"))
    got = data.get("answers_by_seed") or []
    answers = [to_int(a) for a in got] if isinstance(got, list) else []
    if len(answers) > 1:
        lo, hi = min(answers), max(answers)
        seeds = "seeds" if data.get("repeats_reseeded", True) else "searches (same seed)"
        out.append(("range over seeds", f"{lo}–{hi} sessions over {len(answers)} {seeds} "
                    f"(per search: {', '.join(map(str, answers))})"))
    cards, team = data.get("cards"), data.get("team_sessions")
    if isinstance(cards, list) and cards and team:
        lo_c, hi_c = cards
        out.append(("cards for the team", f"a team of {team} sessions needs "
                    + (f"{lo_c} card(s)" if lo_c == hi_c else f"{lo_c}–{hi_c} cards")))
    if data.get("kv_capacity_sessions") is not None:
        out.append(("KV-capacity bound", f"{data['kv_capacity_sessions']} sessions at peak context"))
    return out


def _probes_html(folder: Path) -> str:
    """Every probe of a size search, the repeats with other seeds included."""
    data = _size_data(folder)
    probes = data.get("probes") if data else None
    if not isinstance(probes, list) or not probes:
        return ""
    head = "".join(f"<th>{h}</th>" for h in ("sessions", "seed", "passed", "failed",
                                             "per-session tok/s", "TTFT p95 s", "steady"))

    def num(v: object, fmt: str) -> str:
        return "n/a" if not isinstance(v, int | float) or isinstance(v, bool) else fmt.format(v)

    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in (
            str(p["requested_sessions"]), f"+{p.get('seed_offset', 0)}",
            "yes" if p.get("passed") else "no",
            ", ".join(p.get("failed") or []) or "—",
            num(figure(p, "window_per_session_tok_s"), "{:,.1f}"),
            num(figure(p, "window_ttft_p95_s"), "{:.2f}"),
            flag(fact(p, "steady_state")))) + "</tr>"
        for p in map(read_point_row, _objects(probes)))
    return f"\n<h2>Probes, in the order run (repeats with other seeds included)</h2>\n" \
           f"<table><tr>{head}</tr>\n{body}</table>"


def render_sizing_report(folder: str | Path) -> Path:
    """Write FOLDER/sizing_report.html; returns its path."""
    folder = Path(folder)
    if is_team_size(folder):                 # a team replay's cards (issue 52)
        return render_team_report(folder)
    rows, slos = load_points(folder)
    if not rows:
        raise InputError(f"{folder}: no points to report on")
    sim = any(fact(r, "simulated") for r in rows)
    idle = any(fact(r, "usd_per_mtok_counts_idle") for r in rows)
    figs: list[tuple[str, Figure | None]] = [
        ("Per-session tok/s and TTFT p95 vs sessions",
         _metric_plot(rows, [("window_per_session_tok_s", "per-session tok/s",
                              "per_session_tok_s"),
                             ("window_ttft_p95_s", "TTFT p95 (s)", "ttft_p95_s")],
                      f"Per-session speed and latency — {mode_word(sim)}", slos)),
        ("KV usage and preemptions (whole run)",
         _metric_plot(rows, [("kv_usage_peak", "KV usage peak (0–1)", None),
                             ("preemptions", "preemptions", None)], "KV cache", slos)),
        ("$ per 1M output tokens", _metric_plot(
            rows, [("window_usd_per_mtok", "$ / 1M output tokens", "usd_per_mtok")],
            "Cost (whole run counts ramp, tail" + (" and idle think/tool time)" if idle else ")"),
            slos)),
        ("Achieved vs requested concurrency", _achieved_plot(rows)),
        ("Active sessions over time, steady-state window shaded", _timeline_plot(rows)),
    ]
    images = [(cap, figure_png(f)) for cap, f in figs if f is not None]
    facts = [*answer_facts(folder), ("what was sized", _target(folder, rows)),
             ("folder", str(folder)),
             ("points", ", ".join(str(r["requested_sessions"]) for r in rows)),
             ("SLOs", ", ".join(slos) or "none (a sweep)"),
             ("figures", "steady-state window unless named whole run; a point below 90% "
              "of the requested sessions is not a measurement of N")]
    if idle:
        facts.append(("$/1M tok", "the whole-run figure counts the card's idle time while "
                      "sessions think or wait on tools"))
    page = build_html(f"endurance sizing report — {folder.name}", facts, [], images, sim)
    page = page.replace("<h2>Summary</h2>\n<table>\n\n</table>",
                        "<h2>Points</h2>\n" + _table_html(rows) + _probes_html(folder))
    out = folder / "sizing_report.html"
    out.write_text(page, encoding="utf-8")
    return out
