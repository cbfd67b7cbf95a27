"""The twin's engine options, on `run`, `sweep` and `size` alike: sugar for `--set twin.*`.

`--kv-dtype`, `--gpu-memory-utilization`, `--kv-cache-gib`, `--no-prefix-caching`,
`--max-num-batched-tokens`, `--max-num-seqs` and (on `run`) `--kv-offload-gib` store
their `twin.*` override in the click context, and `scenario_overrides` appends them
before the user's `--set` (which still wins), as the load and fleet options do. On
`sweep` and `size`, `--kv-offload-gib` takes a list: one sweep or search per host tier
size (`tiers()`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

_META = "endurance.twin_overrides"
_TIERS = "endurance.kv_tiers"


def _store(key: str, render: Callable[[Any], str] = str) -> Callable[[click.Context, Any, Any], None]:
    def callback(ctx: click.Context, _param: Any, value: Any) -> None:
        if value is None or value is False:
            return
        ctx.meta.setdefault(_META, []).append(f"twin.{key}={render(value)}")
    return callback


def _tiers(ctx: click.Context, _param: Any, value: str | None) -> None:
    """`--kv-offload-gib G` on run; `G1,G2,…` on sweep/size (one per tier size)."""
    if value is None:
        return
    from simulator.analysis.tier_sizing import parse_tiers
    from simulator.errors import InputError
    try:
        sizes = parse_tiers(value)
    except InputError as exc:
        raise click.BadParameter(str(exc).removeprefix("--kv-offload-gib: ")) from None
    if ctx.command.name in ("sweep", "size"):
        ctx.meta[_TIERS] = sizes
        return
    if "," in value:
        raise click.BadParameter(f"{value!r}: a list of tier sizes is for `sweep` and `size`")
    ctx.meta.setdefault(_META, []).append(f"twin.kv_offload_gib={sizes[0]}")


def twin_engine_options() -> list[Callable[[Any], Any]]:
    """The click options (not exposed as parameters; see the module docstring)."""
    return [
        click.option("--kv-dtype", type=click.Choice(["auto", "bf16", "fp8"]), default=None,
                     expose_value=False, callback=_store("kv_dtype"),
                     help="Twin KV-cache dtype (auto: the model's vLLM default; MLA keeps bf16)."),
        click.option("--gpu-memory-utilization",
                     type=click.FloatRange(min=0, max=1, min_open=True), default=None,
                     expose_value=False, callback=_store("gpu_memory_utilization"),
                     help="Twin: share of card memory vLLM may use (default 0.9)."),
        click.option("--kv-cache-gib", type=click.FloatRange(min=0, min_open=True),
                     default=None, expose_value=False, callback=_store("kv_cache_gib"),
                     help="Twin: a fixed KV-cache budget in GiB instead of the utilisation rule."),
        click.option("--no-prefix-caching", is_flag=True, expose_value=False,
                     callback=_store("prefix_caching", lambda _: "false"),
                     help="Twin: prefix caching off."),
        click.option("--kv-offload-gib", metavar="GIB[,GIB…]", default=None,
                     expose_value=False, callback=_tiers,
                     help="Twin: a host-memory KV tier of this many GiB (vLLM "
                     "--kv-offloading-size; 0: off); sweep/size: a list, e.g. 0,64,256, "
                     "one sweep or search per size. See docs/kv-tiers.md."),
        click.option("--max-num-batched-tokens", type=click.IntRange(min=1, max=2**24),
                     default=None, expose_value=False,
                     callback=_store("max_num_batched_tokens"),
                     help="Twin: vLLM's per-step token budget (drafts count against it; with "
                     "speculation on the profile lowers it to 2048 unless this is given)."),
        click.option("--tp", type=click.IntRange(min=1, max=64), default=None,
                     expose_value=False, callback=_store("tp"),
                     help="Twin: a replica of this many GPUs in tensor parallel (vLLM "
                     "--tensor-parallel-size). See docs/parallelism.md."),
        click.option("--ep", is_flag=True, expose_value=False,
                     callback=_store("ep", lambda _: "true"),
                     help="Twin: MoE experts split whole over the TP group (vLLM "
                     "--enable-expert-parallel)."),
        click.option("--max-num-seqs", type=click.IntRange(min=1, max=2**20), default=None,
                     expose_value=False, callback=_store("max_num_seqs"),
                     help="Twin: vLLM's cap on running sequences (the profile's by default)."),
    ]


def twin_overrides() -> list[str]:
    ctx = click.get_current_context(silent=True)
    return list(ctx.meta.get(_META, [])) if ctx is not None else []


def tiers() -> list[float] | None:
    """`sweep/size --kv-offload-gib 0,64`: the host tier sizes (None: not given)."""
    ctx = click.get_current_context(silent=True)
    got = ctx.meta.get(_TIERS) if ctx is not None else None
    return list(got) if got is not None else None
