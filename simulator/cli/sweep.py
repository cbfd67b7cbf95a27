"""`endurance sweep` and `endurance size`: the scenario at several session counts.

Each point is a normal run (its own results directory under the sweep's folder), so
every figure in the table can be traced back to a `turns.parquet`.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from simulator.cli._app import main
from simulator.cli.run import common_run_options, scenario_overrides
from simulator.errors import InputError, RunError


def _counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--sessions: expected a comma-separated list of integers, got {text!r}") from None
    if not counts or any(n < 1 for n in counts):
        raise InputError(f"--sessions: expected positive session counts, got {text!r}")
    return counts


class _PointRunner:
    """run_point(n) for the sizing library: one full run per session count, through the
    picklable `simulator.sweep.point.run_point` (a parallel executor maps `try_one` instead)."""

    def __init__(self, scenario: str, base: list[str], out: Path, opts: dict[str, Any],
                 verbose: bool) -> None:
        self.scenario, self.base, self.out, self.opts = scenario, base, out, opts
        self.verbose = verbose
        self.run_dirs: dict[int, list[str]] = {}
        # --parallel: points run ahead (see _prefetch), consumed once each, in order
        self.prefetched: dict[tuple[int, int], list[_Outcome]] = {}

    def spec(self, n: int, seed_offset: int = 0) -> Any:
        from simulator.sweep.point import PointSpec
        return PointSpec(self.scenario, tuple(self.base), n, str(self.out), seed_offset,
                         **self.opts)

    def __call__(self, n: int) -> dict[str, Any]:
        return self.seeded(n, 0)

    def seeded(self, n: int, seed_offset: int) -> dict[str, Any]:
        """The point at n sessions with the scenario's seed + seed_offset (repeats):
        run ahead by --parallel, or now."""
        ahead = self.prefetched.get((n, seed_offset))
        res, error, elapsed = ahead.pop(0) if ahead else self.try_one((n, seed_offset))
        if error is not None:
            raise error
        assert res is not None
        self.run_dirs.setdefault(n, []).append(res.run_dir)
        if self.verbose:
            f = res.figures
            steady = "" if f.get("steady_state", True) else \
                f" NOT STEADY ({f.get('steady_state_reason')})"
            window = f.get("aggregate_tok_s")
            window_txt = "no steady-state window" if window is None else \
                f"{window:,.1f} tok/s window aggregate"
            click.echo(f"  {n:>4} sessions: achieved {f.get('achieved_sessions') or 0:,.1f}, "
                       f"{window_txt} "
                       f"({f.get('run_aggregate_tok_s') or 0:,.1f} whole run){steady}, "
                       f"run in {elapsed:.1f} s → {res.run_dir}", err=True)
        figures: dict[str, Any] = res.figures
        return figures

    def try_one(self, key: tuple[int, int]) -> _Outcome:
        """One run at (sessions, seed offset) (picklable: runs in a worker process or a
        Ray task); a failed run comes back as its error, raised where a serial run
        raises it."""
        from simulator.sweep.point import run_point
        n, seed_offset = key
        t = time.monotonic()
        try:
            res = run_point(self.spec(n, seed_offset))
        except (InputError, RunError) as exc:
            return None, exc, time.monotonic() - t
        if res.status == "failed":
            err: Exception = InputError(
                f"the run at {n} sessions failed: {res.reason} ({res.run_dir})") \
                if "auth" in res.reason or "not_found" in res.reason else \
                _RunFailed(f"the run at {n} sessions failed: {res.reason} ({res.run_dir})")
            return None, err, time.monotonic() - t
        return res, None, time.monotonic() - t

    def unused_run_dirs(self) -> list[str]:
        """Runs made ahead (--parallel) that the search did not need."""
        return [r.run_dir for outs in self.prefetched.values() for r, _, _ in outs if r]


_Outcome = tuple[Any, Exception | None, float]     # (PointResult | None, error, seconds)


class _RunFailed(RunError):
    """A point's run failed at run time (exit 1), not a bad argument."""


def _opts(endpoint: str | None, twin: str | None, spec: str | None,
          price_per_hour: float | None, client: str | None,
          reset: bool = False) -> dict[str, Any]:
    return {"endpoint_url": endpoint, "twin": twin, "spec": spec,
            "price_per_hour": price_per_hour, "client": client, "reset_prefix_cache": reset}


def cold_cache_option(f: Any) -> Any:
    """`--reset-prefix-cache`: every point starts from a cold server cache (as `run`'s)."""
    return click.option("--reset-prefix-cache", is_flag=True, help="With --endpoint: POST "
                        "/reset_prefix_cache before each point, so no point reads the "
                        "previous one's cache (serial points only).")(f)


def _check_reset(reset: bool, endpoint: str | None, parallel: int, executor: str) -> None:
    if not reset:
        return
    if endpoint is None:
        raise InputError("--reset-prefix-cache needs --endpoint (the in-process twin "
                         "starts cold every point)")
    if parallel > 1 or executor != "local":
        raise InputError("--reset-prefix-cache with --parallel/--executor: points running "
                         "at once share the server's cache; run them serially")


_TIERS_OPTION = click.option(
    "--kv-offload-gib", default=None, metavar="GIB[,GIB…]",
    help="Twin: host KV tier sizes, e.g. 0,64,256: the search/sweep once per size, "
    "one table (docs/kv-tiers.md).")


def parallel_options(f: Any) -> Any:
    f = click.option("--ray-address", metavar="ADDR",
                     help="Ray cluster for --executor ray (default $RAY_ADDRESS, else local).")(f)
    f = click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
                     show_default=True, help="Where --parallel points run: local "
                     "processes or Ray tasks (needs `pip install 'endurance[ray]'`).")(f)
    return click.option("--parallel", type=click.IntRange(min=1), default=1, show_default=True,
                        help="Independent points run at once (results identical to serial).")(f)


@main.command(name="sweep")
@click.argument("scenario", type=click.Path(dir_okay=False))
@common_run_options
@click.option("--sessions", "sessions_list", default=None,
              help="Comma-separated session counts  [default: 1,2,4,8,16,32; with a "
              "--set list, the scenario's sessions].")
@click.option("--json", "as_json", is_flag=True, help="Print only a JSON list (one object per count).")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --set KEY=a,b,c: runs per value, seeds +0 … +R−1 (recall pooled).")
@parallel_options
@cold_cache_option
@_TIERS_OPTION
@click.option("--copy", "copy_levels", default=None, metavar="SHARE[,SHARE…]",
              help="Copy shares of the code-edit replies, e.g. 0,0.25,0.5,1: each --spec "
              "setting (default off,ngram:24) at each share and session count, --repeats "
              "seeds; prints where speculation starts to pay (docs/twin-fidelity.md).")
def sweep_command(scenario: str, endpoint: str | None, twin: str | None, spec: str | None,
                  model: str | None, turns: int | None, sets: tuple[str, ...], seed: int | None,
                  price_per_hour: float | None, client: str | None, out: Path,
                  sessions_list: str | None, as_json: bool, repeats: int = 1, parallel: int = 1,
                  executor: str = "local", ray_address: str | None = None,
                  reset_prefix_cache: bool = False, kv_offload_gib: str | None = None,
                  copy_levels: str | None = None) -> None:
    """Run SCENARIO at each session count; one row per count, plus a plot.

    With `--set KEY=a,b,c` (e.g. compaction.kind=none,prune,block,summarize,
    clear_tool_results): one row per value instead — speed beside recall — and the
    speed–recall frontier plot."""
    from simulator.analysis.policy_sweep import split_listed_set
    from simulator.analysis.render import write_sweep_plot
    from simulator.analysis.sizing import format_sweep_table, sweep
    _check_reset(reset_prefix_cache, endpoint, parallel, executor)
    folder = out / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    listed = split_listed_set(sets)
    if copy_levels is not None and (listed is not None or kv_offload_gib is not None):
        raise InputError("--copy sweeps copy shares × --spec settings × --sessions; it "
                         "does not combine with a --set list or --kv-offload-gib")
    if listed is not None:
        from simulator.cli.setting_sweep import setting_sweep
        setting_sweep(scenario, listed[:2], scenario_overrides(None, turns, seed, model,
                                                                  tuple(listed[2])),
                      folder, _opts(endpoint, twin, spec, price_per_hour, client, reset_prefix_cache),
                      sessions_list, repeats, as_json, (parallel, executor, ray_address),
                      _save_and_show)
        return
    if copy_levels is not None:              # --copy 0,0.5,1: where speculation pays
        from simulator.cli.copy_sweep import copy_sweep
        copy_sweep(scenario, copy_levels, spec, scenario_overrides(None, turns, seed, model, sets),
                   folder, _opts(endpoint, twin, None, price_per_hour, client, reset_prefix_cache),
                   _counts(sessions_list or "1,8"), repeats, as_json,
                   (parallel, executor, ray_address), _save_and_show)
        return
    if repeats != 1:
        raise InputError("--repeats: a session-count sweep runs one seed per count (use "
                         "`size --repeats`, or sweep a --set list or --copy levels)")
    counts = _counts(sessions_list or "1,2,4,8,16,32")
    if kv_offload_gib is not None:           # one sweep per host KV tier size
        from simulator.analysis.tier_sizing import parse_tiers
        from simulator.cli.tier_sweep import sweep_per_tier

        def run_tier(extra: tuple[str, ...], sub: Path) -> list[dict[str, Any]]:
            p = _PointRunner(scenario, scenario_overrides(None, turns, seed, model,
                                                          (*sets, *extra)), sub,
                             _opts(endpoint, twin, spec, price_per_hour, client, reset_prefix_cache),
                             not as_json)
            _prefetch(p, counts, parallel, executor, ray_address)
            return [{**r, "run_dirs": p.run_dirs.get(r["sessions"], [])}
                    for r in sweep(p, counts)]
        sweep_per_tier(parse_tiers(kv_offload_gib), run_tier, folder, as_json)
        return
    if spec is not None and "," in spec:     # --spec off,ngram:5,…: one sweep per setting
        _spec_sweep(scenario, scenario_overrides(None, turns, seed, model, sets), folder,
                    _opts(endpoint, twin, None, price_per_hour, client, reset_prefix_cache),
                    spec, counts,
                    as_json, (parallel, executor, ray_address))
        return
    from simulator.cli.fleet_size import replicas_sweep  # --replicas 1,2,4 (docs/fleet.md)
    if replicas_sweep(scenario, scenario_overrides(None, turns, seed, model, sets), folder,
                      _opts(endpoint, twin, spec, price_per_hour, client, reset_prefix_cache), counts,
                      as_json):
        return
    point = _PointRunner(scenario, scenario_overrides(None, turns, seed, model, sets), folder,
                         _opts(endpoint, twin, spec, price_per_hour, client, reset_prefix_cache),
                         not as_json)
    _prefetch(point, counts, parallel, executor, ray_address)
    rows = sweep(point, counts)
    for r in rows:
        r["run_dirs"] = point.run_dirs.get(r["sessions"], [])
    _save_and_show(rows, folder, "sweep", write_sweep_plot, format_sweep_table, as_json)


def _save_and_show(rows: list[dict[str, Any]], folder: Path, name: str,
                   write_plot: Callable[[list[dict[str, Any]], Path], Path],
                   table: Callable[[list[dict[str, Any]]], str], as_json: bool) -> None:
    """`<name>.json` and `<name>.png` in the sweep's folder; then the JSON alone, or the
    table, the plot's path and the folder (its last line, as `run` prints its run)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")
    plot = write_plot(rows, folder / f"{name}.png")
    if as_json:
        click.echo(json.dumps(rows))
        return
    from simulator.analysis.target import target_of_runs
    target = target_of_runs(d for r in rows for d in r.get("run_dirs") or [])
    click.echo(table(rows))
    if target is not None:
        click.echo(f"swept: {target}")
    click.echo(f"plot: {plot}")
    click.echo(str(folder))


def _spec_sweep(scenario: str, base: list[str], folder: Path, opts: dict[str, Any],
                spec_text: str, counts: list[int], as_json: bool,
                par: tuple[int, str, str | None] = (1, "local", None)) -> None:
    """The sweep once per speculation setting; one table and one plot
    (`simulator.analysis.spec_sweep`)."""
    from simulator.analysis.spec_sweep import (
        format_spec_table,
        run_spec_sweep,
        spec_list,
        write_spec_plot,
    )
    specs = spec_list(spec_text)
    runners = {s: _PointRunner(scenario, base, folder / s.replace(":", "-"),
                               {**opts, "spec": s}, not as_json) for s in specs}
    for runner in runners.values():
        _prefetch(runner, counts, *par)
    rows = run_spec_sweep(lambda s, n: runners[s](n), specs, counts)
    for r in rows:
        r["run_dirs"] = runners[r["spec"]].run_dirs.get(r["sessions"], [])
    _save_and_show(rows, folder, "spec-sweep", write_spec_plot, format_spec_table, as_json)


@main.command(name="size")
@click.argument("scenario", type=click.Path(dir_okay=False))
@common_run_options
@click.option("--slo", "slos", multiple=True, required=True,
              help='An SLO such as "per_session_tok_s>=50" or "ttft_p95_s<=5" (repeatable).')
@click.option("--max-sessions", type=int, default=64, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print only JSON.")
@click.option("--repeats", type=int, default=1, show_default=True,
              help="Searches repeated with seeds +1 … +R from the answer: the answer's range.")
@click.option("--team", "team", type=click.IntRange(min=1), default=None, metavar="M",
              help="Sessions a team runs at once: print how many cards (replicas) it needs.")
@parallel_options
@cold_cache_option
@_TIERS_OPTION
def size_command(scenario: str, endpoint: str | None, twin: str | None, spec: str | None,
                 model: str | None, turns: int | None, sets: tuple[str, ...], seed: int | None,
                 price_per_hour: float | None, client: str | None, out: Path,
                 slos: tuple[str, ...], max_sessions: int, as_json: bool,
                 repeats: int = 1, team: int | None = None, parallel: int = 1,
                 executor: str = "local", ray_address: str | None = None,
                 reset_prefix_cache: bool = False, kv_offload_gib: str | None = None) -> None:
    """Largest session count that meets every SLO at steady state (geometric probe,
    bisection, then --repeats searches with other seeds giving a range).

    Exit code 0 when some count meets every SLO, 1 when not even one session does
    (the JSON and size.json are written either way)."""
    from simulator.analysis.sizing import format_sizing, parse_slo, size
    from simulator.analysis.target import target_of_runs
    parsed = [parse_slo(s) for s in slos]
    _check_reset(reset_prefix_cache, endpoint, parallel, executor)
    folder = out / f"size-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    if kv_offload_gib is not None:           # one search per host KV tier size
        from simulator.analysis.tier_sizing import parse_tiers
        from simulator.cli.tier_sweep import size_per_tier

        def run_tier(extra: tuple[str, ...], sub: Path) -> Any:
            p = _PointRunner(scenario, scenario_overrides(None, turns, seed, model,
                                                          (*sets, *extra)), sub,
                             _opts(endpoint, twin, spec, price_per_hour, client, reset_prefix_cache),
                             not as_json)
            cap, shr = _kv_facts(scenario, p.base, endpoint, twin)
            if max_sessions >= 1:
                _prefetch_size(p, parsed, max_sessions, parallel, executor, ray_address)
            return size(p, parsed, max_sessions, kv_capacity_tokens=cap,
                        shared_prefix_tokens=shr, repeats=repeats, run_seeded=p.seeded,
                        team_sessions=team)
        sys.exit(size_per_tier(parse_tiers(kv_offload_gib), run_tier, sets, folder, as_json))
    point = _PointRunner(scenario, scenario_overrides(None, turns, seed, model, sets), folder,
                         _opts(endpoint, twin, spec, price_per_hour, client, reset_prefix_cache),
                         not as_json)
    kv_cap, shared = _kv_facts(scenario, point.base, endpoint, twin)
    if max_sessions >= 1:
        _prefetch_size(point, parsed, max_sessions, parallel, executor, ray_address)
    result = size(point, parsed, max_sessions, kv_capacity_tokens=kv_cap,
                  shared_prefix_tokens=shared, repeats=repeats, run_seeded=point.seeded,
                  team_sessions=team)
    folder.mkdir(parents=True, exist_ok=True)
    data = result.to_dict()
    data["run_dirs"] = point.run_dirs
    data["target"] = target_of_runs(d for ds in point.run_dirs.values() for d in ds)
    from simulator.cli.fleet_size import fleet_team  # --team with --router (docs/fleet.md)
    fleet = fleet_team(scenario, point.base, folder, point.opts, parsed, team, result,
                       not as_json)
    if point.unused_run_dirs():
        data["unused_run_dirs"] = point.unused_run_dirs()
    (folder / "size.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    if fleet is not None:
        data["fleet"] = fleet.to_dict()
    if as_json:
        click.echo(json.dumps(data, default=str))
    else:
        click.echo(format_sizing(result, data["target"]))
        if fleet is not None:
            from simulator.analysis.fleet_sizing import format_fleet_sizing
            click.echo(format_fleet_sizing(fleet))
        click.echo(str(folder))
    sys.exit(0 if result.sessions > 0 else 1)


def _kv_facts(scenario: str, overrides: list[str], endpoint: str | None,
              twin: str | None) -> tuple[int | None, int]:
    """(KV capacity in tokens from the twin profile, shared prefix tokens)."""
    from simulator.scenario.load import load_scenario
    from simulator.session.prefix import build_base_prefix
    from simulator.twin.model.profiles import parse_twin
    s, _ = load_scenario(scenario, overrides)
    shared = build_base_prefix(s).tokens_est if s.cache_bust == "none" else 0
    if endpoint is not None:
        return None, shared      # a real vLLM reports it via vllm:cache_config_info
    from simulator.twin.model.perf_model import build_perf_model
    hw, model = parse_twin(twin) if twin else (s.twin.hardware, s.twin.model)
    return build_perf_model(hw, model).kv_capacity_tokens(), shared


# ------------------------------------------------------------ --parallel (issue 19) --
# Points are run ahead, K at a time, through `simulator.sweep.fanout.map_points`, and the
# serial search then consumes them in its own order (`_PointRunner.prefetched`), so its
# answer is the serial one.
def _prefetch(point: _PointRunner, counts: list[int], parallel: int, executor: str,
              ray_address: str | None) -> None:
    """Run `counts` ahead, K at a time (nothing to do serially on this machine)."""
    from simulator.sweep.fanout import map_points
    if parallel == 1 and executor == "local":
        return
    keys = [(n, 0) for n in counts]
    outcomes = map_points(point.try_one, keys, parallel, executor, ray_address=ray_address,
                          cost=lambda k: float(k[0]))   # the most sessions first
    for key, outcome in zip(keys, outcomes, strict=True):
        point.prefetched.setdefault(key, []).append(outcome)


def _prefetch_size(point: _PointRunner, slos: list[Any], max_sessions: int, parallel: int,
                   executor: str, ray_address: str | None) -> None:
    """Run ahead, K per round, the probes `size` will ask for: the sizing search itself
    (`analysis.sizing.SizeSearch`) says which counts come next."""
    from simulator.analysis.sizing import SizeSearch, failures
    if parallel == 1 and executor == "local":
        return
    search = SizeSearch(max_sessions)
    while counts := search.next_counts(parallel):
        _prefetch(point, counts, parallel, executor, ray_address)
        for n in counts:
            res, error, _ = point.prefetched[(n, 0)][-1]
            search.passed[n] = error is None and res is not None \
                and not failures(res.figures, slos)
