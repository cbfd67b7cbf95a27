"""Can this scenario run as given? One check that `validate` and `run` both call, so the
two never disagree (issue 29).

The scenario schema bounds each field on its own (`scenario/model.py`); what depends on
the twin — its hardware and model names, a KV budget against the card, how many
sessions the in-process twin can hold in memory — is checked here by building the
twin's performance model the way the run will (cheap: no block pool is allocated).
"""

from __future__ import annotations

import difflib

from simulator.analysis.slo import SLO_METRICS, parse_slo
from simulator.errors import InputError
from simulator.scenario.model import Scenario
from simulator.twin.model.perf_model import build_perf_model

# The in-process twin keeps every session (history, tokenized prompt, agent state) in
# one process: ~22 KB a session with short prompts, megabytes with long contexts.
# 10,000 sessions of the small test scenario peak near 0.5 GB; beyond this, use a
# server (`endurance twin serve` and --endpoint) or --workers with a real endpoint.
MAX_TWIN_SESSIONS = 10_000
# Every replica of an in-process fleet holds its own KV bookkeeping, ~160 bytes a block
# (a40 × qwen3-coder-30b: 28,125 blocks, ~4.7 MB a replica; 256 replicas peaked at
# 1.2 GB, 1,024 ran out of memory): the fleet's blocks together stay within this.
MAX_FLEET_KV_BLOCKS = 8_388_608


def check_runnable(s: Scenario, *, twin: tuple[str, str] | None = None,
                   spec: str | None = None, in_process: bool = True) -> None:
    """InputError (one line) when the run cannot start as given. `twin` (hardware,
    model) and `spec` replace the scenario's (the run's --twin / --spec); with
    `in_process` False (an HTTP endpoint) only what the client itself needs is checked."""
    _check_ramp_slos(s)
    if not in_process:
        return
    hw, model = twin or (s.twin.hardware, s.twin.model)
    over = s.twin.engine_overrides()
    pm = build_perf_model(hw, model, spec=spec or s.twin.spec, overrides=over)
    if s.fleet.prefill > 0:
        _check_pd_blocks(s, pm.num_blocks, hw, model, spec or s.twin.spec, over)
    blocks = s.fleet.replicas * pm.num_blocks
    if blocks > MAX_FLEET_KV_BLOCKS:
        raise InputError(f"fleet: {s.fleet.replicas:,} replicas × {pm.num_blocks:,} KV blocks "
                         f"is more than the in-process twin holds ({MAX_FLEET_KV_BLOCKS:,} "
                         f"blocks, about {MAX_FLEET_KV_BLOCKS * 160 // 2**30} GiB of its own "
                         f"memory): at most {MAX_FLEET_KV_BLOCKS // pm.num_blocks:,} replicas "
                         "of this card, or serve them (endurance twin serve --replicas)")
    ramp = s.load.ramp
    if ramp is not None and max(ramp.steps) > MAX_TWIN_SESSIONS:
        raise InputError(f"ramp: a step of {max(ramp.steps):,} sessions; the in-process "
                         f"twin holds at most {MAX_TWIN_SESSIONS:,} sessions in memory; ramp "
                         "further against a server (endurance twin serve, then --endpoint URL)")
    if s.sessions > MAX_TWIN_SESSIONS:
        raise InputError(f"sessions {s.sessions:,}: the in-process twin holds at most "
                         f"{MAX_TWIN_SESSIONS:,} sessions in memory; run more against "
                         "a server (endurance twin serve, then --endpoint URL)")


def _check_pd_blocks(s: Scenario, decode_blocks: int, hw: str, model: str, spec: str,
                     over: dict[str, object]) -> None:
    """A P/D fleet's prefill instances hold their own KV bookkeeping as its decode
    instances do: both count toward the bound (issue 57: `--pd 1024:1` peaked at 5 GB)."""
    f = s.fleet
    pre = decode_blocks if f.prefill_tp is None else build_perf_model(
        hw, model, spec=spec, overrides={**over, "tensor_parallel_size": f.prefill_tp}
    ).num_blocks
    blocks = f.prefill * pre + f.replicas * decode_blocks
    if blocks > MAX_FLEET_KV_BLOCKS:
        most = MAX_FLEET_KV_BLOCKS // max(pre, decode_blocks)
        raise InputError(f"fleet: {f.prefill:,} prefill + {f.replicas:,} decode instances hold "
                         f"{blocks:,} KV blocks, more than the in-process twin holds "
                         f"({MAX_FLEET_KV_BLOCKS:,} blocks, about "
                         f"{MAX_FLEET_KV_BLOCKS * 160 // 2**30} GiB of its own memory): at most "
                         f"{most:,} instances of this card in all (P + D)")


def _check_ramp_slos(s: Scenario) -> None:
    """A ramp tier's SLOs name known metrics (a typo would fail every step, unjudged)."""
    if s.load.ramp is None:
        return
    for tier in s.load.ramp.tiers:
        for text in tier.slos:
            try:
                parse_slo(text)
            except InputError as exc:
                why = str(exc).removeprefix("--slo ").split("; known:")[0]
                near = difflib.get_close_matches(text.split(">")[0].split("<")[0].strip(),
                                                 sorted(SLO_METRICS), n=2)
                hint = f" (did you mean {' or '.join(near)}?)" if near else ""
                raise InputError(f"load.ramp tier {tier.name!r}: {why}{hint}") from None
