"""The options of `endurance sweep` and `endurance size` (`cli/sweep.py` calls the
search). The combinations of `size`'s options that mean nothing are refused by the
request they build (`sweep/request.py`), so a library caller meets the same refusals.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import click
from click.decorators import FC

from simulator.cli.run import common_run_options, finite, ramp_hold_options
from simulator.errors import InputError

_ROUTER = re.compile(r"^fleet\.router=(\w+)$")


def parallel_options(f: FC) -> FC:
    f = click.option("--ray-address", metavar="ADDR",
                     help="Ray cluster for --executor ray (default $RAY_ADDRESS, else local).")(f)
    f = click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
                     show_default=True, help="Where --parallel points run: local "
                     "processes or Ray tasks (needs `pip install 'endurance[ray]'`).")(f)
    return click.option("--parallel", type=click.IntRange(min=1, max=1024), default=1,
                        show_default=True,
                        help="Independent points run at once (results identical to serial).")(f)


def cold_cache_option(f: FC) -> FC:
    """`--reset-prefix-cache`: every point starts from a cold server cache (as `run`'s)."""
    return click.option("--reset-prefix-cache", is_flag=True, help="With --endpoint: POST "
                        "/reset_prefix_cache before each point, so no point reads the "
                        "previous one's cache (serial points only).")(f)


def sweep_options(f: FC) -> FC:
    """`sweep`'s own options (beside the run options and the fan-out's)."""
    opts: list[Callable[[FC], FC]] = [
        click.option("--sessions", "sessions_list", default=None,
                     help="Comma-separated session counts  [default: 1,2,4,8,16,32; with a "
                     "--set list, the scenario's sessions; with --copy, 1,8]."),
        click.option("--json", "as_json", is_flag=True,
                     help="Print only a JSON list (one object per row)."),
        click.option("--repeats", type=click.IntRange(min=1, max=1000), default=1,
                     show_default=True,
                     help="With --set KEY=a,b,c or --copy: runs per value, seeds +0 … +R−1."),
        parallel_options, cold_cache_option,
        click.option("--copy", "copy_levels", default=None, metavar="SHARE[,SHARE…]",
                     help="Copy shares of the code-edit replies, e.g. 0,0.25,0.5,1: each "
                     "--spec setting (default off,ngram:24) at each share and session count, "
                     "--repeats seeds; prints where speculation starts to pay "
                     "(docs/twin-fidelity.md)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return common_run_options(f)


def size_options(f: FC) -> FC:
    """`size`'s own options (beside the run options and the fan-out's)."""
    opts: list[Callable[[FC], FC]] = [
        click.option("--slo", "slos", multiple=True, help='An SLO such as '
                     '"per_session_tok_s>=50" or "ttft_p95_s<=5" (repeatable).'),
        click.option("--max-sessions", type=click.IntRange(min=1, max=100_000), default=64,
                     show_default=True),
        click.option("--ramp", "ramp", is_flag=False, flag_value="", default=None,
                     metavar="[STEPS]", help="Size in one run: a stepped ramp (STEPS: "
                     "1,2,4,8 | START*FACTOR..MAX | START+STEP..MAX; default "
                     "1*2..--max-sessions), each step held to its own steady window, "
                     "stopped at the SLO boundary, refined, confirmed."),
        ramp_hold_options,
        click.option("--tier", "tiers", multiple=True, type=click.FloatRange(min=0, max=1e6),
                     callback=finite, metavar="TOK_S", help="An output-speed tier "
                     "(repeatable, e.g. --tier 30 --tier 100): the most sessions whose "
                     "requests get ≥ TOK_S decode tok/s with TTFT ≤ --ttft, for "
                     "--attainment of them."),
        click.option("--ttft", "ttft", type=click.FloatRange(min=0, max=86400, min_open=True),
                     callback=finite, default=None,
                     help="--tier: the TTFT bound, s [default: 15]."),
        click.option("--attainment", type=click.FloatRange(min=0, max=1, min_open=True),
                     callback=finite, default=0.9, show_default=True,
                     help="--tier: the share of requests that must meet the tier."),
        click.option("--from-twin", "from_twin", metavar="HARDWARE/MODEL", default=None,
                     callback=lambda _c, _p, v: from_twin_value(v),
                     help="--ramp --endpoint: search on this twin first and start the real "
                     "ramp a step or two below its answer."),
        click.option("--no-compare", is_flag=True, help="--ramp on the twin: skip the "
                     "probe search the ramp is compared with."),
        click.option("--json", "as_json", is_flag=True, help="Print only JSON."),
        click.option("--repeats", type=click.IntRange(min=0, max=100), default=1,
                     show_default=True, help="Searches repeated with seeds +1 … +R from the "
                     "answer: the answer's range."),
        click.option("--team", "team", type=click.IntRange(min=1, max=1_000_000),
                     default=None, metavar="M", help="Sessions a team runs at once: print "
                     "how many cards (replicas) it needs."),
        click.option("--node", "node", default=None, metavar="GPUSxCARD",
                     help="Lay out one node (e.g. 8xh100) for the scenario's model: one "
                     "replica search per TP layout that fits (8×TP1, 4×TP2, 2×TP4, 1×TP8), "
                     "side by side with sessions and $/h; with --team M, the replicas and "
                     "nodes each needs. See docs/parallelism.md."),
        parallel_options, cold_cache_option,
    ]
    for opt in reversed(opts):
        f = opt(f)
    return common_run_options(f)


def routers() -> list[str]:
    """The routers `--router` (or `--set fleet.router=`) named, in order."""
    from simulator.cli.fleet_options import fleet_overrides
    return [m.group(1) for o in fleet_overrides() if (m := _ROUTER.match(o))]


def from_twin_value(value: str | None) -> str | None:
    """--from-twin checked as it is parsed, its refusals naming --from-twin: blank is
    refused (not the scenario's twin under no name), the profiles must load."""
    if value is None:
        return None
    from simulator.twin.model.profiles import DEFAULT_TWIN, load_hardware, load_model, parse_twin
    if not value.strip():
        raise InputError(f"--from-twin {value!r}: give the twin as HARDWARE/MODEL "
                         f"(e.g. {DEFAULT_TWIN})")
    hw, model = parse_twin(value, "--from-twin")
    try:
        load_hardware(hw)
        load_model(model)
    except InputError as exc:
        raise InputError(f"--from-twin {value}: {exc}") from None
    return value
