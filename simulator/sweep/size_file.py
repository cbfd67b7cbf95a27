"""`size.json` of a card search (and of the fleet or P:D search after it): the one
writer, so `endurance size` and `lab.size` leave the same file for the same search."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from simulator.analysis.fleet_sizing import FleetSizing
from simulator.analysis.pd_sizing import PDSizing
from simulator.analysis.sizing import Probe, SizingResult
from simulator.analysis.target import target_of_runs

SIZE_FILE = "size.json"


def write_json(path: Path, data: object) -> None:
    """A search's JSON file, indented, anything unknown as its text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def run_dirs(probes: Sequence[Probe]) -> dict[int, list[str]]:
    """The probes' run directories by session count (a count's repeats together)."""
    out: dict[int, list[str]] = {}
    for p in probes:
        out.setdefault(p.sessions, []).append(p.run_dir)
    return out


def size_data(result: SizingResult, fleet: FleetSizing | PDSizing | None = None
              ) -> dict[str, object]:
    """What `size.json` holds: the answer, its runs by session count, the target they
    ran on (read from the first run's manifest), the runs left unused, and the fleet or
    P:D search started from the card's answer."""
    data = result.to_dict()
    dirs = data["run_dirs"] = run_dirs(result.probes)
    data["target"] = target_of_runs(d for ds in dirs.values() for d in ds)
    if result.unused:
        data["unused_run_dirs"] = [p.run_dir for p in result.unused]
    if fleet is not None:
        data["pd" if isinstance(fleet, PDSizing) else "fleet"] = fleet.to_dict()
    return data
