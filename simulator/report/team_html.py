"""A team replay's report pieces: the fidelity rows, the concurrency plot (sessions in
flight against time from the telemetry, the replayed slice on top) and, for a single
run, its section of `endurance report RUN_DIR` and its console text."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

import pandas as pd
from matplotlib.figure import Figure

from simulator.analysis import replay_fidelity
from simulator.analysis.team_day import format_profile, replayed_profile
from simulator.errors import InputError
from simulator.records.manifest import Manifest, read_manifest
from simulator.report.plots import figure_png, new_figure
from simulator.util.formats import percent


class TeamProfile(TypedDict):
    """What the concurrency plot draws: the day's sessions in flight per step and the
    replayed slice's (size.json's `team`, or a replay run's own)."""

    profile_step_s: float
    day_profile: list[int]
    replay_start_s: float
    replay_end_s: float
    profile_replayed: list[int]
    window: str | None
    scale: float


def profile_plot(team: TeamProfile) -> Figure:
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


def fidelity_rows(fid: Mapping[str, object]) -> list[tuple[str, str]]:
    if "requests_recorded" not in fid:
        return []
    return [
        ("fidelity: requests replayed", f"{fid['requests_replayed']} of "
                                        f"{fid['requests_recorded']}"),
        ("fidelity: prompt size error median / max",
         f"{percent(fid['prompt_error_median'], 2)} / {percent(fid['prompt_error_max'], 2)}"),
        ("fidelity: output size error median / max",
         f"{percent(fid['output_error_median'], 2)} / {percent(fid['output_error_max'], 2)}"),
        ("fidelity: arrival off median / max (s)",
         "n/a" if fid["arrival_error_max_s"] is None else
         f"{fid['arrival_error_median_s']:.3f} / {fid['arrival_error_max_s']:.3f} "
         f"({fid['arrivals_late_over_1s']} more than 1 s off)"),
        ("fidelity: held back by a slower reply",
         f"{fid['arrivals_held']}" + ("" if not fid["arrivals_held"] else
                                      f" (median {fid['held_median_s']:.2f} s, max "
                                      f"{fid['held_max_s']:.2f} s)")),
        ("fidelity: cache-read share recorded / replayed",
         f"{percent(fid['cache_read_share_recorded'], 2)} / "
         f"{percent(fid['cache_read_share_replayed'], 2)}"),
        ("fidelity: within 1% and 1 s", "yes" if fid["within_tolerance"] else "NO")]


def run_team_section(manifest: Manifest, turns: pd.DataFrame,
                     ) -> tuple[list[tuple[str, str]], list[tuple[str, bytes]], str] | None:
    """A team replay run's fidelity rows, its concurrency plot and the console text
    (None for any other run)."""
    spec = replay_fidelity.team_spec(manifest)
    if spec is None or spec.team is None:
        return None
    rows = [{str(k): v for k, v in r.items()} for r in turns.to_dict("records")]
    fid = replay_fidelity.compare(spec, rows)
    t = spec.team
    prof = replayed_profile(spec, rows, t.profile_step_s, t.replay_start_s % t.profile_step_s)
    figs = fid.figures()
    team: TeamProfile = {
        "profile_step_s": t.profile_step_s, "day_profile": list(t.day_profile),
        "replay_start_s": t.replay_start_s, "replay_end_s": t.replay_end_s,
        "profile_replayed": prof, "window": t.window, "scale": t.scale}
    text = replay_fidelity.format_fidelity(figs, replay_fidelity.worst(fid))
    if prof:
        text += "\n" + format_profile(t, prof)
    return (fidelity_rows(figs), [("Sessions in flight against time",
                                    figure_png(profile_plot(team)))], text)


def team_run_text(run_dir: Path) -> str | None:
    """The fidelity and profile of a finished team replay run, for the console."""
    try:
        manifest = read_manifest(run_dir)
        turns = pd.read_parquet(run_dir / "turns.parquet")
    except (OSError, ValueError, InputError):
        return None
    got = run_team_section(manifest, turns)
    return None if got is None else got[2]
