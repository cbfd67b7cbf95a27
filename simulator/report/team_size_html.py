"""`endurance report SIZE_DIR` for a team replay's `size` folder (size.json `kind: team`):
the cards answer, every probe, the replay's fidelity at the answer, and the day's
concurrency profile."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from matplotlib.figure import Figure

from simulator.analysis.team_hours import LOWER_BOUND, plot_series
from simulator.errors import InputError
from simulator.report.html import build_html
from simulator.report.plots import figure_png, new_figure
from simulator.report.team_html import fidelity_rows, profile_plot
from simulator.util.bounded import json_file
from simulator.util.numbers import to_float


def _money(v: object) -> str:
    return f"${v:,.2f}" if isinstance(v, int | float) else "n/a (no price per hour)"


def hours_facts(h: Mapping[str, object]) -> list[tuple[str, str]]:
    """The interval answer's facts: status, peak/mean, card-hours, $/day, binding."""
    if h.get("interrupted"):
        return [("cards per interval", "INTERRUPTED: the intervals judged so far, NOT the "
                 "answer"), ("lower bound", LOWER_BOUND)]
    def fig(v: object) -> str:
        return f"{v:,.2f}" if isinstance(v, int | float) else "n/a"
    return [
        ("cards per interval", f"every {to_float(h['interval_s']) / 60:g} min, lead-in "
                               f"{to_float(h['lead_in_s']) / 60:g} min — LOWER BOUND"),
        ("lower bound", LOWER_BOUND),
        ("peak / mean cards", f"{h.get('peak_cards')} / {fig(h.get('mean_cards'))}"),
        ("card-hours per day: fixed at the peak / following",
         f"{fig(h.get('card_hours_fixed_at_peak'))} / {fig(h.get('card_hours_following'))}"),
        ("$/day: fixed at the peak / following",
         f"{_money(h.get('usd_per_day_fixed_at_peak'))} / "
         f"{_money(h.get('usd_per_day_following'))}"),
        ("the SLO binds the fleet in", ", ".join(_texts(h.get("binding"))) or "none")]


def _texts(v: object) -> list[str]:
    """A list of labels as size.json holds it ([] when missing)."""
    return [str(x) for x in v] if isinstance(v, list) else []


def hours_plot(h: Mapping[str, object]) -> Figure:
    """Cards per interval (a step line) beside the sessions in flight (bars)."""
    labels, cards, flight = plot_series(h)
    fig = new_figure(10.0, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(labels)))
    ax.bar(xs, flight, color="0.8", label="sessions in flight (telemetry, peak)")
    ax.set_ylabel("sessions in flight")
    ax2 = ax.twinx()
    ax2.step(xs, [c if c is not None else float("nan") for c in cards], where="mid",
             color="C0", linewidth=2, label="cards (lower bound)")
    ax2.set_ylabel("cards")
    ax2.set_ylim(bottom=0)
    ax.set_xticks(xs, labels, rotation=45, fontsize=8)
    ax.set_title("Cards per interval — a lower bound (perfect autoscaler, no warm-up)"
                 + (" — INTERRUPTED" if h.get("interrupted") else ""))
    lines = ax.get_legend_handles_labels()
    more = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper right")
    return fig


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
    facts = [("answer", f"INTERRUPTED ({data['interrupted']}): no answer"
              if data.get("interrupted") else f"{cards} card(s)" if cards is not None
              else f"not within {data.get('max_replicas')} card(s)"),
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
    hours = data.get("hours")
    if hours:
        facts += hours_facts(hours)
        table += [(f"interval {r['start']}–{r['end']}",
                   f"{r['cards'] if r['judged'] else 'not judged'} card(s), "
                   f"{r['requests']} request(s), {r['in_flight_peak']} in flight"
                   + (f"; binds: {', '.join(r['binding'])}" if r.get("binding") else ""))
                  for r in hours.get("intervals", [])]
    images = [("Sessions in flight against time",
               figure_png(profile_plot(data["team"])))] if team.get("day_profile") else []
    if hours:
        images.append(("Cards per interval beside sessions in flight (lower bound)",
                       figure_png(hours_plot(hours))))
    page = build_html(f"endurance team sizing report — {folder.name}", facts, table, images,
                      "SIMULATED" in str(data.get("target")))
    out = folder / "sizing_report.html"
    out.write_text(page, encoding="utf-8")
    return out
