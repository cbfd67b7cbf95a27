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
    picklable `simulator.points.run_point` (a parallel executor maps `try_one` instead)."""

    def __init__(self, scenario: str, base: list[str], out: Path, opts: dict[str, Any],
                 verbose: bool) -> None:
        self.scenario, self.base, self.out, self.opts = scenario, base, out, opts
        self.verbose = verbose
        self.run_dirs: dict[int, list[str]] = {}
        # --parallel: points run ahead (see _prefetch), consumed once each, in order
        self.prefetched: dict[tuple[int, int], list[_Outcome]] = {}

    def spec(self, n: int, seed_offset: int = 0) -> Any:
        from simulator.points import PointSpec
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
        from simulator.points import run_point
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
          price_per_hour: float | None, client: str | None) -> dict[str, Any]:
    return {"endpoint_url": endpoint, "twin": twin, "spec": spec,
            "price_per_hour": price_per_hour, "client": client}


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
def sweep_command(scenario: str, endpoint: str | None, twin: str | None, spec: str | None,
                  model: str | None, turns: int | None, sets: tuple[str, ...], seed: int | None,
                  price_per_hour: float | None, client: str | None, out: Path,
                  sessions_list: str | None, as_json: bool, repeats: int = 1, parallel: int = 1,
                  executor: str = "local", ray_address: str | None = None) -> None:
    """Run SCENARIO at each session count; one row per count, plus a plot.

    With `--set KEY=a,b,c` (e.g. compaction.kind=none,prune,block,summarize,
    clear_tool_results): one row per value instead — speed beside recall — and the
    speed–recall frontier plot."""
    from simulator.analysis.policy_sweep import split_listed_set
    from simulator.analysis.render import write_sweep_plot
    from simulator.analysis.sizing import format_sweep_table, sweep
    folder = out / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    listed = split_listed_set(sets)
    if listed is not None:
        from simulator.cli.setting_sweep import setting_sweep
        setting_sweep(scenario, listed[:2], scenario_overrides(None, turns, seed, model,
                                                                  tuple(listed[2])),
                      folder, _opts(endpoint, twin, spec, price_per_hour, client),
                      sessions_list, repeats, as_json, (parallel, executor, ray_address),
                      _save_and_show)
        return
    if repeats != 1:
        raise InputError("--repeats: a session-count sweep runs one seed per count (use "
                         "`size --repeats`, or sweep a --set list)")
    counts = _counts(sessions_list or "1,2,4,8,16,32")
    if spec is not None and "," in spec:     # --spec off,ngram:5,…: one sweep per setting
        _spec_sweep(scenario, scenario_overrides(None, turns, seed, model, sets), folder,
                    _opts(endpoint, twin, None, price_per_hour, client), spec, counts,
                    as_json, (parallel, executor, ray_address))
        return
    point = _PointRunner(scenario, scenario_overrides(None, turns, seed, model, sets), folder,
                         _opts(endpoint, twin, spec, price_per_hour, client), not as_json)
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
    click.echo(table(rows))
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
def size_command(scenario: str, endpoint: str | None, twin: str | None, spec: str | None,
                 model: str | None, turns: int | None, sets: tuple[str, ...], seed: int | None,
                 price_per_hour: float | None, client: str | None, out: Path,
                 slos: tuple[str, ...], max_sessions: int, as_json: bool,
                 repeats: int = 1, team: int | None = None, parallel: int = 1,
                 executor: str = "local", ray_address: str | None = None) -> None:
    """Largest session count that meets every SLO at steady state (geometric probe,
    bisection, then --repeats searches with other seeds giving a range).

    Exit code 0 when some count meets every SLO, 1 when not even one session does
    (the JSON and size.json are written either way)."""
    from simulator.analysis.sizing import format_sizing, parse_slo, size
    parsed = [parse_slo(s) for s in slos]
    folder = out / f"size-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    point = _PointRunner(scenario, scenario_overrides(None, turns, seed, model, sets), folder,
                         _opts(endpoint, twin, spec, price_per_hour, client), not as_json)
    kv_cap, shared = _kv_facts(scenario, point.base, endpoint, twin)
    if max_sessions >= 1:
        _prefetch_size(point, parsed, max_sessions, parallel, executor, ray_address)
    result = size(point, parsed, max_sessions, kv_capacity_tokens=kv_cap,
                  shared_prefix_tokens=shared, repeats=repeats, run_seeded=point.seeded,
                  team_sessions=team)
    folder.mkdir(parents=True, exist_ok=True)
    data = result.to_dict()
    data["run_dirs"] = point.run_dirs
    if point.unused_run_dirs():
        data["unused_run_dirs"] = point.unused_run_dirs()
    (folder / "size.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    if as_json:
        click.echo(json.dumps(data, default=str))
    else:
        click.echo(format_sizing(result))
        click.echo(str(folder))
    sys.exit(0 if result.sessions > 0 else 1)


def _kv_facts(scenario: str, overrides: list[str], endpoint: str | None,
              twin: str | None) -> tuple[int | None, int]:
    """(KV capacity in tokens from the twin profile, shared prefix tokens)."""
    from simulator.runs import parse_twin
    from simulator.scenario.load import load_scenario
    from simulator.session.prefix import build_base_prefix
    s, _ = load_scenario(scenario, overrides)
    shared = build_base_prefix(s).tokens_est if s.cache_bust == "none" else 0
    if endpoint is not None:
        return None, shared      # a real vLLM reports it via vllm:cache_config_info
    from simulator.twin.perf_model import build_perf_model
    hw, model = parse_twin(twin) if twin else (s.twin.hardware, s.twin.model)
    return build_perf_model(hw, model).kv_capacity_tokens(), shared


# ------------------------------------------------------------ --parallel (issue 19) --
# Points are run ahead, K at a time, through `simulator.parallel.map_points`, and the
# serial search then consumes them in its own order (`_PointRunner.prefetched`), so its
# answer is the serial one.
def _prefetch(point: _PointRunner, counts: list[int], parallel: int, executor: str,
              ray_address: str | None) -> None:
    """Run `counts` ahead, K at a time (nothing to do serially on this machine)."""
    from simulator.parallel import map_points
    if parallel == 1 and executor == "local":
        return
    keys = [(n, 0) for n in counts]
    outcomes = map_points(point.try_one, keys, parallel, executor, ray_address=ray_address,
                          cost=lambda k: float(k[0]))   # the most sessions first
    for key, outcome in zip(keys, outcomes, strict=True):
        point.prefetched.setdefault(key, []).append(outcome)


def _prefetch_size(point: _PointRunner, slos: list[Any], max_sessions: int, parallel: int,
                   executor: str, ray_address: str | None) -> None:
    """The probes `size` will ask for, K per round: its geometric probes in chunks of K
    (stopping at the first failure), then the next levels of its bisection tree."""
    from simulator.analysis.sizing import probe_counts
    from simulator.parallel import bisection_frontier
    if parallel == 1 and executor == "local":
        return
    passed: dict[int, bool] = {}

    def run(ns: list[int]) -> None:
        ns = [n for n in ns if n not in passed]
        _prefetch(point, ns, parallel, executor, ray_address)
        for n in ns:
            res, error, _ = point.prefetched[(n, 0)][-1]
            passed[n] = error is None and res is not None \
                and res.figures.get("steady_state") is not False \
                and all(slo.check(res.figures) for slo in slos)

    counts, lo, hi = probe_counts(max_sessions), 0, None
    for i in range(0, len(counts), parallel):
        run(counts[i:i + parallel])
        for n in counts[i:i + parallel]:
            if not passed[n]:
                hi = n
                break
            lo = n
        if hi is not None:
            break
    while hi is not None and hi - lo > 1:
        run(bisection_frontier(lo, hi, parallel))
        while hi - lo > 1 and (lo + hi) // 2 in passed:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if passed[mid] else (lo, mid)
