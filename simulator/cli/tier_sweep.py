"""`size`/`sweep --kv-offload-gib 0,64,256`: the search (or sweep) once per host KV
tier size, each in its own folder, then one table and one plot over the tiers
(`simulator.analysis.tier_sizing`). The compaction policy is the scenario's or the
one `--set compaction.kind=…` names; run once per policy to compare them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


def size_per_tier(tiers: list[float], run_size: Any, sets: tuple[str, ...], folder: Path,
                  as_json: bool) -> int:
    """`run_size(extra_sets, subfolder)` → SizingResult for each tier; prints and saves
    the table (size-tiers.json, size-tiers.png). Returns the exit code."""
    from simulator.analysis.render import figure_png
    from simulator.analysis.tier_sizing import (
        format_tier_table,
        knee,
        plot_tiers,
        policy_of,
        tier_set,
    )
    rows: list[dict[str, Any]] = []
    for gib in tiers:
        result = run_size((tier_set(gib),), folder / f"tier-{gib:g}gib")
        rows.append({"kv_offload_gib": gib, "policy": policy_of(sets), **result.to_dict()})
        if not as_json:
            click.echo(f"  tier {gib:g} GiB: {result.sessions} sessions "
                       f"({result.binding} [{result.binding_kind}])", err=True)
    folder.mkdir(parents=True, exist_ok=True)
    out = {"rows": rows, "knee_gib": knee(rows)}
    (folder / "size-tiers.json").write_text(json.dumps(out, indent=2, default=str) + "\n")
    plot = folder / "size-tiers.png"
    plot.write_bytes(figure_png(plot_tiers(rows)))
    if as_json:
        click.echo(json.dumps(out, default=str))
    else:
        click.echo(format_tier_table(rows))
        click.echo(f"plot: {plot}")
        click.echo(str(folder))
    return 0 if any(r["sessions"] > 0 for r in rows) else 1


def sweep_per_tier(tiers: list[float], run_sweep: Any, folder: Path,
                   as_json: bool) -> None:
    """`run_sweep(extra_sets, subfolder)` → rows for each tier; one table (each row
    tagged with its tier) and sweep-tiers.json."""
    from simulator.analysis.sizing import format_sweep_table
    from simulator.analysis.tier_sizing import tier_set
    rows: list[dict[str, Any]] = []
    tables = []
    for gib in tiers:
        mine = run_sweep((tier_set(gib),), folder / f"tier-{gib:g}gib")
        for r in mine:
            r["kv_offload_gib"] = gib
            tier = _kv_tier(r.get("run_dirs") or [])
            r["post_idle_ttft_p50_s"] = tier.get("post_idle_ttft_p50_s")
            r["host_share_of_cached"] = tier.get("host_share_of_cached")
        rows += mine
        post = ", ".join(f"{r['sessions']}: {_s(r['post_idle_ttft_p50_s'])}" for r in mine)
        tables.append(f"host KV tier {gib:g} GiB\n{format_sweep_table(mine)}\n"
                      f"post-idle TTFT p50 (whole run) by sessions: {post}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sweep-tiers.json").write_text(json.dumps(rows, indent=2, default=str) + "\n")
    if as_json:
        click.echo(json.dumps(rows, default=str))
        return
    click.echo("\n\n".join(tables))
    click.echo(str(folder))


def _kv_tier(run_dirs: list[str]) -> dict[str, Any]:
    """The `kv_tier` figures of a point's last run (`summary.json`), {} when absent."""
    if not run_dirs:
        return {}
    try:
        data = json.loads((Path(run_dirs[-1]) / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    tier = data.get("kv_tier") if isinstance(data, dict) else None
    return tier if isinstance(tier, dict) else {}


def _s(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.2f} s"
