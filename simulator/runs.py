"""One run, end to end: scenario → endpoint → runner → recorder → summary.

This is the library call behind `endurance run` (and `sweep`/`size`/notebooks): it
resolves the scenario and its overrides, picks the endpoint (the in-process twin in
virtual time when no URL is given), owns the results directory, and always leaves it
in a consistent state — `finalize` runs on every exit path.

Every run, in one process or sharded, is put together by the same three calls:
`open_run` (pre-flight, the server's facts probed once as `ServerInfo`, manifest,
recorder), a drive (`drive_sessions` here; `workers` drives shards, each of which
runs `drive_sessions` on its sessions) and `run_to_end` (finalize, summary, report).

Its public API (`__all__`) is what `workers`, the CLI and notebooks build on; `runs`
itself never imports `workers` (sharded runs start from `workers.execute_sharded`),
so the two modules do not import each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from simulator import __version__, server_info
from simulator.clock import RunClock
from simulator.endpoints.base import Endpoint, EngineEndpoint
from simulator.endpoints.preflight import preflight
from simulator.endpoints.routed import RoutedEndpoint
from simulator.errors import InputError, RunError
from simulator.metrics.prometheus import MetricsScraper, metrics_url_for
from simulator.metrics.recorder import Recorder, prewarm_finalize
from simulator.redact import check_endpoint_url, check_key, read_key_file, redact_url
from simulator.scenario.load import load_scenario, scenario_hash
from simulator.scenario.model import Scenario
from simulator.server_info import ServerInfo
from simulator.session.resume import ResumeState
from simulator.session.resume_run import open_resumed
from simulator.session.runner import STOP_GRACE_S, Runner, RunOutcome
from simulator.vtime import run_virtual

__all__ = [
    "DEFAULT_TWIN",
    "SCRAPE_INTERVAL_S",
    "OpenedRun",
    "RunResult",
    "RunSpec",
    "build_manifest",
    "drive_sessions",
    "execute",
    "finish_or_fail",
    "finish_run",
    "make_endpoint",
    "metrics_scraper",
    "new_run_id",
    "open_recorder",
    "open_run",
    "parse_twin",
    "preflight",
    "redact_url",
    "resolve",
    "run_background",
    "run_to_end",
    "signals_deferred",
    "signals_handled",
]

DEFAULT_TWIN = "a40/qwen3-coder-30b-a3b-awq"
SCRAPE_INTERVAL_S = 5.0  # how often a real server's /metrics is read during a run


@dataclass
class RunSpec:
    scenario_path: str
    overrides: list[str] = field(default_factory=list)
    endpoint_url: str | None = None
    twin: str | None = None               # "hardware/model"; None → scenario's twin section
    spec: str | None = None               # twin speculative decoding: off | ngram:K
    out_dir: Path = Path("results")
    label: str | None = None
    price_per_hour: float | None = None
    client: str | None = None             # lean | aiohttp | sdk (HTTP endpoints)
    show_progress: bool = True
    stop_grace_s: float | None = None     # Ctrl-C: seconds in-flight requests may finish
    resume_dir: Path | None = None        # continue this interrupted run (see `resume`)
    workers: int = 1                      # > 1: sessions sharded over processes (`workers`)
    api_key_file: str | None = None       # the key's file (else $scenario.endpoint.api_key_env)
    endpoint_urls: tuple[str, ...] = ()   # several --endpoint URLs: routed on the client
    # in-process twin only: efficiency terms / engine settings on top of the scenario's
    # twin section (a fit's candidate terms, run without writing a profile file)
    twin_overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class RunResult:
    run_dir: Path
    status: str
    summary: dict[str, Any]
    outcome: RunOutcome
    manifest: dict[str, Any]


def resolve(spec: RunSpec) -> tuple[Scenario, dict[str, Any]]:
    from simulator.endpoints.bounds import check_runnable  # the twin: only when running
    s, resolved = load_scenario(spec.scenario_path, spec.overrides)
    check_runnable(s, twin=parse_twin(spec.twin) if spec.twin else None, spec=spec.spec,
                   in_process=spec.endpoint_url is None)   # the check `validate` makes
    return s, resolved


def _split_profile_paths(value: str) -> tuple[str, str] | None:
    """HARDWARE/MODEL where either side is a YAML profile path: split after the first
    `.yaml/` or `.yml/` (a hardware path), else at the first `/` (a hardware name)."""
    for ext in (".yaml/", ".yml/"):
        i = value.find(ext)
        if i > 0:
            return value[:i + len(ext) - 1], value[i + len(ext):]
    if value.endswith((".yaml", ".yml")) and "/" in value:
        hw, _, model = value.partition("/")
        return hw, model
    return None


def parse_twin(value: str) -> tuple[str, str]:
    paths = _split_profile_paths(value)
    if paths is not None and all(paths):
        return paths
    if value.count("/") != 1 or not all(value.split("/")):
        raise InputError(f"--twin must look like HARDWARE/MODEL (e.g. {DEFAULT_TWIN}), got {value!r}")
    hw, model = value.split("/")
    return hw, model


_API_SUFFIXES = ("/v1/messages", "/v1/chat/completions", "/v1")


def base_endpoint_url(url: str) -> tuple[str, str | None]:
    """The base URL clients append `/v1/messages` to, and a note when the given URL
    already named the API path (`http://host:8000/v1/messages` → `http://host:8000`).
    InputError (one line) for a URL no client could use."""
    try:
        check_endpoint_url(url)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for suffix in _API_SUFFIXES:
        if path.endswith(suffix):
            base = urlunsplit((parts.scheme, parts.netloc, path[: -len(suffix)], parts.query, ""))
            return base, (f"note: --endpoint {redact_url(url)} names the API path; using the "
                          f"base URL {redact_url(base)} (requests go to "
                          f"{redact_url(base)}/v1/messages)")
    return url, None


def make_endpoint(s: Scenario, spec: RunSpec) -> Endpoint:
    if spec.endpoint_url is None:
        from simulator.endpoints.twin import InProcessTwin
        hw, model = parse_twin(spec.twin) if spec.twin else (s.twin.hardware, s.twin.model)
        over = {**s.twin.engine_overrides(), **spec.twin_overrides}
        if s.fleet.replicas > 1:
            from simulator.endpoints.fleet import InProcessFleet, router_config
            return InProcessFleet(hw, model, replicas=s.fleet.replicas,
                                  router=router_config(s.fleet), spec=spec.spec or s.twin.spec,
                                  seed=s.seed, overrides=over)
        return InProcessTwin(hw, model, spec=spec.spec or s.twin.spec, seed=s.seed,
                             overrides=over)
    if len(spec.endpoint_urls) > 1:
        from simulator.endpoints.fleet import routed_endpoint
        return routed_endpoint(s, spec.endpoint_urls,
                               lambda u: make_endpoint(s, replace(spec, endpoint_url=u,
                                                                  endpoint_urls=())))
    url = spec.endpoint_url
    try:
        check_endpoint_url(url)
        key_file = spec.api_key_file
        key = check_key(read_key_file(key_file), f"--api-key-file {key_file}") if key_file \
            else check_key(os.environ.get(s.endpoint.api_key_env, ""), f"${s.endpoint.api_key_env}")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return http_endpoint(url, key, s, spec.client or s.endpoint.client)


def http_endpoint(url: str, key: str, s: Scenario, client: str) -> Endpoint:
    """The HTTP endpoint for `client` (lean | aiohttp | sdk) speaking `s.endpoint.api`,
    with the scenario's timeouts and per-attempt limits."""
    from simulator.endpoints.dialects import dialect
    from simulator.endpoints.transport import AttemptLimits
    t, e = s.timeouts, s.endpoint
    limits = AttemptLimits(first_byte_s=t.first_byte_s, idle_s=t.idle_s or e.timeout_s,
                           total_s=t.total_s, max_response_bytes=t.max_response_bytes,
                           retry_after_max_s=t.retry_after_max_s)
    kw: dict[str, Any] = {"timeout_s": limits.idle_s, "connect_timeout_s": e.connect_timeout_s,
                          "limits": limits}
    if client == "lean":
        from simulator.endpoints.lean import LeanEndpoint
        return LeanEndpoint(url, key, dialect=dialect(e.api), **kw)
    if client == "aiohttp":
        from simulator.endpoints.aiohttp_client import AiohttpEndpoint
        return AiohttpEndpoint(url, key, dialect=dialect(e.api), **kw)
    if e.api == "openai-chat":
        from simulator.endpoints.openai_sdk import OpenAISDKEndpoint
        return OpenAISDKEndpoint(url, key or "none", **kw)
    from simulator.endpoints.messages_api import AnthropicSDKEndpoint
    return AnthropicSDKEndpoint(url, key or "none", **kw)


def _versions() -> dict[str, str]:
    """Versions from package metadata (importing the SDK just for this costs seconds)."""
    from importlib.metadata import PackageNotFoundError, version
    out = {"endurance": __version__, "python": platform.python_version(),
           "platform": platform.platform()}
    for pkg in ("anthropic", "openai", "pandas", "aiohttp"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def new_run_id(name: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{name}-{secrets.token_hex(2)}"


def _price(spec: RunSpec, endpoint: Endpoint) -> float | None:
    if spec.price_per_hour is not None:
        return spec.price_per_hour
    if endpoint.simulated:
        profile = endpoint.describe().get("profile", {})
        hw = profile.get("hardware", {}) if isinstance(profile, dict) else {}
        price = hw.get("usd_per_hour") if isinstance(hw, dict) else None
        return float(price) if price is not None else None
    return None


def build_manifest(s: Scenario, resolved: dict[str, Any], spec: RunSpec, endpoint: Endpoint,
                   run_id: str) -> dict[str, Any]:
    desc = endpoint.describe()
    return {
        "run_id": run_id, "label": spec.label, "scenario": s.name,
        "scenario_file": str(spec.scenario_path), "scenario_hash": scenario_hash(
            {k: v for k, v in resolved.items() if k != "base_dir"}),
        "scenario_resolved": {k: v for k, v in resolved.items() if k != "base_dir"},
        "overrides": list(spec.overrides), "seed": s.seed, "sessions": s.sessions,
        "turns": s.turns, "compaction": s.compaction.kind,
        # constant load / warm start (warm-start turns: runner.warm_start_turn(seed, i, turns))
        "load": s.load.model_dump(),
        "endpoint": {**desc, **({"url": redact_url(spec.endpoint_url)} if spec.endpoint_url else {})},
        "simulated": endpoint.simulated, "price_per_hour": _price(spec, endpoint),
        "contains_verbatim_content": s.contains_verbatim_content,
        "versions": _versions(), "scenario_base_dir": resolved.get("base_dir"),
        "run_spec": {"endpoint_url": redact_url(spec.endpoint_url) if spec.endpoint_url
                     else None, "twin": spec.twin, "spec": spec.spec, "client": spec.client,
                     "stop_grace_s": spec.stop_grace_s},
    }


def execute(spec: RunSpec, *, echo: Callable[[str], None] = print,
            endpoint: Endpoint | None = None) -> RunResult:
    """Run a scenario and write its results directory; returns what happened.

    `endpoint` replaces the one the spec names (tests and notebooks inject fakes).
    Called from a thread that runs an event loop (a Jupyter kernel does), the run —
    which starts its own loop — happens in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="endurance-run") as pool:
            return pool.submit(execute, spec, echo=echo, endpoint=endpoint).result()
    if spec.endpoint_url is not None:
        base, note = base_endpoint_url(spec.endpoint_url)
        if note is not None:
            echo(note)
            spec = replace(spec, endpoint_url=base)
    if len(spec.endpoint_urls) > 1:       # a client-routed fleet: the first URL leads
        urls = tuple(base_endpoint_url(u)[0] for u in spec.endpoint_urls)
        spec = replace(spec, endpoint_url=urls[0], endpoint_urls=urls)
    if spec.workers != 1:
        raise InputError("runs.execute runs one process; a sharded run (--workers N) "
                         "starts from simulator.workers.execute_sharded")
    check_spec_numbers(spec)
    # From the moment the results directory exists, SIGTERM ends the run as Ctrl-C does
    # (status interrupted), never as the default kill that leaves it `running`; the
    # runner's own handlers take over while it runs.
    with signals_handled({signal.SIGTERM: _interrupt}):
        return _execute_single(spec, echo, endpoint)


@dataclass
class OpenedRun:
    """A run whose results directory is open: its scenario (context window clamped to
    what the server states), spec, endpoint, the server's facts and the recorder."""

    scenario: Scenario
    spec: RunSpec
    endpoint: Endpoint
    recorder: Recorder
    server: ServerInfo
    state: ResumeState | None = None   # --resume: what the sessions did before

    @property
    def run_id(self) -> str:
        return str(self.recorder.manifest["run_id"])

    @property
    def run_dir(self) -> Path:
        return self.recorder.run_dir


def open_run(spec: RunSpec, endpoint: Endpoint | None = None,
             extra: Callable[[Scenario], Mapping[str, Any]] | None = None) -> OpenedRun:
    """The first half of every run, in one process or sharded: scenario → endpoint →
    pre-flight → `ServerInfo` (probed once) → manifest → recorder (its clock at the
    server's rate). `extra(scenario)` adds manifest fields (a sharded run's workers).
    A `--resume` reopens the run with the facts its manifest recorded."""
    if spec.resume_dir is not None:
        s, spec, recorder, state = open_resumed(spec, endpoint)
        endpoint = endpoint or make_endpoint(s, spec)
        server = ServerInfo.from_manifest(recorder.manifest, spec.endpoint_url) \
            if spec.endpoint_url is not None else ServerInfo.in_process(endpoint)
        if isinstance(endpoint, EngineEndpoint):   # the in-process twin's engine log
            endpoint.continue_timeline(state.mono_offset_s)
        return OpenedRun(s, spec, endpoint, recorder, server, state)
    s, resolved = resolve(spec)
    endpoint = endpoint or make_endpoint(s, spec)
    if spec.endpoint_url is not None:
        for url in spec.endpoint_urls or (spec.endpoint_url,):   # every replica's
            preflight(url, s.endpoint.connect_timeout_s, s.timeouts)
        server = server_info.probe(spec.endpoint_url, s.endpoint.connect_timeout_s, s.model)
        if server.context_limit is not None and server.context_limit < s.context_window_tokens:
            s = s.model_copy(update={"context_window_tokens": server.context_limit})
    else:
        server = ServerInfo.in_process(endpoint)
    run_id = new_run_id(s.name)
    manifest = {**build_manifest(s, resolved, spec, endpoint, run_id), **server.manifest_fields(),
                **(extra(s) if extra is not None else {})}
    recorder = open_recorder(spec.out_dir / run_id, manifest, spec.out_dir, clock=server.clock())
    return OpenedRun(s, spec, endpoint, recorder, server)


def run_to_end(run: OpenedRun, drive: Callable[[], RunOutcome],
               echo: Callable[[str], None]) -> RunResult:
    """The second half of every run: `drive()` runs the sessions (here or in shards);
    whatever happens, the directory is finalized with its summary, then reported."""
    outcome = RunOutcome("failed", reason="run did not start")
    summary: dict[str, Any] = {}
    try:
        outcome = drive()
    except KeyboardInterrupt:
        outcome = RunOutcome("interrupted", reason="interrupted")
    except Exception as exc:
        err = _os_error(exc)
        if err is None:
            raise
        outcome = RunOutcome("failed", reason=f"cannot write results: {_describe(err)}")
    finally:
        with signals_deferred():      # a second Ctrl-C must not tear the finalize
            summary = finish_or_fail(run.recorder, run.endpoint, outcome, run.server)
    from simulator.analysis.summary import format_summary
    from simulator.analysis.target import describe_target
    echo(format_summary(summary, describe_target(run.recorder.manifest)))
    if outcome.reason:
        echo(f"status: {outcome.status} ({outcome.reason})")
    return RunResult(run.run_dir, outcome.status, summary, outcome, run.recorder.manifest)


def _execute_single(spec: RunSpec, echo: Callable[[str], None],
                    endpoint: Endpoint | None) -> RunResult:
    run = open_run(spec, endpoint)
    return run_to_end(run, lambda: drive_sessions(run), echo)


@contextlib.contextmanager
def signals_handled(handlers: Mapping[int, Any]) -> Iterator[None]:
    """Install `handlers` (signal → handler or SIG_IGN) for the block, then restore the
    old ones; a no-op off the main thread, where Python cannot handle signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def signals_deferred() -> contextlib.AbstractContextManager[None]:
    """Ignore SIGINT/SIGTERM while the results are written."""
    return signals_handled({signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: signal.SIG_IGN})


Background = list[Callable[[], Coroutine[Any, Any, Any]]]


def run_background(endpoint: Endpoint, recorder: Recorder, scrape_url: str | None,
                   clock: RunClock | None = None) -> tuple[Background, list[Callable[[], None]]]:
    """The run's background tasks and their stop hooks: the endpoint's own (the twin's
    engine driver) and, against the server at `scrape_url`, a /metrics scraper."""
    return _background(endpoint, recorder, metrics_url_for(scrape_url) if scrape_url else None,
                       clock or recorder.clock)


def _background(endpoint: Endpoint, recorder: Recorder, metrics_url: str | None,
                clock: RunClock) -> tuple[Background, list[Callable[[], None]]]:
    background: Background = []
    if isinstance(endpoint, EngineEndpoint):
        background.extend(endpoint.background())
    on_finish: list[Callable[[], None]] = []
    if metrics_url is not None:
        # a client-routed fleet: each URL's /metrics, rows tagged with the replica
        urls = endpoint.replica_urls if isinstance(endpoint, RoutedEndpoint) else []
        targets = [metrics_url_for(u) for u in urls] if len(urls) > 1 else [metrics_url]
        for i, url in enumerate(targets):
            scraper = metrics_scraper(url, recorder, clock,
                                      replica=str(i) if len(targets) > 1 else None)
            background.append(scraper.run)
            on_finish.append(scraper.stop)
    return background, on_finish


def metrics_scraper(metrics_url: str, recorder: Recorder, clock: RunClock,
                    replica: str | None = None) -> MetricsScraper:
    """A scraper of `metrics_url` into `recorder`: as often in simulated time as a real
    server is scraped (no faster than 0.5 s); the recorder writes the windows in
    simulated seconds, like the turn rows."""
    interval = max(clock.to_loop(SCRAPE_INTERVAL_S), min(0.5, SCRAPE_INTERVAL_S))

    def sink(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            recorder.write_metrics(row if replica is None else {**row, "replica": replica})

    return MetricsScraper(metrics_url, interval, sink)


def drive_sessions(run: OpenedRun, *, sessions: range | None = None, scrape: bool = True,
                   progress: bool = True,
                   started: Callable[[], None] | None = None) -> RunOutcome:
    """Run the sessions of `run` (all, or the shard `sessions`) in this process on its
    own event loop — the virtual-time loop for the in-process twin — and return how it
    ended. The one-process environment: `runs.execute` drives a whole run with it, each
    worker of a sharded run its shard (`workers.run_shard`). `scrape`: this process
    reads the server's /metrics; `started()` is called as the loop starts."""
    s, spec, endpoint, recorder = run.scenario, run.spec, run.endpoint, run.recorder
    clock = run.server.clock()
    background, on_finish = _background(endpoint, recorder,
                                        run.server.metrics_url if scrape else None, clock)
    bar = _progress(progress_total(s), progress and spec.show_progress and sys.stderr.isatty(),
                    duration_s=s.load.duration_s, clock=clock)
    with bar as advance:
        grace = STOP_GRACE_S if spec.stop_grace_s is None else spec.stop_grace_s
        runner = Runner(s, endpoint, recorder, run.run_id, progress=advance,
                        background=background, on_finish=on_finish, stop_grace_s=grace,
                        resume=run.state, clock=clock, session_range=sessions)

        async def main() -> RunOutcome:
            bar.start_clock()
            if started is not None:
                started()
            try:
                return await runner.run()
            finally:
                await endpoint.aclose()

        # What finalize needs is imported now, on this thread, before the first request:
        # a stop then finds it loaded (a second Ctrl-C never waits for imports), and no
        # import ever runs on a background thread (that raced circular imports, issue 23).
        prewarm_finalize()
        if endpoint.simulated:
            return run_virtual(main())
        return _run_real(main())


def _run_real(coro: Coroutine[Any, Any, RunOutcome]) -> RunOutcome:
    try:
        import uvloop
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as r:
            return r.run(coro)
    except ImportError:
        return asyncio.run(coro)


def progress_total(s: Scenario) -> int:
    """Turns a fixed-turn run will send: N × turns, less the turns a warm start skips
    (each session begins at its seeded turn). Constant-load runs count time instead."""
    if s.load.warm_start and s.replay is None:
        from simulator.session.runner import warm_start_turn
        return sum(s.turns - warm_start_turn(s.seed, i, s.turns) for i in range(s.sessions))
    return s.sessions * s.turns


class _progress:
    """A rich progress bar on stderr (a no-op when not a terminal). Fixed-turn runs
    count turns; constant-load runs (`duration_s`) count the run's clock (virtual
    seconds on the twin) against the duration, the turns done shown beside it."""

    def __init__(self, total: int, enabled: bool, duration_s: float | None = None,
                 clock: RunClock | None = None) -> None:
        self.total, self.enabled, self.duration_s = total, enabled, duration_s
        self.clock = clock or RunClock()
        self._bar: Any = None
        self._t0: float | None = None

    def start_clock(self) -> None:
        """Call inside the run's event loop as it starts: the duration counts from here."""
        self._t0 = asyncio.get_running_loop().time()

    def _elapsed(self) -> float:
        if self._t0 is None or self.duration_s is None:
            return 0.0
        return min(self.duration_s,
                   self.clock.to_sim(asyncio.get_running_loop().time() - self._t0))

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda n: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        if self.duration_s is not None:
            cols: tuple[Any, ...] = (
                TextColumn("constant load"), BarColumn(),
                TextColumn("{task.completed:,.0f}/{task.total:,.0f} s"),
                TextColumn("{task.fields[turns]} turns, {task.fields[tok]} output tokens"))
            total: float = self.duration_s
        else:
            cols = (TextColumn("turns"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[tok]} output tokens"))
            total = self.total
        self._bar = Progress(*cols, TimeElapsedColumn(), transient=True)
        self._bar.start()
        task = self._bar.add_task("run", total=total, tok=0, turns=0)
        state = {"tok": 0, "turns": 0}

        def advance(n: int) -> None:
            state["tok"] += n
            state["turns"] += 1
            if self.duration_s is None:
                self._bar.update(task, advance=1, tok=state["tok"])
            else:
                self._bar.update(task, completed=self._elapsed(), tok=state["tok"],
                                 turns=state["turns"])
        return advance

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _interrupt(_sig: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def check_spec_numbers(spec: RunSpec) -> None:
    """Command-line numbers that must be finite and in range (InputError otherwise)."""
    import math
    for name, value, hi in (("--price-per-hour", spec.price_per_hour, 1e6),
                            ("--stop-grace-s", spec.stop_grace_s, 3600.0)):
        if value is not None and not (math.isfinite(value) and 0 <= value <= hi):
            raise InputError(f"{name} {value}: must be a finite number within [0, {hi:g}]")


def open_recorder(run_dir: Path, manifest: dict[str, Any], out: Path,
                  clock: RunClock | None = None) -> Recorder:
    """A recorder for a new run directory under `out`; one InputError line when `--out`
    cannot hold it (not a directory, not writable, under /proc, a name too long)."""
    try:
        return Recorder(run_dir, manifest, clock=clock)
    except (OSError, ValueError) as exc:   # ValueError: a NUL byte in the path
        why = _describe(exc) if isinstance(exc, OSError) else str(exc)
        raise InputError(f"--out {str(out)[:200]!r}: cannot create the results directory "
                         f"({why})") from None


def _describe(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _os_error(exc: BaseException) -> OSError | None:
    """The first OSError inside `exc` (possibly nested exception groups), or None."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            if (found := _os_error(sub)) is not None:
                return found
    return None


def finish_or_fail(recorder: Recorder, endpoint: Endpoint, outcome: RunOutcome,
                   server: ServerInfo | None = None) -> dict[str, Any]:
    """`finish_run`, or — when the disk is full or gone — the manifest marked failed (if it
    can still be written) and one RunError line; the journaled rows stay as they are."""
    try:
        return finish_run(recorder, endpoint, outcome, server)
    except OSError as exc:
        reason = f"cannot write results: {_describe(exc)}"
        if outcome.reason and outcome.reason != reason:
            reason = f"{outcome.reason}; {reason}"
        from simulator.metrics.recorder import salvage_failed
        recorder.manifest.update(status="failed", status_reason=reason)
        salvage_failed(recorder.run_dir, reason)
        raise RunError(f"{recorder.run_dir}: {reason}; status failed, journaled rows kept") \
            from None


def finish_run(recorder: Recorder, endpoint: Endpoint, outcome: RunOutcome,
               server: ServerInfo | None = None) -> dict[str, Any]:
    """Summarise from the journal and finalize the directory (never raises past it).
    The label (simulated, the twin, its time scale) comes from the run's `server`
    facts (default: what the endpoint and the manifest say)."""
    if server is None:
        server = ServerInfo.in_process(endpoint) if endpoint.simulated \
            else ServerInfo.from_manifest(recorder.manifest, None)
    from simulator.analysis.run_summary import RunFacts, RunSummary
    from simulator.analysis.steady import config_from_manifest
    engine = endpoint if isinstance(endpoint, EngineEndpoint) else None  # the in-process twin
    if engine is not None:
        for row in engine.timeline_rows():
            recorder.write_metrics(row)
    turns, scraped = recorder.frames()
    stats = engine.stats() if engine is not None else None   # typed fields + host tier / fleet
    simulated = server.simulated or endpoint.simulated   # a simulated endpoint never loses it
    built = RunSummary.build(turns, price_per_hour=recorder.manifest.get("price_per_hour"),
                             simulated=simulated, server_metrics=scraped,
                             engine_stats=stats,
                             steady=config_from_manifest(recorder.manifest,
                                                         outcome.deadline_reached))
    built = built.with_run_facts(RunFacts(
        status=outcome.status, status_reason=outcome.reason,
        failed_sessions=outcome.failed_sessions, deadline_reached=outcome.deadline_reached,
        run_id=str(recorder.manifest["run_id"]), simulated=simulated,
        contains_verbatim_content=bool(recorder.manifest.get("contains_verbatim_content")),
        twin=dict(server.twin or {}) if server.http_twin or server.simulated else None,
        time_scale=server.time_scale if server.http_twin else None))
    from simulator.analysis.fleet import fleet_summary
    fleet = fleet_summary(turns, stats, scraped)
    if fleet is not None:
        built = built.with_facts(fleet=fleet)
    summary = built.to_json()
    recorder.manifest.update(status_reason=outcome.reason,
                             failed_sessions=list(outcome.failed_sessions))
    recorder.finalize(outcome.status, summary, (turns, scraped))
    return summary
