"""The options of `endurance sweep` and `endurance size`, and the combinations of them
that mean nothing, refused in one line before any run (`cli/sweep.py` calls the search).
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


def check_fan_out(endpoint: str | None, reset: bool, parallel: int, executor: str) -> None:
    """Options that cannot combine with running points at once, refused in one line."""
    at_once = parallel > 1 or executor != "local"
    if reset and endpoint is None:
        raise InputError("--reset-prefix-cache needs --endpoint (the in-process twin "
                         "starts cold every point)")
    if reset and at_once:
        raise InputError("--reset-prefix-cache with --parallel/--executor: points running "
                         "at once share the server's cache; run them serially")
    if endpoint is not None and parallel > 1:
        raise InputError("--parallel with --endpoint: points running at once share the one "
                         "server, so no point measures its own session count; run them "
                         "serially (each point on the twin runs alone in virtual time)")


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


def check_ramp_options(ramp: str | None, endpoint: str | None, from_twin: str | None,
                       tiers: tuple[float, ...], ttft: float | None, team: int | None,
                       repeats: int, kv_list: bool) -> None:
    """What --ramp, --tier and --from-twin cannot combine with, refused in one line."""
    if (ramp is not None or tiers) and kv_list:
        raise InputError("--ramp/--tier with a --kv-offload-gib list: one answer per host "
                         "tier size is a table of searches; run them once per size "
                         "(--kv-offload-gib G)")
    if tiers and team is not None:
        raise InputError("--tier with --team: size the tiers, then divide the team by the "
                         "tier's answer")
    if from_twin is not None and (ramp is None or endpoint is None):
        raise InputError("--from-twin starts a real ramp from the twin's answer: it needs "
                         "--ramp and --endpoint")
    if ttft is not None and not tiers:
        raise InputError("--ttft is the TTFT bound of --tier output-speed tiers; give a --tier")
    if ramp is not None and team is not None:
        raise InputError("--ramp with --team: size one card with the ramp, then divide "
                         "(or run the probe search with --team)")
    if ramp is not None and repeats != 1:
        raise InputError("--ramp confirms its answer with a second hold; --repeats is for "
                         "the probe search")


def check_some_slo(slos: int, tiers: tuple[float, ...]) -> None:
    if not slos and not tiers:
        raise InputError("size: give an SLO (--slo 'per_session_tok_s>=50') or an "
                         "output-speed tier (--tier 30)")


def check_size_options(sets: tuple[str, ...], spec: str | None, team: int | None,
                       endpoint: str | None) -> str:
    """What one size search cannot be, refused in one line; the search it is: "pd"
    (`--team M --pd`), "fleet" (`--team M --router P`) or "size"."""
    from simulator.analysis.policy_sweep import split_listed_set
    from simulator.cli.fleet_options import pd_choice
    if split_listed_set(sets) is not None:
        raise InputError("size: a --set list is a sweep (one search runs one configuration); "
                         "run `size` once per value, or `sweep --set KEY=a,b`")
    if spec is not None and "," in spec:
        raise InputError("size: --spec a,b is a sweep (one search runs one setting); run "
                         "`size` once per setting, or `sweep --spec a,b`")
    fleet = team is not None and bool(routers())
    pd = pd_choice() == "search"
    if pd and (team is None or endpoint is not None):
        raise InputError("size --pd searches a team's P:D split on the twin: give --team M "
                         "and no --endpoint")
    if fleet and endpoint is not None:
        raise InputError("size --team --router: the fleet search runs on the twin (no --endpoint)")
    if team is not None:
        check_team_unit(team, sets, fleet or pd)
    return "pd" if pd else "fleet" if fleet else "size"


def check_team_unit(team: int, sets: tuple[str, ...], runs_team: bool) -> None:
    """`--team M` divides M by what one card holds (issue 57): a unit of several
    instances (`--pd P:D`, `--replicas R`, their `--set`s) would be counted as one card,
    and a search that runs the whole team (`--router`, `--pd` alone) runs it in one
    in-process twin, which holds at most MAX_TWIN_SESSIONS sessions."""
    from simulator.cli.fleet_options import fleet_given, fleet_overrides, pd_choice
    from simulator.run.bounds import MAX_TWIN_SESSIONS
    given = fleet_given()
    if "--pd" in given and pd_choice() is None:
        split = dict(o.split("=", 1) for o in fleet_overrides())
        p, d = split.get("fleet.prefill", "P"), split.get("fleet.replicas", "D")
        raise InputError(f"size --team with --pd {p}:{d}: that sizes one unit of {p} prefill "
                         f"+ {d} decode instances, not one card; give --pd alone to search "
                         "the split and the cards (size --team M --pd)")
    one_card = {"fleet.prefill": "0", "fleet.replicas": "1"}
    unit = "--replicas" if "--replicas" in given else next(
        (f"--set {k}" for k, _, v in (o.partition("=") for o in sets)
         if k.strip() in one_card and v.strip() != one_card[k.strip()]), None)
    if unit is not None:
        raise InputError(f"size --team with {unit}: --team counts the cards one card's "
                         "answer divides into; size one card (drop it), or search a fleet "
                         "(--router P) or a P:D split (--pd)")
    if runs_team and team > MAX_TWIN_SESSIONS:
        raise InputError(f"--team {team}: the fleet and P/D searches run the whole team in "
                         f"the in-process twin, which holds at most {MAX_TWIN_SESSIONS:,} "
                         "sessions; size one card (drop --router/--pd) to divide a larger team")

