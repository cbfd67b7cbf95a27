"""`endurance sweep` and `endurance size`: option parsing, one profile, one pipeline.

Every point is a normal run (its own results directory under the command's folder),
so every figure in a table can be traced back to a `turns.parquet`. What runs and how
the rows are made is `simulator.sweep` (profiles over one point runner and one fan-out);
this module only turns options into a profile and shows the answer.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from simulator.cli._app import main
from simulator.cli.run import (
    check_ramp_flags,
    common_run_options,
    finite,
    ramp_hold_options,
    ramp_hold_s,
    scenario_overrides,
)
from simulator.errors import InputError

_ROUTER = re.compile(r"^fleet\.router=(\w+)$")


def parallel_options(f: Any) -> Any:
    f = click.option("--ray-address", metavar="ADDR",
                     help="Ray cluster for --executor ray (default $RAY_ADDRESS, else local).")(f)
    f = click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
                     show_default=True, help="Where --parallel points run: local "
                     "processes or Ray tasks (needs `pip install 'endurance[ray]'`).")(f)
    return click.option("--parallel", type=click.IntRange(min=1, max=1024), default=1,
                        show_default=True,
                        help="Independent points run at once (results identical to serial).")(f)


def cold_cache_option(f: Any) -> Any:
    """`--reset-prefix-cache`: every point starts from a cold server cache (as `run`'s)."""
    return click.option("--reset-prefix-cache", is_flag=True, help="With --endpoint: POST "
                        "/reset_prefix_cache before each point, so no point reads the "
                        "previous one's cache (serial points only).")(f)


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


def point_base(scenario: str, overrides: Sequence[str], folder: Path, endpoint: str | None,
               twin: str | None, spec: str | None, price_per_hour: float | None,
               client: str | None, reset: bool) -> Any:
    """The points' shared part: the scenario (loaded once, its seed for repeats)."""
    from simulator.scenario.load import load_scenario
    from simulator.sweep.point import Target
    from simulator.sweep.profiles import PointBase
    s, _ = load_scenario(scenario, list(overrides))
    return PointBase(scenario, tuple(overrides), folder, s.seed,
                     Target(endpoint_url=endpoint, twin=twin, spec=spec, client=client,
                            price_per_hour=price_per_hour, reset_prefix_cache=reset))


def progress_line(as_json: bool) -> Callable[[Any], None] | None:
    """The stderr line each finished point prints (none with --json)."""
    if as_json:
        return None

    def line(r: Any) -> None:
        s = r.summary
        if r.status == "error":
            click.echo(f"  {r.point.label}: {r.reason}", err=True)
            return
        if s.get("ramp"):
            steps = s["ramp"].get("steps") or []
            answers = "" if r.status == "interrupted" else \
                ", ".join(f"{t['name']}: {t['sessions']}" for t in s["ramp"]["tiers"])
            click.echo(f"  {r.point.label}: {r.status}, {len(steps)} held step(s)"
                       + (f", {answers}" if answers else "")
                       + f", run in {r.elapsed_s:.1f} s → {r.run_dir}", err=True)
            return
        window = s.get("window_aggregate_tok_s")
        figures = ("no steady-state window" if window is None
                   else f"{window:,.1f} tok/s window aggregate")
        steady = "" if s.get("steady_state", True) else \
            f" NOT STEADY ({s.get('steady_state_reason')})"
        where = f" → {r.run_dir}" if r.run_dir else ""
        click.echo(f"  {r.point.label}: {r.status}, achieved "
                   f"{s.get('achieved_sessions') or 0:,.1f}, {figures} "
                   f"({s.get('aggregate_tok_s') or 0:,.1f} whole run){steady}, "
                   f"run in {r.elapsed_s:.1f} s{where}", err=True)
    return line


def watching(folder: Path, as_json: bool, kind: str) -> Any:
    """The live view of the running point and the search's state (`live/watch.py`; none
    with --json)."""
    from simulator.live.watch import watching as watch_folder
    return watch_folder(folder, as_json, kind)


def _folder(out: Path, kind: str) -> Path:
    return out / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def _router() -> str:
    from simulator.cli.fleet_options import fleet_overrides
    routers = [m.group(1) for o in fleet_overrides() if (m := _ROUTER.match(o))]
    return routers[-1] if routers else "round_robin"


@main.command(name="sweep")
@click.argument("scenario", type=click.Path(dir_okay=False))
@common_run_options
@click.option("--sessions", "sessions_list", default=None,
              help="Comma-separated session counts  [default: 1,2,4,8,16,32; with a "
              "--set list, the scenario's sessions; with --copy, 1,8].")
@click.option("--json", "as_json", is_flag=True, help="Print only a JSON list (one object per row).")
@click.option("--repeats", type=click.IntRange(min=1, max=1000), default=1, show_default=True,
              help="With --set KEY=a,b,c or --copy: runs per value, seeds +0 … +R−1.")
@parallel_options
@cold_cache_option
@click.option("--copy", "copy_levels", default=None, metavar="SHARE[,SHARE…]",
              help="Copy shares of the code-edit replies, e.g. 0,0.25,0.5,1: each --spec "
              "setting (default off,ngram:24) at each share and session count, --repeats "
              "seeds; prints where speculation starts to pay (docs/twin-fidelity.md).")
def sweep_command(scenario: str, endpoint: str | None, twin: str | None, spec: str | None,
                  model: str | None, turns: int | None, sets: tuple[str, ...], seed: int | None,
                  price_per_hour: float | None, client: str | None, out: Path,
                  sessions_list: str | None, as_json: bool, repeats: int = 1, parallel: int = 1,
                  executor: str = "local", ray_address: str | None = None,
                  reset_prefix_cache: bool = False, copy_levels: str | None = None) -> None:
    """Run SCENARIO at each session count; one row per count, plus a plot.

    With `--set KEY=a,b,c` (e.g. compaction.kind=none,prune,block,summarize,
    clear_tool_results): one row per value instead — speed beside recall — and the
    speed–recall frontier plot. `--spec a,b` compares speculation settings, `--copy`
    copy shares; `--kv-offload-gib G1,G2` and `--replicas R1,R2` repeat the sweep per
    host tier size / fleet size."""
    from simulator.analysis.policy_sweep import split_listed_set
    from simulator.cli.fleet_options import pd_choice, replicas_list
    from simulator.cli.twin_options import tiers
    from simulator.sweep.fanout import executor_for
    from simulator.sweep.pipeline import run_profile
    from simulator.sweep.profiles import Outer, Sweep, pd_dim, replicas_dim, tiers_dim
    check_fan_out(endpoint, reset_prefix_cache, parallel, executor)
    listed = split_listed_set(sets)
    other_sets = tuple(listed[2]) if listed is not None else sets
    base = point_base(scenario, scenario_overrides(None, turns, seed, model, other_sets),
                      _folder(out, "sweep"), endpoint, twin, spec, price_per_hour, client,
                      reset_prefix_cache)
    inner = _inner(base, listed, spec, copy_levels, sessions_list, repeats)
    outer: list[Outer] = []
    if (sizes := tiers()) is not None:
        outer.append(tiers_dim(sizes))
    if replicas := replicas_list():
        outer.append(replicas_dim(replicas, _router()))
    if isinstance(pds := pd_choice(), list):
        outer.append(pd_dim(pds))
    with executor_for(parallel, executor, ray_address) as ex, \
            watching(base.folder, as_json, "sweep"):      # the running point, live
        answer = run_profile(Sweep(base, inner, tuple(outer)), ex, progress_line(as_json))
    name = answer.name + ("-tiers" if sizes is not None and answer.name == "sweep" else "")
    _save_and_show(answer, base.folder, name, as_json)


def _inner(base: Any, listed: tuple[str, list[str], list[str]] | None, spec: str | None,
           copy_levels: str | None, sessions_list: str | None, repeats: int) -> Any:
    """The sweep's inner kind from the options; combinations that mean nothing are
    refused in one line."""
    from simulator.analysis.copy_sweep import copy_levels as parse_levels
    from simulator.scenario.load import load_scenario
    from simulator.sweep.profiles import (
        Copy,
        Counts,
        Settings,
        Specs,
        parse_counts,
        parse_specs,
        parse_values,
    )
    spec_listed = spec is not None and "," in spec
    if copy_levels is not None:
        if listed is not None:
            raise InputError("--copy sweeps copy shares × --spec settings × --sessions; it "
                             "does not combine with a --set list")
        s, _ = load_scenario(base.scenario_path, list(base.overrides))
        return Copy(tuple(parse_levels(copy_levels)), parse_specs(spec or "off,ngram:24"),
                    parse_counts(sessions_list or "1,8"), repeats,
                    tuple(t.code_edit for t in s.turn_templates))
    if listed is not None:
        if spec_listed:
            raise InputError("--set KEY=a,b with --spec a,b: sweep one listed setting at a "
                             "time (or --copy to cross copy shares with --spec settings)")
        key, raw = listed[0], ",".join(listed[1])
        values = parse_values(key, raw)
        for v in values:                      # a bad value fails here, before any run
            load_scenario(base.scenario_path, [*base.overrides, f"{key}={v}"])
        if sessions_list is None:
            n = load_scenario(base.scenario_path, list(base.overrides))[0].sessions
        else:
            counts = parse_counts(sessions_list)
            if len(counts) != 1:
                raise InputError(f"--sessions: a --set sweep runs at one session count, got "
                                 f"{sessions_list!r}")
            n = counts[0]
        return Settings(key, values, n, repeats)
    if repeats != 1:
        raise InputError("--repeats: a session-count sweep runs one seed per count (use "
                         "`size --repeats`, or sweep a --set list or --copy levels)")
    counts = parse_counts(sessions_list or "1,2,4,8,16,32")
    if spec_listed:
        assert spec is not None
        return Specs(parse_specs(spec), counts)
    return Counts(counts)


def _save_and_show(answer: Any, folder: Path, name: str, as_json: bool) -> None:
    """`<name>.json` and one plot per section in the sweep's folder; then the JSON
    alone, or the tables, the plots' paths and the folder (its last line, as `run`
    prints its run)."""
    from simulator.analysis.target import target_of_runs
    from simulator.report.sweeps import RENDER
    folder.mkdir(parents=True, exist_ok=True)
    rows = answer.rows
    (folder / f"{name}.json").write_text(json.dumps(rows, indent=2, default=str) + "\n")
    render = RENDER[answer.name]
    plots: list[Path] = []
    text: list[str] = []
    many = len(answer.sections) > 1 or (answer.sections and answer.sections[0][0])
    for i, (title, part) in enumerate(answer.sections):
        stem = name if not many else f"{name}-{i + 1}"
        plots += render.write(part, folder / f"{stem}.png")
        text += [title, render.table(part)] if title else [render.table(part)]
    if as_json:
        click.echo(json.dumps(rows, default=str))
        return
    target = target_of_runs(d for r in rows for d in r.get("run_dirs") or [])
    click.echo("\n".join(text))
    if target is not None:
        click.echo(f"swept: {target}")
    for p in plots:
        click.echo(f"plot: {p}")
    click.echo(str(folder))


@main.command(name="size")
@click.argument("scenario", type=click.Path(dir_okay=False))
@common_run_options
@click.option("--slo", "slos", multiple=True,
              help='An SLO such as "per_session_tok_s>=50" or "ttft_p95_s<=5" (repeatable).')
@click.option("--max-sessions", type=click.IntRange(min=1, max=100_000), default=64,
              show_default=True)
@click.option("--ramp", "ramp", is_flag=False, flag_value="", default=None, metavar="[STEPS]",
              help="Size in one run: a stepped ramp (STEPS: 1,2,4,8 | START*FACTOR..MAX | "
              "START+STEP..MAX; default 1*2..--max-sessions), each step held to its own "
              "steady window, stopped at the SLO boundary, refined, confirmed.")
@ramp_hold_options
@click.option("--tier", "tiers", multiple=True, type=click.FloatRange(min=0, max=1e6),
              callback=finite, metavar="TOK_S", help="An output-speed tier (repeatable, e.g. --tier 30 "
              "--tier 100): the most sessions whose requests get ≥ TOK_S decode tok/s with "
              "TTFT ≤ --ttft, for --attainment of them.")
@click.option("--ttft", "ttft", type=click.FloatRange(min=0, max=86400, min_open=True),
              callback=finite, default=None, help="--tier: the TTFT bound, s [default: 15].")
@click.option("--attainment", type=click.FloatRange(min=0, max=1, min_open=True),
              callback=finite, default=0.9, show_default=True,
              help="--tier: the share of requests that must meet the tier.")
@click.option("--from-twin", "from_twin", metavar="HARDWARE/MODEL", default=None,
              callback=lambda _c, _p, v: _from_twin_value(v),
              help="--ramp --endpoint: search on this twin first and start the real ramp "
              "a step or two below its answer.")
@click.option("--no-compare", is_flag=True,
              help="--ramp on the twin: skip the probe search the ramp is compared with.")
@click.option("--json", "as_json", is_flag=True, help="Print only JSON.")
@click.option("--repeats", type=click.IntRange(min=0, max=100), default=1, show_default=True,
              help="Searches repeated with seeds +1 … +R from the answer: the answer's range.")
@click.option("--team", "team", type=click.IntRange(min=1, max=1_000_000), default=None,
              metavar="M",
              help="Sessions a team runs at once: print how many cards (replicas) it needs.")
@parallel_options
@cold_cache_option
def size_command(scenario: str, endpoint: str | None, twin: str | None, spec: str | None,
                 model: str | None, turns: int | None, sets: tuple[str, ...], seed: int | None,
                 price_per_hour: float | None, client: str | None, out: Path,
                 slos: tuple[str, ...], max_sessions: int, as_json: bool,
                 repeats: int = 1, team: int | None = None, parallel: int = 1,
                 executor: str = "local", ray_address: str | None = None,
                 reset_prefix_cache: bool = False, ramp: str | None = None,
                 hold: str = "3m", max_step: str = "30m", tiers: tuple[float, ...] = (),
                 ttft: float | None = None, attainment: float = 0.9,
                 from_twin: str | None = None, no_compare: bool = False) -> None:
    """Largest session count that meets every SLO at steady state (geometric probe,
    then a gallop from where the figures put the boundary, then --repeats searches with
    other seeds giving a range); with --ramp,
    in one run; with --tier, per output-speed tier.

    Exit code 0 when some count meets every SLO, 1 when not even one session does
    (the JSON and size.json are written either way)."""
    from simulator.analysis.policy_sweep import split_listed_set
    from simulator.analysis.slo import parse_slo
    from simulator.cli.twin_options import tiers as kv_tiers
    from simulator.sweep.fanout import executor_for
    parsed = tuple(parse_slo(s) for s in slos)
    if not parsed and not tiers:
        raise InputError("size: give an SLO (--slo 'per_session_tok_s>=50') or an "
                         "output-speed tier (--tier 30)")
    check_fan_out(endpoint, reset_prefix_cache, parallel, executor)
    check_ramp_flags(ramp, None, sets)
    _check_ramp_options(ramp, endpoint, from_twin, tiers, ttft, team, repeats,
                        kv_tiers() is not None)
    if split_listed_set(sets) is not None:
        raise InputError("size: a --set list is a sweep (one search runs one configuration); "
                         "run `size` once per value, or `sweep --set KEY=a,b`")
    if spec is not None and "," in spec:
        raise InputError("size: --spec a,b is a sweep (one search runs one setting); run "
                         "`size` once per setting, or `sweep --spec a,b`")
    fleet = team is not None and any(_ROUTER.match(o) for o in _fleet())
    pd_search = _pd_search(team, endpoint)
    if fleet and endpoint is not None:
        raise InputError("size --team --router: the fleet search runs on the twin (no --endpoint)")
    from simulator.sweep.ramp import goodput_overrides
    overrides = scenario_overrides(None, turns, seed, model, sets)
    base = point_base(scenario, [*overrides, *goodput_overrides(scenario, parsed, tiers,
                                                                 overrides)],
                      _folder(out, "size"), endpoint, twin, spec, price_per_hour, client,
                      reset_prefix_cache)
    on_done = progress_line(as_json)
    from simulator.sweep.team_size import team_replay
    if (team_spec := team_replay(base)) is not None:   # an imported team's day
        if ramp is not None or tiers or team is not None or kv_tiers() is not None:
            raise InputError("size: a team replay sizes cards for the team's own arrivals; "
                             "--ramp, --tier, --team and host KV tiers do not apply")
        routers = [m.group(1) for o in _fleet() if (m := _ROUTER.match(o))]
        with executor_for(parallel, executor, ray_address) as ex, \
                watching(base.folder, as_json, "size"):
            sys.exit(_show_team(base, parsed, team_spec, routers, ex, on_done, as_json))
    if ramp is not None:
        from simulator.sweep.ramp import tier_specs
        specs = tier_specs(parsed, tiers, ttft, attainment)
        hold_s, max_step_s = ramp_hold_s(hold, max_step)
        with executor_for(parallel, executor, ray_address) as ex, \
                watching(base.folder, as_json, "size"):
            answer = _ramp(base, ramp, max_sessions, hold_s, max_step_s, specs, from_twin,
                           not no_compare, ex, on_done)
        sys.exit(_show_ramp(answer, base.folder, as_json))
    if tiers:
        with executor_for(parallel, executor, ray_address) as ex, \
                watching(base.folder, as_json, "size"):
            sys.exit(_size_per_speed_tier(base, parsed, tiers, ttft, attainment,
                                          max_sessions, repeats, ex, on_done, as_json))
    with executor_for(parallel, executor, ray_address) as ex, \
            watching(base.folder, as_json, "size"):
        if (sizes := kv_tiers()) is not None:
            sys.exit(_size_per_tier(base, sizes, parsed, max_sessions, repeats, team, sets,
                                    ex, on_done, as_json))
        result = _size_one(base, parsed, max_sessions, repeats, team, ex, on_done)
        fleet_answer = None
        if pd_search and team is not None:
            fleet_answer = _size_pd(base, parsed, team, result.cards(), ex, on_done)
        elif fleet and team is not None:
            from simulator.sweep.pipeline import run_profile
            from simulator.sweep.size import FleetProfile
            cards = result.cards()
            fleet_answer = run_profile(FleetProfile(base, parsed, team, _router(),
                                                    start=cards[0] if cards else None),
                                       ex, on_done)
    _show_size(result, base.folder, fleet_answer, as_json)
    sys.exit(0 if result.sessions > 0 else 1)


def _show_team(base: Any, slos: tuple[Any, ...], spec: Any, routers: list[str], ex: Any,
               on_done: Any, as_json: bool) -> int:
    """Size a team replay; size.json, the answer, the fidelity and the profile."""
    from simulator.sweep.team_size import size_team, team_report
    result = size_team(base, slos, spec, routers[0] if routers else None, ex, on_done)
    data, text = team_report(result, base.folder)
    click.echo(json.dumps(data, default=str) if as_json else text)
    return 0 if result.replicas is not None else 1


def _pd_search(team: int | None, endpoint: str | None) -> bool:
    """`size --pd`: the P/D search (needs --team and the twin)."""
    from simulator.cli.fleet_options import pd_choice
    if pd_choice() != "search":
        return False
    if team is None or endpoint is not None:
        raise InputError("size --pd searches a team's P:D split on the twin: give --team M "
                         "and no --endpoint")
    return True


def _size_pd(base: Any, slos: tuple[Any, ...], team: int, cards: Any, ex: Any,
             on_done: Any) -> Any:
    from simulator.sweep.pd_size import PDProfile
    from simulator.sweep.pipeline import run_profile
    return run_profile(PDProfile(base, slos, team, cards[0] if cards else None), ex, on_done)


def _fleet() -> list[str]:
    from simulator.cli.fleet_options import fleet_overrides
    return fleet_overrides()


def _size_one(base: Any, slos: tuple[Any, ...], max_sessions: int, repeats: int,
              team: int | None, ex: Any, on_done: Any) -> Any:
    from simulator.sweep.pipeline import run_profile
    from simulator.sweep.size import SizeProfile
    cap, shared = _kv_facts(base)
    return run_profile(SizeProfile(base, slos, max_sessions, repeats, team, cap, shared),
                       ex, on_done)


def _show_size(result: Any, folder: Path, fleet: Any, as_json: bool) -> None:
    """size.json in the folder; the JSON, or the answer, the fleet answer and the folder."""
    from simulator.analysis.target import target_of_runs
    from simulator.report.console import format_sizing
    folder.mkdir(parents=True, exist_ok=True)
    data = result.to_dict()
    data["run_dirs"] = _run_dirs(result.probes)
    data["target"] = target_of_runs(d for ds in data["run_dirs"].values() for d in ds)
    if result.unused:
        data["unused_run_dirs"] = [p.run_dir for p in result.unused]
    if fleet is not None:
        data["pd" if _is_pd(fleet) else "fleet"] = fleet.to_dict()
    (folder / "size.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    click.echo(format_sizing(result, data["target"]))
    if fleet is not None and _is_pd(fleet):
        from simulator.report.pd import format_pd_sizing
        click.echo(format_pd_sizing(fleet))
    elif fleet is not None:
        from simulator.report.sweeps import format_fleet_sizing
        click.echo(format_fleet_sizing(fleet))
    click.echo(str(folder))


def _is_pd(answer: Any) -> bool:
    return hasattr(answer, "split")


def _run_dirs(probes: Sequence[Any]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for p in probes:
        out.setdefault(p.sessions, []).append(p.run_dir)
    return out


def _size_per_tier(base: Any, sizes: list[float], slos: tuple[Any, ...], max_sessions: int,
                   repeats: int, team: int | None, sets: tuple[str, ...], ex: Any,
                   on_done: Any, as_json: bool) -> int:
    """One search per host KV tier size, each in its own folder; one table and plot
    (size-tiers.json, size-tiers.png). Returns the exit code."""
    from simulator.analysis.tier_sizing import knee, policy_of, tier_set
    from simulator.report.sweeps import format_tier_table, write_tier_plot
    rows: list[dict[str, Any]] = []
    for gib in sizes:
        result = _size_one(base.under(f"tier-{gib:g}gib", (tier_set(gib),)), slos,
                           max_sessions, repeats, team, ex, on_done)
        rows.append({"kv_offload_gib": gib, "policy": policy_of(sets), **result.to_dict()})
        if not as_json:
            click.echo(f"  tier {gib:g} GiB: {result.sessions} sessions "
                       f"({result.binding} [{result.binding_kind}])", err=True)
    folder = base.folder
    folder.mkdir(parents=True, exist_ok=True)
    data = {"rows": rows, "knee_gib": knee(rows)}
    (folder / "size-tiers.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    plot = write_tier_plot(rows, folder / "size-tiers.png")
    if as_json:
        click.echo(json.dumps(data, default=str))
    else:
        click.echo(format_tier_table(rows))
        click.echo(f"plot: {plot}")
        click.echo(str(folder))
    return 0 if any(r["sessions"] > 0 for r in rows) else 1


def _kv_facts(base: Any) -> tuple[int | None, int]:
    """(KV capacity in tokens from the twin profile, shared prefix tokens)."""
    from simulator.scenario.load import load_scenario
    from simulator.session.prefix import build_base_prefix
    from simulator.twin.model.perf_model import build_perf_model
    from simulator.twin.model.profiles import parse_twin
    s, _ = load_scenario(base.scenario_path, list(base.overrides))
    shared = build_base_prefix(s).tokens_est if s.cache_bust == "none" else 0
    if base.target.endpoint_url is not None:
        return None, shared      # a real vLLM reports it via vllm:cache_config_info
    twin = base.target.twin
    hw, model = parse_twin(twin) if twin else (s.twin.hardware, s.twin.model)
    return build_perf_model(hw, model).kv_capacity_tokens(), shared


# ----------------------------------------------------------------- --ramp, --tier --
def _from_twin_value(value: str | None) -> str | None:
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


def _check_ramp_options(ramp: str | None, endpoint: str | None, from_twin: str | None,
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


def _ramp(base: Any, steps_text: str, max_sessions: int, hold_s: float, max_step_s: float,
          tiers: list[dict[str, Any]], from_twin: str | None, compare: bool, ex: Any,
          on_done: Any) -> Any:
    """The ramp (after the twin's search with --from-twin) and, on the twin, the probe
    search it is compared with."""
    from dataclasses import replace

    from simulator.analysis.ramp import parse_steps
    from simulator.analysis.slo import parse_slo
    from simulator.scenario.load import load_scenario
    from simulator.sweep.pipeline import run_profile
    from simulator.sweep.ramp import (
        RampProfile,
        comparison_base,
        ramp_override,
        start_from,
    )
    from simulator.sweep.size import SizeProfile
    s, _ = load_scenario(base.scenario_path, list(base.overrides))
    judged = tuple(parse_slo(x) for x in tiers[0]["slos"])
    goodput = tiers[0].get("goodput")
    compared: list[tuple[str, Any]] = []

    def search(on: Any, name: str) -> None:
        cmp = comparison_base(on, s.load.duration_s is not None)
        if goodput:
            cmp = replace(cmp, overrides=(*cmp.overrides, f"goodput.ttft_s={goodput['ttft_s']}",
                                          f"goodput.output_tok_s={goodput['output_tok_s']}"))
        cap, shared = _kv_facts(cmp)
        # as `size` runs it by default: the search and one repeat with another seed
        compared.append((name, run_profile(SizeProfile(cmp, judged, max_sessions, 1, None,
                                                       cap, shared), ex, on_done)))

    steps = parse_steps(steps_text or f"1*2..{max_sessions}", max_sessions)
    if from_twin is not None:
        twin = replace(base, target=replace(base.target, endpoint_url=None, twin=from_twin),
                       folder=base.folder / "twin")
        search(twin, f"probe search on the twin {from_twin}")
        steps = start_from(compared[0][1].sessions, max_sessions)
    answer = run_profile(RampProfile(base, ramp_override(steps, hold_s, max_step_s, tiers)),
                         ex, on_done)
    if compare and base.target.endpoint_url is None and from_twin is None \
            and not answer.interrupted:
        from simulator.errors import Interrupted
        try:
            search(base, "probe search, same twin")
        except Interrupted as exc:       # the ramp's own answer stands, said so
            answer.compare_interrupted = str(exc)
    answer.compared = compared
    return answer


def _show_ramp(answer: Any, folder: Path, as_json: bool) -> int:
    """size.json (the ramp and the searches compared) and the answer; the exit code
    (130 and no answer line for an interrupted ramp)."""
    from simulator.report.console import format_ramp, format_ramp_cost
    folder.mkdir(parents=True, exist_ok=True)
    data = answer.to_dict()
    (folder / "size.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    tiers = answer.ramp.get("tiers") or []
    if answer.interrupted:
        if as_json:
            click.echo(json.dumps(data, default=str))
        click.echo(f"error: interrupted after {answer.judged} judged step(s): no answer "
                   f"(size.json says interrupted); continue with `endurance run --resume "
                   f"{answer.run_dir}`, which rewrites {folder / 'size.json'}", err=True)
        return 130
    if as_json:
        click.echo(json.dumps(data, default=str))
    else:
        click.echo(format_ramp(answer.ramp, answer.simulated))
        click.echo(format_ramp_cost(data))
        click.echo(answer.run_dir)
        click.echo(str(folder))
    if answer.compare_interrupted:
        click.echo(f"error: the probe search beside the ramp was {answer.compare_interrupted}"
                   " (the ramp ran to its end: its answer stands)", err=True)
        return 130
    return 0 if tiers and tiers[0]["sessions"] > 0 else 1


def _size_per_speed_tier(base: Any, slos: tuple[Any, ...], floors: tuple[float, ...],
                         ttft: float | None, attainment: float, max_sessions: int,
                         repeats: int, ex: Any, on_done: Any, as_json: bool) -> int:
    """`size --tier F …` without a ramp: one probe search per output-speed tier, each
    judging the window's goodput share under its own per-request SLO; a table of
    sessions per tier, per card and per $/h."""
    from simulator.analysis.slo import parse_slo
    from simulator.report.console import format_speed_tiers
    from simulator.sweep.ramp import tier_specs
    rows: list[dict[str, Any]] = []
    for spec in tier_specs(slos, floors, ttft, attainment):
        g = spec["goodput"]
        sub = base.under(f"tier-{g['output_tok_s']:g}",
                         (f"goodput.ttft_s={g['ttft_s']}",
                          f"goodput.output_tok_s={g['output_tok_s']}"))
        result = _size_one(sub, tuple(parse_slo(x) for x in spec["slos"]), max_sessions,
                           repeats, None, ex, on_done)
        price = next((p.summary.get("price_per_hour") for p in result.probes
                      if p.summary.get("price_per_hour")), None)
        rows.append({"tier": spec["name"], **g, "slos": spec["slos"],
                     "price_per_hour": price, **result.to_dict()})
    folder = base.folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "size-tiers.json").write_text(json.dumps({"rows": rows}, indent=2,
                                                       default=str) + "\n")
    if as_json:
        click.echo(json.dumps({"rows": rows}, default=str))
    else:
        click.echo(format_speed_tiers(rows))
        click.echo(str(folder))
    return 0 if any(r["sessions"] > 0 for r in rows) else 1
