"""CLI: `endurance export weka|mooncake RUN_DIR -o FILE` — a run as a trace."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from simulator.cli._app import main
from simulator.errors import InputError


@main.group("export")
def export_group() -> None:
    """Write a run's requests as a trace other replayers read (needs a run made with
    --set record_blocks=true; imported traces set it)."""


def _target(out: Path, force: bool) -> None:
    if out.exists() and not force:
        raise InputError(f"{out}: already exists; choose another -o path or pass --force")


def _options(output_help: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """RUN_DIR, -o and --force, shared by both formats."""
    def wrap(f: Callable[..., None]) -> Callable[..., None]:
        f = click.option("--force", is_flag=True, help="Overwrite existing output.")(f)
        f = click.option("-o", "--output", "out", required=True,
                         type=click.Path(path_type=Path), help=output_help)(f)
        return click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))(f)
    return wrap


@export_group.command("weka")
@_options("Trace file (one top-level session) or folder (one file per session).")
def weka(run_dir: Path, out: Path, force: bool) -> None:
    """cc-traces JSON (Weka / SemiAnalysis; kv-cache-tester, AIPerf, inference-perf)."""
    from simulator.exporters.run_requests import run_info, sent_requests
    from simulator.exporters.weka import build_traces
    info = run_info(run_dir)
    traces = build_traces(info, list(sent_requests(run_dir)))
    if not traces:
        raise InputError(f"{run_dir}: no successful request to export")
    if not out.is_dir():
        _target(out, force)
    if len(traces) == 1 and not out.is_dir():
        files = {out: next(iter(traces.values()))}
    else:
        out.mkdir(parents=True, exist_ok=True)
        files = {out / f"trace_{sid}.json": t for sid, t in traces.items()}
    n = 0
    for path, t in files.items():
        path.write_text(json.dumps(t, separators=(",", ":")), encoding="utf-8")
        n += _count(t["requests"])
    click.echo(f"wrote {len(files)} trace(s), {n} requests, to {out}")


def _count(reqs: list[dict[str, Any]]) -> int:
    return sum(_count(r["requests"]) if r.get("type") == "subagent" else 1 for r in reqs)


@export_group.command("mooncake")
@_options("Trace file to write (JSONL).")
def mooncake(run_dir: Path, out: Path, force: bool) -> None:
    """Mooncake JSONL (512-token blocks; session_id + delay as Dynamo reads them)."""
    from simulator.exporters.mooncake import mooncake_row
    from simulator.exporters.run_requests import run_info, sent_requests
    run_info(run_dir)
    _target(out, force)
    ids: dict[str, int] = {}
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        for r in sent_requests(run_dir):
            if r.row.get("ok") and r.row.get("request_kind") in ("turn", "summary"):
                fh.write(json.dumps(mooncake_row(r, ids), separators=(",", ":")) + "\n")
                n += 1
    click.echo(f"wrote {n} requests to {out}")
