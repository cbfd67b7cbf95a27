"""`endurance run` and `endurance validate`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from simulator.cli._app import main
from simulator.cli.bench_options import bench_options, bench_overrides
from simulator.scenario.load import load_scenario

if TYPE_CHECKING:
    from simulator.run.execute import Drive
    from simulator.scenario.model import StepRamp


def scenario_overrides(sessions: int | None, turns: int | None, seed: int | None,
                       model: str | None, sets: tuple[str, ...]) -> list[str]:
    """The dedicated flags are sugar for `--set`; `--set` comes last and wins."""
    out = []
    if sessions is not None:
        out.append(f"sessions={sessions}")
    if turns is not None:
        out.append(f"turns={turns}")
    if seed is not None:
        out.append(f"seed={seed}")
    if model is not None:
        out.append(f"model={model}")
    ctx = click.get_current_context(silent=True)
    api = ctx.meta.get(_API_KEY) if ctx is not None else None
    if api is not None:
        out.append(f"endpoint.api={api}")
    from simulator.cli.fleet_options import fleet_overrides
    from simulator.cli.load_options import load_overrides
    from simulator.cli.twin_options import twin_overrides
    return [*out, *twin_overrides(), *load_overrides(), *fleet_overrides(), *sets]


def ramp_hold_options(f: click.decorators.FC) -> click.decorators.FC:
    """`--hold` and `--max-step`: how long a ramp holds each step (run and size)."""
    f = click.option("--max-step", "max_step", default="30m", show_default=True,
                     metavar="TIME",
                     help="--ramp: a step with no window of --hold by then is not steady.")(f)
    return click.option("--hold", "hold", default="3m", show_default=True, metavar="TIME",
                        help="--ramp: each step's steady-state window (90s, 3m).")(f)


def check_ramp_flags(ramp: str | None, sessions: int | None, sets: tuple[str, ...]) -> None:
    """Options a ramp makes meaningless (or needs), refused in one line, not dropped."""
    from simulator.cli.load_options import load_overrides
    from simulator.errors import InputError
    ctx = click.get_current_context()
    if ramp is None:
        for name, flag in (("hold", "--hold"), ("max_step", "--max-step")):
            if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT):
                raise InputError(f"{flag} is how long a --ramp holds its steps; give --ramp "
                                 f"(or drop {flag})")
        return
    if sessions is not None:
        raise InputError("--sessions with --ramp: the ramp's steps set the session count "
                         "(e.g. --ramp 1,2,7)")
    if any(o.split("=", 1)[0].strip() in ("load.duration_s", "load.ramp")
           for o in (*load_overrides(), *sets)):
        raise InputError("--ramp with --duration (or --set load.duration_s/load.ramp): the "
                         "ramp ends when its steps are judged, each held --hold; drop one")


def finite(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A number option's NaN passes click's range check (no comparison holds); refused
    here under the option's own name."""
    import math
    for v in value if isinstance(value, tuple) else (value,):
        if isinstance(v, float) and not math.isfinite(v):
            raise click.BadParameter(f"{v}: not a finite number", ctx, param)
    return value


def at_least_one(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """`--sessions 0` is refused by the flag's name, not as the `--set` it becomes."""
    if value is not None and value < 1:
        raise click.BadParameter(f"{value}: must be at least 1")
    return value


# `--api` is kept in the click context (not a parameter of every command that takes the
# run options) and turned into the `endpoint.api=` override by `scenario_overrides`.
_API_KEY = "endurance.api"


def _remember_api(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[_API_KEY] = value


def common_run_options(f: click.decorators.FC) -> click.decorators.FC:
    """Options shared by run, sweep and size."""
    from simulator.cli.fleet_options import endpoint_option, fleet_options
    opts = [
        endpoint_option(),
        click.option("--twin", "twin", metavar="HARDWARE/MODEL",
                     help="Twin profile (default from the scenario, e.g. a40/qwen3-coder-30b-a3b-awq)."),
        click.option("--spec", metavar="off|ngram:K|draft:K|mtp:K[@N]",
                     help="Twin speculative decoding (draft/mtp need a drafter in the "
                     "model profile); @N drafts only while the batch holds at most N "
                     "requests."),
        click.option("--model", metavar="NAME", help="Model name sent in requests."),
        click.option("--turns", type=int, callback=at_least_one, help="Turns per session."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="Override any scenario field, e.g. compaction.kind=prune."),
        click.option("--seed", type=int, help="Random seed."),
        click.option("--price-per-hour", type=float, help="$/hour of the serving card "
                     "(default: the twin hardware's rental price)."),
        click.option("--client", type=click.Choice(["lean", "aiohttp", "sdk"]),
                     help="HTTP client path: lean (hand-written HTTP/1.1, the default), "
                     "aiohttp, or the official anthropic SDK."),
        click.option("--out", "out", type=click.Path(path_type=Path),
                     default=Path("results"), show_default=True, help="Results directory."),
        click.option("--api", type=click.Choice(["anthropic", "openai-chat"]),
                     expose_value=False, callback=_remember_api, is_eager=True,
                     help="Wire protocol of --endpoint: anthropic (Messages, /v1/messages, "
                     "the default) or openai-chat (/v1/chat/completions); same as "
                     "--set endpoint.api=…"),
    ]
    from simulator.cli.load_options import load_shape_options
    from simulator.cli.twin_options import twin_engine_options
    opts += twin_engine_options() + load_shape_options() + fleet_options()
    for opt in reversed(opts):
        f = opt(f)
    return f


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False), required=False)
@common_run_options
@bench_options
@click.option("--sessions", type=int, callback=at_least_one, help="Concurrent sessions.")
@click.option("--label", help="A label for this run (shown in reports).")
@click.option("--quiet", is_flag=True, help="No progress display (same as --progress off).")
@click.option("--progress", "progress", type=click.Choice(["auto", "dashboard", "bar", "plain",
                                                           "off"]),
              default="auto", show_default=True,
              help="While it runs: a live dashboard (on a terminal; elsewhere a status line), "
              "the turns progress bar, a plain status line every --progress-every seconds, "
              "or nothing. auto: the dashboard on a terminal, plain lines otherwise.")
@click.option("--progress-every", "progress_every", type=click.FloatRange(min=0.1, max=86400),
              default=30.0, show_default=True, metavar="S",
              help="Seconds between plain status lines (no terminal, or --progress plain).")
@click.option("--metrics-port", "metrics_port", metavar="[HOST:]PORT", default=None,
              help="Serve the run's own Prometheus metrics (endurance:…) on "
              "http://HOST:PORT/metrics (HOST defaults to 127.0.0.1; 0.0.0.0 for a "
              "Prometheus on another machine; PORT 0: any free port, printed).")
@click.option("--metrics-hold", "metrics_hold", type=click.FloatRange(min=0, max=86400),
              default=0.0, show_default=True, metavar="S",
              help="Keep --metrics-port up S seconds after the run (a last scrape sees the "
              "final counters); Ctrl-C ends the wait.")
@click.option("--scrape", "scrape", multiple=True, metavar="URL",
              help="An extra Prometheus target scraped beside the server's own /metrics, "
              "e.g. NVIDIA's DCGM exporter (http://gpu-node:9400/metrics): with GPU power "
              "the summary adds energy per 1M output tokens and sessions per kW. Repeatable.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes to shard sessions over (HTTP endpoints only).")
@click.option("--resume", "resume", type=click.Path(file_okay=False, path_type=Path),
              metavar="RUN_DIR", help="Continue an interrupted (or killed) run in RUN_DIR, "
              "appending to its results; the scenario comes from its manifest.")
@click.option("--stop-grace-s", type=click.FloatRange(min=0, max=3600), default=None,
              help="On Ctrl-C/SIGTERM: wall seconds in-flight requests may finish before they "
              "are cancelled (default 10, at most 3600).")
@click.option("--api-key-file", type=click.Path(dir_okay=False), default=None,
              help="Read the endpoint's API key from the first line of this file "
              "(default: the variable the scenario names, $ANTHROPIC_API_KEY).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
              show_default=True, help="Where --workers shards run: local processes, or "
              "Ray tasks on a cluster (needs `pip install 'endurance[ray]'`).")
@click.option("--ray-address", metavar="ADDR", help="Ray cluster to join (e.g. "
              "ray://head:10001 or auto); default: $RAY_ADDRESS, else a local Ray.")
@click.option("--ray-shared-fs", is_flag=True, help="Every Ray node sees the results "
              "directory at the same path: shards journal there, nothing is shipped.")
@click.option("--ramp", "ramp", default=None, metavar="STEPS",
              help="A stepped ramp in one run: STEPS 1,2,4,8 | START*FACTOR..MAX | "
              "START+STEP..MAX sessions, each step held until its own steady-state window "
              "reaches --hold (docs/sizing.md).")
@ramp_hold_options
@click.option("--reset-prefix-cache", is_flag=True, help="With --endpoint: POST "
              "/reset_prefix_cache first, so the run starts from a cold cache (the HTTP "
              "twin serves it; vLLM with VLLM_SERVER_DEV_MODE=1).")
def run(scenario: str | None, endpoint: str | None, twin: str | None, spec: str | None,
        model: str | None, turns: int | None, sets: tuple[str, ...], seed: int | None,
        price_per_hour: float | None, client: str | None, out: Path, sessions: int | None,
        label: str | None, quiet: bool, workers: int, resume: Path | None, *,
        stop_grace_s: float | None, api_key_file: str | None, executor: str = "local",
        ray_address: str | None = None, ray_shared_fs: bool = False,
        reset_prefix_cache: bool = False, ramp: str | None = None, hold: str = "3m",
        max_step: str = "30m", progress: str = "auto", progress_every: float = 30.0,
        metrics_port: str | None = None, metrics_hold: float = 0.0,
        scrape: tuple[str, ...] = (), bench: str | None = None,
        concurrency: int | None = None, requests: int | None = None,
        request_rate: float | None = None, num_warmups: int | None = None,
        prefix_share: float | None = None, lengths: str | None = None) -> None:
    """Run SCENARIO and write results/<run-id>/ (the last line printed is its path).

    Exit codes: 0 completed, 1 failed (or endpoint unreachable / rejecting us),
    2 bad input, 130 interrupted (Ctrl-C/SIGTERM; resume with --resume RUN_DIR).
    """
    from simulator.analysis.replay_fidelity import team_spec
    from simulator.errors import InputError
    from simulator.run.execute import execute
    from simulator.run.spec import RunSpec

    benched = bench_overrides(bench, concurrency, requests, request_rate, num_warmups,
                              prefix_share, lengths)
    if benched:
        check_bench_flags(sessions, turns, ramp, resume)
        if scenario is None:
            from simulator.scenario.bench import BUNDLED
            scenario = str(BUNDLED)
    if (scenario is None) == (resume is None):
        raise InputError("run: give a SCENARIO file, or --resume RUN_DIR (not both)")
    check_ramp_flags(ramp, sessions, sets)
    if metrics_port is not None:      # a typo is refused before any results directory
        from simulator.live.exporter import parse_bind
        try:
            parse_bind(metrics_port)
        except ValueError as exc:
            raise InputError(str(exc)) from None
    plan = _step_ramp(ramp, hold, max_step, workers, executor) if ramp is not None else None
    rs = RunSpec(scenario or "", scenario_overrides(sessions, turns, seed, model,
                                                    (*benched, *sets)),
                 endpoint_url=endpoint, twin=twin, spec=spec, out_dir=out, label=label,
                 price_per_hour=price_per_hour, client=client, show_progress=not quiet,
                 stop_grace_s=stop_grace_s, resume_dir=resume,
                 api_key_file=api_key_file, endpoint_urls=_urls(),
                 progress="off" if quiet else progress, progress_every_s=progress_every,
                 metrics_port=metrics_port, metrics_hold_s=metrics_hold,
                 scrape_urls=_scrape_urls(scrape, endpoint, resume), ramp=plan)
    drive = drive_for(workers, executor, ray_address, ray_shared_fs)
    if reset_prefix_cache:
        if endpoint is None:
            raise InputError("--reset-prefix-cache needs --endpoint (the in-process twin "
                             "starts cold every run)")
        from simulator.endpoints.http.cache_reset import reset_prefix_cache as reset
        click.echo(reset(endpoint), err=True)
    result = execute(rs, echo=click.echo, drive=drive)
    if not quiet and team_spec(result.manifest) is not None:
        # a team replay: its fidelity and profile (only it reads its turns back, and
        # only it pays for the report module's imports)
        from simulator.report.team_html import team_run_text
        if (team := team_run_text(result.run_dir)) is not None:
            click.echo(team)
    if resume is not None:
        from simulator.sweep.step_ramp import refresh_size_answer
        if (size_json := refresh_size_answer(result.run_dir, result.summary,
                                             result.status)) is not None:
            click.echo(f"ramp answer rewritten: {size_json}", err=True)
    click.echo(str(result.run_dir))
    sys.exit({"completed": 0, "interrupted": 130}.get(result.status, 1))


def check_bench_flags(sessions: int | None, turns: int | None, ramp: str | None,
                      resume: Path | None) -> None:
    """Options a --bench run sets itself (or cannot take), refused in one line."""
    from simulator.cli.load_options import load_overrides
    from simulator.errors import InputError
    for flag, value in (("--sessions", sessions), ("--turns", turns), ("--ramp", ramp),
                        ("--resume", resume)):
        if value is not None:
            raise InputError(f"{flag} with --bench: the bench sets its own requests "
                             "(--requests, --concurrency); drop " + flag)
    for item in load_overrides():
        key = item.split("=", 1)[0]
        if key == "load.warmup_s":
            raise InputError("--warmup is a steady-state window's start (TIME); a bench's "
                             "warm-up requests are --num-warmups N")
        if key == "load.duration_s":
            raise InputError("--duration with --bench: N requests end a bench; drop --duration")


def _step_ramp(steps: str, hold: str, max_step: str, workers: int,
               executor: str) -> StepRamp:
    """`--ramp STEPS`: a plain stepped ramp (no SLOs), the run's `load.ramp`."""
    from simulator.analysis.ramp import parse_steps, ramp_hold_s
    from simulator.errors import InputError
    from simulator.sweep.step_ramp import step_ramp
    if workers > 1 or executor != "local":
        raise InputError("--ramp runs in one process (its controller reads every row as it "
                         "is written); drop --workers/--executor")
    hold_s, max_s = ramp_hold_s(hold, max_step)
    return step_ramp(parse_steps(steps), hold_s, max_s, [])


def _scrape_urls(urls: tuple[str, ...], endpoint: str | None,
                 resume: Path | None) -> tuple[str, ...]:
    """`--scrape` URLs, checked; refused for the in-process twin (no GPU to measure)."""
    from simulator.errors import InputError
    from simulator.util.redact import check_endpoint_url
    if urls and endpoint is None and resume is None:
        raise InputError("--scrape needs --endpoint: the in-process twin runs on no GPU "
                         "whose power could be measured")
    for url in urls:
        try:
            check_endpoint_url(url, "--scrape")
        except ValueError as exc:
            raise InputError(str(exc)) from None
    return tuple(urls)


def _urls() -> tuple[str, ...]:
    from simulator.cli.fleet_options import endpoint_urls
    urls = endpoint_urls()
    return urls if len(urls) > 1 else ()


def drive_for(workers: int, executor: str, ray_address: str | None,
              shared_fs: bool) -> Drive:
    """Where the sessions run: this process, or `--workers N` shards over local
    processes or Ray tasks (`--executor ray`)."""
    from simulator.errors import InputError
    from simulator.run.execute import InProcess
    from simulator.run.shards import Executor, ProcessExecutor, Sharded
    if executor != "ray" and (ray_address or shared_fs):
        raise InputError("--ray-address/--ray-shared-fs need --executor ray")
    if workers == 1 and executor == "local":
        return InProcess()
    ex: Executor = ProcessExecutor()
    if executor == "ray":
        from simulator.run.ray import RayExecutor
        ex = RayExecutor(ray_address, shared_fs=shared_fs)
    return Sharded(workers, ex)


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
def validate(scenario: str, sets: tuple[str, ...]) -> None:
    """Check SCENARIO (and overrides) without running it."""
    from simulator.run.bounds import check_runnable
    s, _ = load_scenario(scenario, list(sets))
    check_runnable(s)      # what `run` checks on the twin (hardware, KV budget, sessions)
    click.echo(f"{scenario}: ok — {s.name}: {s.sessions} session(s) × {s.turns} turns, "
               f"compaction {s.compaction.kind}, {len(s.turn_templates)} turn template(s)")
