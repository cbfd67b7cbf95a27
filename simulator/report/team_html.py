"""`endurance report SIZE_DIR` for a team replay's `size` folder (size.json `kind: team`):
the cards answer, every probe, the replay's fidelity at the answer, and the day's
concurrency profile — sessions in flight against time from the telemetry, with the
replayed slice as replayed on top."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from simulator.report.html import build_html
from simulator.report.plots import figure_png, new_figure


def is_team_size(folder: Path) -> bool:
    f = folder / "size.json"
    try:
        return f.is_file() and json.loads(f.read_text()).get("kind") == "team"
    except (OSError, ValueError, AttributeError):
        return False


def _profile_plot(team: dict[str, Any]) -> Figure:
    step_h = team["profile_step_s"] / 3600
    fig = new_figure(10.0, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    day = team["day_profile"]
    ax.step([i * step_h for i in range(len(day))], day, where="post", color="0.55",
            label="the day, from the telemetry")
    start = team["replay_start_s"] - team["replay_start_s"] % team["profile_step_s"]
    rep = team["profile_replayed"]
    ax.step([start / 3600 + i * step_h for i in range(len(rep))], rep, where="post",
            color="C0", linewidth=2, label="the slice, as replayed")
    ax.axvspan(team["replay_start_s"] / 3600, team["replay_end_s"] / 3600, color="C0",
               alpha=0.08)
    ax.set_xlabel("hour of the day (UTC)")
    ax.set_ylabel("sessions in flight")
    ax.set_title(f"Concurrency over the day — {team['window'] or 'the whole day'}"
                 + (f", team ×{team['scale']:g}" if team["scale"] != 1 else ""))
    ax.legend(loc="upper right")
    return fig


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{v:.2%}"


def render_team_report(folder: Path) -> Path:
    data = json.loads((folder / "size.json").read_text())
    team, fid = data.get("team") or {}, data.get("fidelity") or {}
    cards = data.get("cards")
    facts = [("answer", f"{cards} card(s)" if cards is not None else "not within "
              f"{data.get('max_replicas')} card(s)"),
             ("SLOs", ", ".join(data.get("slos", []))),
             ("judged on", str(data.get("judged_on"))), ("router", str(data.get("router"))),
             ("what was sized", str(data.get("target"))),
             ("slice", f"{team.get('window') or 'the whole day'}; {team.get('sessions')} of "
                       f"{team.get('day_sessions')} session(s); scale ×{team.get('scale')}"),
             *(("note", n) for n in data.get("notes", []))]
    table = [(f"probe {p['replicas']} card(s)", ("pass" if p["passed"] else "FAIL "
                                                 + ", ".join(p["failed"])))
             for p in data.get("probes", [])]
    if "requests_recorded" in fid:
        table += [
            ("fidelity: requests replayed", f"{fid['requests_replayed']} of "
                                            f"{fid['requests_recorded']}"),
            ("fidelity: prompt size error median / max",
             f"{_pct(fid['prompt_error_median'])} / {_pct(fid['prompt_error_max'])}"),
            ("fidelity: output size error median / max",
             f"{_pct(fid['output_error_median'])} / {_pct(fid['output_error_max'])}"),
            ("fidelity: arrival off median / max (s)",
             "n/a" if fid["arrival_error_max_s"] is None else
             f"{fid['arrival_error_median_s']:.3f} / {fid['arrival_error_max_s']:.3f} "
             f"({fid['arrivals_late_over_1s']} more than 1 s off)"),
            ("fidelity: cache-read share recorded / replayed",
             f"{_pct(fid['cache_read_share_recorded'])} / "
             f"{_pct(fid['cache_read_share_replayed'])}"),
            ("fidelity: within 1% and 1 s", "yes" if fid["within_tolerance"] else "NO")]
    images = [("Sessions in flight against time",
               figure_png(_profile_plot(team)))] if team.get("day_profile") else []
    page = build_html(f"endurance team sizing report — {folder.name}", facts, table, images,
                      "SIMULATED" in str(data.get("target")))
    out = folder / "sizing_report.html"
    out.write_text(page, encoding="utf-8")
    return out
