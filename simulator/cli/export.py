"""CLI: `endurance export weka|mooncake RUN_DIR -o FILE` — a run as a trace."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import click

from simulator.cli._app import main
from simulator.errors import InputError


@main.group("export")
def export_group() -> None:
    """Write a run's requests as a trace other replayers read (needs a run made with
    --set record_blocks=true; imported traces set it)."""


def _target(out: Path, run_dir: Path, force: bool, *, folder: bool = False) -> None:
    """Never the run's own files (nor anything inside its directory), never a device
    node or FIFO, an existing file only with `force`, a folder only where `folder`."""
    from simulator.util.bounded import is_special
    run = run_dir.resolve()
    target = out.resolve()
    if target == run or run in target.parents:
        raise InputError(f"{out}: inside the run directory {run_dir}; the export never "
                         "writes there (choose an -o path outside it)")
    if is_special(out):
        raise InputError(f"{out}: not a regular file (a device, FIFO or socket); -o expects "
                         "a trace file path")
    if out.is_dir() and not folder:
        raise InputError(f"{out}: is a folder; -o expects a trace file path")
    if out.exists() and not out.is_dir() and not force:
        raise InputError(f"{out}: already exists; choose another -o path or pass --force")


@contextlib.contextmanager
def _written(path: Path) -> Iterator[IO[str]]:
    """A file written beside `path` and renamed over it once complete: an export that
    fails half-way leaves nothing; an unwritable path is one line, exit 2."""
    try:          # the folder must exist (a typo'd path is not made, from / down)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InputError(f"{path}: cannot write trace ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot write trace ({exc.strerror})") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


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
    _target(out, run_dir, force, folder=True)
    traces = build_traces(info, list(sent_requests(run_dir)))
    if not traces:
        raise InputError(f"{run_dir}: no successful request to export")
    if len(traces) == 1 and not out.is_dir():
        files = {out: next(iter(traces.values()))}
    else:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{out}: cannot write traces ({exc.strerror})") from None
        files = {out / f"trace_{sid}.json": t for sid, t in traces.items()}
        for path in files:
            _target(path, run_dir, force)
    n = 0
    for path, t in files.items():
        with _written(path) as fh:
            fh.write(json.dumps(t, separators=(",", ":")))
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
    _target(out, run_dir, force)
    ids: dict[str, int] = {}
    n = 0
    with _written(out) as fh:
        for r in sent_requests(run_dir):
            if r.row.get("ok") and r.row.get("request_kind") in ("turn", "summary"):
                fh.write(json.dumps(mooncake_row(r, ids), separators=(",", ":")) + "\n")
                n += 1
    click.echo(f"wrote {n} requests to {out}")
