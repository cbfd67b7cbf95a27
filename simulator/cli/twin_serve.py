"""CLI: `endurance twin serve` — the twin as a real HTTP server (Anthropic Messages API).

Registered by the twin group with `twin_group.add_command(serve_command, "serve")`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import click

from simulator.errors import InputError
from simulator.twin.fleet.router import POLICIES, RouterConfig
from simulator.twin.model.profiles import MAX_HOST_GIB
from simulator.twin.serve.faults import parse_faults

# the engines one server holds: --replicas' bound, and P + D's (each instance an engine
# with its own KV pool; `--pd 1024:1024` ran out of memory building them)
MAX_SERVE_ENGINES = 64


def _host_gib(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """Finite GiB within [0, 1 PiB] (click's FloatRange lets inf and nan through)."""
    if not 0 <= value <= MAX_HOST_GIB:        # False for nan too
        raise click.BadParameter(f"{value:g}: host tier sizes are finite GiB within "
                                 f"[0, {MAX_HOST_GIB:g}]")
    return value


@click.command("serve")
@click.option("--hardware", default="a40", show_default=True, help="Hardware profile name.")
@click.option("--model", default="qwen3-coder-30b-a3b-awq", show_default=True,
              help="Model profile name.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--time-scale", default=1.0, show_default=True, type=float,
              help="Run F times faster than the modelled card.")
@click.option("--faults", default="", help='Fault probabilities per request, e.g. '
              '"429:0.03,529:0.03,500:0.02,disconnect:0.02,stall:0.01:60,spike:0.05:3".')
@click.option("--cutoff-s", type=float, default=None,
              help="Proxy-style cut-off: 524 (or a dropped stream) after S seconds.")
@click.option("--spec", default="off", show_default=True,
              help="Speculative decoding: off|ngram:K|draft:K|mtp:K, each optionally @N "
              "(drafting only while the batch holds at most N requests).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--max-model-len", type=click.IntRange(min=1), default=None,
              help="Context window in tokens (default: the model profile's, else 262144).")
@click.option("--kv-offload-gib", type=float, default=0.0, callback=_host_gib,
              help="A host-memory KV tier of this many GiB (vLLM --kv-offloading-size; "
              "finite, at most 1 PiB).")
@click.option("--instant", is_flag=True,
              help="Zero latency: write whole replies at once (client-ceiling benchmarks).")
@click.option("--replicas", type=click.IntRange(1, MAX_SERVE_ENGINES), default=1,
              show_default=True,
              help="Engines behind this one URL (a fleet; /metrics labelled per replica).")
@click.option("--router", type=click.Choice(POLICIES), default="round_robin",
              show_default=True, help="How the fleet routes requests (docs/fleet.md).")
@click.option("--pd", "pd_split", metavar="P:D", default=None,
              help="P prefill and D decode instances behind this URL, KV pulled over the "
              "card's --kv-link (docs/disaggregation.md).")
@click.option("--kv-link", default="auto", show_default=True,
              help="--pd: the card's KV link (nvlink, infiniband, roce, pcie; auto: the "
              "first network link it has).")
@click.option("--max-local-prefill", type=click.IntRange(min=0), default=1000,
              show_default=True, help="--pd: prompts with at most this many tokens uncached "
              "on their decode instance are prefilled there (Dynamo's rule).")
def serve_command(hardware: str, model: str, host: str, port: int, time_scale: float,
                  faults: str, cutoff_s: float | None, spec: str, seed: int,
                  max_model_len: int | None, instant: bool, kv_offload_gib: float = 0.0,
                  replicas: int = 1, router: str = "round_robin",
                  pd_split: str | None = None, kv_link: str = "auto",
                  max_local_prefill: int = 1000) -> None:
    """Serve the simulated engine over HTTP: POST /v1/messages, /v1/chat/completions,
    /v1/messages/count_tokens, /reset_prefix_cache, GET /v1/models, /health, /metrics
    (vLLM names), /debug/requests/{id}. Time runs at --time-scale (default 1: real time)."""
    if not 0 < time_scale <= 1e6:
        raise InputError(f"--time-scale {time_scale}: must be within (0, 1e6]")
    if cutoff_s is not None and not 0 < cutoff_s <= 86_400:
        raise InputError(f"--cutoff-s {cutoff_s}: must be within (0, 86400] seconds")
    _check_pd_options(pd_split)
    pd = _pd_config(pd_split, hardware, kv_link, max_local_prefill, replicas)
    from simulator.twin.serve.server import serve_forever, twin_app  # aiohttp: only when serving
    app, described = twin_app(hardware, model, spec=spec, seed=seed, time_scale=time_scale,
                              instant=instant, faults=parse_faults(faults), cutoff_s=cutoff_s,
                              context_window=max_model_len,
                              overrides={"kv_offload_gib": kv_offload_gib} if kv_offload_gib
                              else None, replicas=replicas,
                              router=RouterConfig(router),  # type: ignore[arg-type]
                              pd=pd)

    def announce(url: str) -> None:
        pace = ("real time: one simulated second takes one wall second; --time-scale K "
                "runs K× faster" if time_scale == 1 else
                f"{time_scale:g} simulated seconds per wall second")
        click.echo(f"endurance twin (simulated) {model} on {hardware}: {url} "
                   f"[{described.get('num_blocks')} KV blocks, time scale {time_scale:g}"
                   f"{', instant' if instant else ''}"
                   f"{f', {replicas} replicas, {router}' if replicas > 1 else ''}"
                   f"{f', P/D {pd_split} over {pd.link.kind}' if pd else ''}: {pace}; "
                   "the prefix cache persists across runs: POST /reset_prefix_cache]", err=True)

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_forever(app, host, port, announce))
    except OSError as exc:      # port in use, no such host or address, no permission
        why = exc.strerror or str(exc)
        raise InputError(f"--host {host} --port {port}: cannot listen ({why})") from None


def _check_pd_options(split: str | None) -> None:
    """Options that only `--pd` reads, or that `--pd` sets itself, refused in one line
    rather than dropped (issue 57): the router, the replicas, the link, the threshold."""
    ctx = click.get_current_context()

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)

    if split is None:
        for name, flag in (("kv_link", "--kv-link"), ("max_local_prefill", "--max-local-prefill")):
            if given(name):
                raise InputError(f"{flag} is a P/D setting: give --pd P:D too (or drop {flag})")
        return
    if given("replicas"):
        raise InputError("--pd P:D sets the instances itself: drop --replicas")
    if given("router"):
        raise InputError("--router with --pd: a P/D server picks decode instances by "
                         "session affinity and prefill instances by prefix; drop --router")


def _pd_config(split: str | None, hardware: str, kind: str, threshold: int,
               replicas: int) -> Any:
    """`--pd P:D` as the P/D settings (None without); InputError, one line, otherwise."""
    if split is None:
        return None
    if replicas > 1:
        raise InputError("--pd P:D sets the instances itself: drop --replicas")
    from simulator.endpoints.inprocess.pd import link_spec
    from simulator.twin.pd.policy import PDConfig, parse_split
    try:
        p, d = parse_split(split)
    except ValueError as exc:
        raise InputError(f"--pd: {exc}") from None
    if p + d > MAX_SERVE_ENGINES:
        raise InputError(f"--pd {split}: {p + d:,} instances; one twin server holds at most "
                         f"{MAX_SERVE_ENGINES} engines in all (P + D, as --replicas): run "
                         "several servers for more")
    try:
        return PDConfig(p, d, link_spec(hardware, kind), threshold)
    except ValueError as exc:
        raise InputError(f"--pd: {exc}") from None
