"""`endurance report`: a run directory → report.html (self-contained), report.md, PNGs."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from simulator.analysis.load import load_run, load_saved_summary, run_label
from simulator.analysis.recall import probe_rows, recall_figures, without_probes
from simulator.analysis.summary import VERBATIM_WARNING, ok_rows, summarize_run
from simulator.analysis.target import describe_target
from simulator.errors import InputError
from simulator.records.manifest import EndpointFacts, Manifest
from simulator.report import plots
from simulator.report.console import summary_table
from simulator.report.plots import figure_png
from simulator.report.sweeps import plot_recall_by_age
from simulator.report.team_html import run_team_section
from simulator.util.visible import visible


@dataclass(frozen=True, slots=True)
class ReportPaths:
    html: Path
    markdown: Path
    images: tuple[Path, ...]


def build_figures(turns: pd.DataFrame, server: pd.DataFrame | None,
                  simulated: bool, ramp: Mapping[str, object] | None = None
                  ) -> list[tuple[str, str, Figure]]:
    """(file stem, caption, figure) for every plot the run supports (recall probes:
    their own figure; every other plot reads the turns without them; a stepped ramp's
    page first)."""
    probes = probe_rows(turns)
    turns = without_probes(turns)
    turn_ok = ok_rows(turns, "turn")
    figs: list[tuple[str, str, Figure]] = []
    if ramp:
        figs.append(("ramp", "Stepped ramp: tok/s, TTFT, goodput and KV usage against time, "
                     "each step's window shaded, the boundary named",
                     plots.plot_ramp(turns, server, ramp, simulated=simulated)))
    figs += [
        ("turn_throughput", "Turn throughput over turns",
         plots.plot_turn_throughput(turns, turn_ok, simulated=simulated)),
        ("context_tokens", "Context tokens over turns",
         plots.plot_context(turn_ok, simulated=simulated)),
        ("cache_reuse", "Cache reuse over turns",
         plots.plot_cache(turn_ok, server, simulated=simulated)),
        ("ttft_vs_context", "TTFT vs context size",
         plots.plot_ttft_vs_context(turns, turn_ok, simulated=simulated)),
    ]
    if turn_ok["session_id"].nunique() > 1:
        figs.append(("session_lanes", "Per-session lanes",
                     plots.plot_session_lanes(turn_ok, simulated=simulated)))
    figs += [
        ("timeline", "Timeline: KV usage, preemptions, running/waiting, tok/s, sessions",
         plots.plot_timeline(turns, server, simulated=simulated)),
        ("distributions", "Distributions: TTFT, inter-token time, turn tok/s (CDFs)",
         plots.plot_cdfs(turn_ok, simulated=simulated)),
    ]
    if not probes.empty:
        by_age = recall_figures(probes)["recall_by_age"]
        figs.append(("recall_vs_age", "Recall probes: recall and retention vs fact age",
                     plot_recall_by_age([("this run", by_age)], simulated=simulated)))
    return figs


def _endpoint_text(ep: EndpointFacts) -> str:
    """`twin-inprocess a40/qwen…` or the URL."""
    if ep.url:
        return ep.url
    hw_model = "/".join(v for v in (ep.hardware, ep.model) if v)
    return f"{ep.kind or 'endpoint'} {hw_model}".strip()


def _run_facts(manifest: Manifest, run_dir: Path) -> list[tuple[str, str]]:
    facts = [
        ("run", run_label(manifest, run_dir)),
        ("what ran", describe_target(manifest)),
        ("scenario", f"{manifest.scenario} (compaction: {manifest.compaction or 'n/a'})"),
        ("endpoint", _endpoint_text(manifest.endpoint)),
        ("mode", "SIMULATED (twin)" if manifest.simulated else "real endpoint"),
        ("seed", str(manifest.seed)),
        ("status", str(manifest.status)),
    ]
    if manifest.contains_verbatim_content:
        facts.insert(0, ("WARNING", VERBATIM_WARNING))
    if manifest.overrides:
        facts.append(("overrides", ", ".join(manifest.overrides)))
    return facts


def _html_table(rows: list[tuple[str, str]]) -> str:
    body = "\n".join(f"<tr><th>{_html(k)}</th><td>{_html(v)}</td></tr>"
                     for k, v in rows)
    return f"<table>\n{body}\n</table>"


_CSS = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;"
        "padding:4px 10px;text-align:left}th{background:#f4f4f4;font-weight:normal}"
        "img{max-width:100%;display:block;margin:1em 0}.sim{color:#b00;font-weight:bold}")


def build_html(title: str, facts: list[tuple[str, str]], table: list[tuple[str, str]],
               images: list[tuple[str, bytes]], simulated: bool) -> str:
    """A self-contained HTML page: tables and base64-embedded PNGs, no scripts."""
    banner = ('<p class="sim">SIMULATED: figures come from the twin, not a real server.</p>'
              if simulated else "")
    imgs = "\n".join(
        f"<h2>{_html(cap)}</h2>\n<img alt=\"{_html(cap)}\" "
        f"src=\"data:image/png;base64,{base64.b64encode(png).decode('ascii')}\">"
        for cap, png in images)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_html(title)}</title><style>{_CSS}</style></head>\n<body>\n"
            f"<h1>{_html(title)}</h1>\n{banner}\n{_html_table(facts)}\n"
            f"<h2>Summary</h2>\n{_html_table(table)}\n{imgs}\n</body></html>\n")


def _html(s: str) -> str:
    """Text as HTML data: escaped, control and bidi characters shown as escapes."""
    return html.escape(visible(s))


def _md_escape(s: str) -> str:
    """Text as Markdown data: HTML escaped (Markdown renders raw HTML), table pipes
    escaped, control and bidi characters (a newline would split a heading) shown."""
    return html.escape(visible(s), quote=False).replace("|", "\\|")


def build_markdown(title: str, facts: list[tuple[str, str]], table: list[tuple[str, str]],
                   images: list[tuple[str, str]], simulated: bool) -> str:
    """report.md: the same tables, images linked by relative path."""
    lines = [f"# {_md_escape(title)}", ""]
    if simulated:
        lines += ["**SIMULATED**: figures come from the twin, not a real server.", ""]
    for rows in (facts, table):
        lines += ["| | |", "|---|---|"]
        lines += [f"| {_md_escape(k)} | {_md_escape(v)} |" for k, v in rows]
        lines.append("")
    for cap, name in images:
        lines += [f"## {_md_escape(cap)}", "", f"![{_md_escape(cap)}]({name})", ""]
    return "\n".join(lines)


def render_report(run_dir: str | Path) -> ReportPaths:
    """Write RUN_DIR/report.html, report.md and one PNG per plot; returns the paths."""
    run_dir = Path(run_dir)
    manifest, turns, server = load_run(run_dir)
    if ok_rows(turns, "turn").empty:
        raise InputError(f"{run_dir / 'turns.parquet'}: no successful turns to report on")
    simulated = manifest.simulated
    saved = load_saved_summary(run_dir)
    summary = summarize_run(manifest, turns, server, saved)
    table = summary_table(summary)
    facts = _run_facts(manifest, run_dir)
    title = (f"endurance report — {run_label(manifest, run_dir)} "
             f"({'simulated' if simulated else 'real'})")
    pngs: list[tuple[str, bytes]] = []
    paths: list[Path] = []
    ramp = (saved or {}).get("ramp")
    for stem, caption, fig in build_figures(turns, server, simulated,
                                            ramp if isinstance(ramp, dict) else None):
        png = figure_png(fig)
        path = run_dir / f"{stem}.png"
        path.write_bytes(png)
        pngs.append((caption, png))
        paths.append(path)
    team = run_team_section(manifest, turns)
    if team is not None:           # a team replay: its fidelity and concurrency profile
        table = [*table, *team[0]]
        for caption, png in team[1]:
            path = run_dir / "team_profile.png"
            path.write_bytes(png)
            pngs.append((caption, png))
            paths.append(path)
    html_path = run_dir / "report.html"
    html_path.write_text(build_html(title, facts, table, pngs, simulated), encoding="utf-8")
    md_path = run_dir / "report.md"
    md = build_markdown(title, facts, table,
                        [(cap, p.name) for (cap, _), p in zip(pngs, paths, strict=True)],
                        simulated)
    md_path.write_text(md, encoding="utf-8")
    return ReportPaths(html=html_path, markdown=md_path, images=tuple(paths))


