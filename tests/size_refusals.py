"""`endurance size`'s refusals, one table, each case beside the request a library caller
builds for the same search: the CLI tests run the arguments (`tests/cli/`,
`tests/sweep/test_ramp.py`), `tests/sweep/test_size_request.py` builds the request in
Python and checks it refuses with the command's line."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from simulator.sweep.request import SizeRequest

SLO = "ttft_p95_s<=5"
PD_UNIT = frozenset({"--pd"})
REPLICAS = frozenset({"--replicas"})
ROUTER = frozenset({"--router"})


@dataclass(frozen=True)
class Refusal:
    """`size SCENARIO *args` is refused with a line holding every needle; `request`
    builds the same search in Python (and so raises). `by_click`: the command refuses it
    while parsing its options, in click's words, so only the needles are shared."""

    id: str
    args: tuple[str, ...]
    needles: tuple[str, ...]
    request: Callable[[str], SizeRequest]
    by_click: bool = False


# `--ramp` numbers past any bound (issue 49, round four): the steps, `run`'s and `size`'s
RAMP_PAST_BOUND: list[tuple[str, str]] = [
    ("bound-5000", f"1*2..{'9' * 5000}"), ("start-5000", f"{'9' * 5000}*2..8"),
    ("factor-400", f"1*{'9' * 400}..8"), ("step-400", f"1+{'9' * 400}..8"),
    ("plus-bound-5000", f"1+1..{'9' * 5000}"), ("list-5000", f"1,{'9' * 5000}")]

RAMP_PAST_BOUND_SIZE = [
    Refusal(f"ramp-{name}", ("--slo", SLO, "--ramp", steps), ("--ramp",),
            lambda s, steps=steps: SizeRequest(s, (SLO,), ramp=steps))
    for name, steps in RAMP_PAST_BOUND]

# options a ramp makes meaningless (round four)
RAMP_MEANINGLESS = [
    Refusal("size-duration", ("--slo", SLO, "--ramp", "1,2", "--duration", "5m"),
            ("--duration",),
            lambda s: SizeRequest(s, (SLO,), ("load.duration_s=300.0",), ramp="1,2")),
    Refusal("size-duration-default-hold", ("--slo", SLO, "--ramp", "", "--duration", "3m"),
            ("--duration",),
            lambda s: SizeRequest(s, (SLO,), ("load.duration_s=180.0",), ramp="")),
    Refusal("size-hold", ("--slo", SLO, "--hold", "5m"), ("--hold is how long a --ramp",),
            lambda s: SizeRequest(s, (SLO,), hold="5m")),
    Refusal("size-hold-0.5ms",
            ("--slo", SLO, "--ramp", "1,2", "--hold", "0.0005", "--max-step", "0.001"),
            ("at least 1 s",),
            lambda s: SizeRequest(s, (SLO,), ramp="1,2", hold="0.0005", max_step="0.001")),
]

# NaN under the option typed (round four)
NAN = [
    Refusal("attainment-nan", ("--slo", SLO, "--tier", "30", "--attainment", "nan"),
            ("--attainment",),
            lambda s: SizeRequest(s, (SLO,), tiers=(30.0,), attainment=math.nan), True),
    Refusal("ttft-nan", ("--slo", SLO, "--tier", "30", "--ttft", "nan"), ("--ttft",),
            lambda s: SizeRequest(s, (SLO,), tiers=(30.0,), ttft=math.nan), True),
    Refusal("tier-nan", ("--slo", SLO, "--tier", "nan"), ("--tier",),
            lambda s: SizeRequest(s, (SLO,), tiers=(math.nan,)), True),
]

# `--team` over a unit of several instances (issue 57, round five)
TEAM_UNIT = [
    Refusal("team-pd-unit", ("--slo", SLO, "--team", "4", "--pd", "1:2"),
            ("--pd 1:2", "--team", "--pd alone"),
            lambda s: SizeRequest(s, (SLO,), ("fleet.prefill=1", "fleet.replicas=2"), team=4,
                                  given=PD_UNIT)),
    Refusal("team-set-prefill", ("--slo", SLO, "--team", "4", "--set", "fleet.prefill=1"),
            ("--team",),
            lambda s: SizeRequest(s, (SLO,), ("fleet.prefill=1",), team=4)),
    Refusal("team-replicas", ("--slo", SLO, "--team", "4", "--replicas", "2"), ("--team",),
            lambda s: SizeRequest(s, (SLO,), ("fleet.replicas=2",), team=4, given=REPLICAS)),
]

# a team past what the fleet and P/D searches run (round five)
TEAM_PAST_SEARCH = [
    Refusal("fleet", ("--slo", SLO, "--team", "1000000", "--router", "least_loaded"),
            ("--team 1000000", "10,000"),
            lambda s: SizeRequest(s, (SLO,), ("fleet.router=least_loaded",), team=1_000_000,
                                  router="least_loaded", given=ROUTER)),
    Refusal("pd", ("--slo", SLO, "--team", "1000000", "--pd"), ("--team 1000000", "10,000"),
            lambda s: SizeRequest(s, (SLO,), team=1_000_000, pd=True, given=PD_UNIT)),
]

# a ramp, tiers and --from-twin with what they cannot combine with
RAMP_COMBINATIONS = [
    Refusal("ramp-descending", ("--slo", SLO, "--ramp", "4,2"), ("ascending",),
            lambda s: SizeRequest(s, (SLO,), ramp="4,2")),
    Refusal("ramp-factor-1", ("--slo", SLO, "--ramp", "1*1..8"), ("factor",),
            lambda s: SizeRequest(s, (SLO,), ramp="1*1..8")),
    Refusal("ramp-team", ("--slo", SLO, "--ramp", "", "--team", "4"), ("--team",),
            lambda s: SizeRequest(s, (SLO,), ramp="", team=4)),
    Refusal("ramp-repeats", ("--slo", SLO, "--ramp", "", "--repeats", "2"), ("--repeats",),
            lambda s: SizeRequest(s, (SLO,), ramp="", repeats=2)),
    Refusal("from-twin-alone", ("--slo", SLO, "--from-twin", "a40/qwen3-coder-30b-a3b-awq"),
            ("--from-twin",),
            lambda s: SizeRequest(s, (SLO,), from_twin="a40/qwen3-coder-30b-a3b-awq")),
    Refusal("ttft-alone", ("--slo", SLO, "--ttft", "5"), ("--tier",),
            lambda s: SizeRequest(s, (SLO,), ttft=5.0)),
    Refusal("hold-past-max-step",
            ("--slo", SLO, "--ramp", "", "--hold", "10m", "--max-step", "5m"), ("--hold",),
            lambda s: SizeRequest(s, (SLO,), ramp="", hold="10m", max_step="5m")),
    Refusal("ramp-kv-list", ("--slo", SLO, "--ramp", "", "--kv-offload-gib", "0,64"),
            ("--kv-offload-gib",),
            lambda s: SizeRequest(s, (SLO,), ramp="", kv_offload_gibs=(0.0, 64.0))),
    Refusal("tier-kv-list", ("--slo", SLO, "--tier", "30", "--kv-offload-gib", "0,64"),
            ("--kv-offload-gib",),
            lambda s: SizeRequest(s, (SLO,), tiers=(30.0,), kv_offload_gibs=(0.0, 64.0))),
    Refusal("tier-team", ("--slo", SLO, "--tier", "30", "--team", "8"), ("--team",),
            lambda s: SizeRequest(s, (SLO,), tiers=(30.0,), team=8)),
]

# one search is not a sweep; SLOs and bounds (`tests/cli/test_cli_sweep.py`)
NOT_A_SWEEP = [
    Refusal("set-list", ("--slo", SLO, "--set", "compaction.kind=none,prune"),
            ("a --set list is a sweep",),
            lambda s: SizeRequest(s, (SLO,), ("compaction.kind=none,prune",))),
    Refusal("spec-list", ("--slo", SLO, "--spec", "off,ngram:5"), ("a sweep",),
            lambda s: SizeRequest(s, (SLO,), spec="off,ngram:5")),
]
BAD_ARGUMENTS = [
    Refusal("slo-no-operator", ("--slo", "per_session_tok_s=50"), ("--slo",),
            lambda s: SizeRequest(s, ("per_session_tok_s=50",))),
    Refusal("slo-unknown-metric", ("--slo", "bogus>=50"), ("unknown metric",),
            lambda s: SizeRequest(s, ("bogus>=50",))),
    Refusal("max-sessions-0", ("--slo", SLO, "--max-sessions", "0"), ("--max-sessions",),
            lambda s: SizeRequest(s, (SLO,), max_sessions=0), True),
]

# a node's layouts are each replica searched alone
NODE_ALONE = [
    Refusal("node-ramp", ("--slo", SLO, "--node", "8xh100", "--ramp", ""), ("--node",),
            lambda s: SizeRequest(s, (SLO,), node="8xh100", ramp="")),
    Refusal("node-tier", ("--slo", SLO, "--node", "8xh100", "--tier", "30"), ("--node",),
            lambda s: SizeRequest(s, (SLO,), node="8xh100", tiers=(30.0,))),
    Refusal("node-fleet",
            ("--slo", SLO, "--node", "8xh100", "--team", "4", "--router", "least_loaded"),
            ("--node",),
            lambda s: SizeRequest(s, (SLO,), ("fleet.router=least_loaded",), node="8xh100",
                                  team=4, router="least_loaded", given=ROUTER)),
    Refusal("node-kv-list", ("--slo", SLO, "--node", "8xh100", "--kv-offload-gib", "0,8"),
            ("--node",),
            lambda s: SizeRequest(s, (SLO,), node="8xh100", kv_offload_gibs=(0.0, 8.0))),
]

# refused where their tests run a server or a P/D setting; kept here beside the rest
ELSEWHERE = [
    Refusal("pd-without-team", ("--slo", SLO, "--pd"), ("--team",),
            lambda s: SizeRequest(s, (SLO,), pd=True, given=PD_UNIT)),
    Refusal("cold-cache-without-endpoint", ("--slo", SLO, "--reset-prefix-cache"),
            ("needs --endpoint",),
            lambda s: SizeRequest(s, (SLO,), reset_prefix_cache=True)),
    Refusal("no-slo", (), ("give an SLO",), lambda s: SizeRequest(s)),
]

ALL = [*RAMP_PAST_BOUND_SIZE, *RAMP_MEANINGLESS, *NAN, *TEAM_UNIT, *TEAM_PAST_SEARCH,
       *RAMP_COMBINATIONS, *NOT_A_SWEEP, *BAD_ARGUMENTS, *NODE_ALONE, *ELSEWHERE]
