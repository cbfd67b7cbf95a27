"""`endurance report SIZE_DIR` for a team replay's `size` folder (size.json `kind: team`):
the cards answer, every probe, the replay's fidelity at the answer, and the day's
concurrency profile."""

from __future__ import annotations

from pathlib import Path

from simulator.errors import InputError
from simulator.report.html import build_html
from simulator.report.plots import figure_png
from simulator.report.team_html import fidelity_rows, profile_plot
from simulator.util.bounded import json_file


def is_team_size(folder: Path) -> bool:
    f = folder / "size.json"
    try:
        return f.is_file() and json_file(f, what="size answer").get("kind") == "team"
    except (InputError, AttributeError):
        return False


def render_team_report(folder: Path) -> Path:
    data = json_file(folder / "size.json", what="size answer")
    if not isinstance(data, dict):
        raise InputError(f"{folder / 'size.json'}: expected a JSON object")
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
    table += fidelity_rows(fid)
    images = [("Sessions in flight against time",
               figure_png(profile_plot(team)))] if team.get("day_profile") else []
    page = build_html(f"endurance team sizing report — {folder.name}", facts, table, images,
                      "SIMULATED" in str(data.get("target")))
    out = folder / "sizing_report.html"
    out.write_text(page, encoding="utf-8")
    return out
