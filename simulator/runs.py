"""One run, end to end: scenario → endpoint → runner → recorder → summary.

This is the library call behind `endurance run` (and `sweep`/`size`/notebooks): it
resolves the scenario and its overrides, picks the endpoint (the in-process twin in
virtual time when no URL is given), owns the results directory, and always leaves it
in a consistent state — `finalize` runs on every exit path.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from simulator import __version__
from simulator.endpoints.base import Endpoint
from simulator.errors import InputError, RunError
from simulator.metrics.recorder import Recorder
from simulator.scenario.load import load_scenario, scenario_hash
from simulator.scenario.model import Scenario
from simulator.session.resume import ResumeState
from simulator.session.runner import STOP_GRACE_S, Runner, RunOutcome

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


@dataclass
class RunResult:
    run_dir: Path
    status: str
    summary: dict[str, Any]
    outcome: RunOutcome
    manifest: dict[str, Any]


def resolve(spec: RunSpec) -> tuple[Scenario, dict[str, Any]]:
    return load_scenario(spec.scenario_path, spec.overrides)


def redact_url(url: str) -> str:
    """The URL without user info or query (keys sometimes ride there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def parse_twin(value: str) -> tuple[str, str]:
    if value.count("/") != 1 or not all(value.split("/")):
        raise InputError(f"--twin must look like HARDWARE/MODEL (e.g. {DEFAULT_TWIN}), got {value!r}")
    hw, model = value.split("/")
    return hw, model


def make_endpoint(s: Scenario, spec: RunSpec) -> Endpoint:
    if spec.endpoint_url is None:
        from simulator.endpoints.twin import InProcessTwin
        hw, model = parse_twin(spec.twin) if spec.twin else (s.twin.hardware, s.twin.model)
        return InProcessTwin(hw, model, spec=spec.spec or s.twin.spec, seed=s.seed)
    url = spec.endpoint_url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--endpoint must be an http(s) URL, got {redact_url(url)!r}")
    key = os.environ.get(s.endpoint.api_key_env, "")
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
        "endpoint": {**desc, **({"url": redact_url(spec.endpoint_url)} if spec.endpoint_url else {})},
        "simulated": endpoint.simulated, "price_per_hour": _price(spec, endpoint),
        "contains_verbatim_content": s.contains_verbatim_content,
        "versions": _versions(), "scenario_base_dir": resolved.get("base_dir"),
        "run_spec": {"endpoint_url": redact_url(spec.endpoint_url) if spec.endpoint_url
                     else None, "twin": spec.twin, "spec": spec.spec, "client": spec.client,
                     "stop_grace_s": spec.stop_grace_s},
    }


def preflight(url: str, timeout_s: float) -> None:
    """Fail fast, before any results directory exists, when nothing listens at `url`."""
    import socket
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RunError(f"endpoint {redact_url(url)}: unreachable ({reason}); "
                       "no results directory was created") from None


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
    if spec.workers != 1:
        from simulator.workers import execute_sharded
        return execute_sharded(spec, spec.workers, echo=echo)
    if spec.resume_dir is not None:
        from simulator.session.resume_run import open_resumed
        s, spec, recorder, state = open_resumed(spec, endpoint)
        endpoint = endpoint or make_endpoint(s, spec)
        run_id, run_dir = recorder.manifest["run_id"], recorder.run_dir
    else:
        s, resolved = resolve(spec)
        endpoint = endpoint or make_endpoint(s, spec)
        if spec.endpoint_url is not None:
            preflight(spec.endpoint_url, s.endpoint.connect_timeout_s)
        run_id = new_run_id(s.name)
        run_dir = spec.out_dir / run_id
        recorder = Recorder(run_dir, build_manifest(s, resolved, spec, endpoint, run_id))
        state = None
    outcome = RunOutcome("failed", reason="run did not start")
    summary: dict[str, Any] = {}
    try:
        outcome = _run_loop(s, spec, endpoint, recorder, run_id, state)
    except KeyboardInterrupt:
        outcome = RunOutcome("interrupted", reason="interrupted")
    finally:
        with signals_deferred():      # a second Ctrl-C must not tear the finalize
            summary = _finish(recorder, endpoint, outcome)
    from simulator.analysis.summary import format_summary
    echo(format_summary(summary))
    if outcome.reason:
        echo(f"status: {outcome.status} ({outcome.reason})")
    return RunResult(run_dir, outcome.status, summary, outcome, recorder.manifest)


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


def run_background(endpoint: Endpoint, recorder: Recorder,
                   scrape_url: str | None) -> tuple[Background, list[Callable[[], None]]]:
    """The run's background tasks and their stop hooks: the endpoint's own (the twin's
    engine driver) and, against a real server, a /metrics scraper into the recorder."""
    background: Background = []
    bg_factory = getattr(endpoint, "background", None)
    if callable(bg_factory):
        background.extend(bg_factory())
    on_finish: list[Callable[[], None]] = []
    if scrape_url is not None:
        from simulator.metrics.prometheus import MetricsScraper, metrics_url_for

        def sink(rows: list[dict[str, Any]]) -> None:
            for row in rows:
                recorder.write_metrics(row)

        scraper = MetricsScraper(metrics_url_for(scrape_url), SCRAPE_INTERVAL_S, sink)
        background.append(scraper.run)
        on_finish.append(scraper.stop)
    return background, on_finish


def _run_loop(s: Scenario, spec: RunSpec, endpoint: Endpoint, recorder: Recorder,
              run_id: str, state: ResumeState | None = None) -> RunOutcome:
    background, on_finish = run_background(endpoint, recorder, spec.endpoint_url)
    total = s.sessions * s.turns
    with _progress(total, spec.show_progress and sys.stderr.isatty()) as advance:
        grace = STOP_GRACE_S if spec.stop_grace_s is None else spec.stop_grace_s
        runner = Runner(s, endpoint, recorder, run_id, progress=advance, background=background,
                        on_finish=on_finish, stop_grace_s=grace, resume=state)

        async def main() -> RunOutcome:
            try:
                return await runner.run()
            finally:
                await endpoint.aclose()

        if endpoint.simulated:
            from simulator.vtime import run_virtual
            return run_virtual(main())
        return _run_real(main())


def _run_real(coro: Coroutine[Any, Any, RunOutcome]) -> RunOutcome:
    try:
        import uvloop
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as r:
            return r.run(coro)
    except ImportError:
        return asyncio.run(coro)


class _progress:
    """A rich progress bar on stderr (a no-op when not a terminal)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self._bar: Any = None

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda n: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        self._bar = Progress(TextColumn("turns"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("{task.fields[tok]} output tokens"),
                             TimeElapsedColumn(), transient=True)
        self._bar.start()
        task = self._bar.add_task("run", total=self.total, tok=0)
        state = {"tok": 0}

        def advance(n: int) -> None:
            state["tok"] += n
            self._bar.update(task, advance=1, tok=state["tok"])
        return advance

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _finish(recorder: Recorder, endpoint: Endpoint, outcome: RunOutcome) -> dict[str, Any]:
    """Summarise from the journal and finalize the directory (never raises past it)."""
    from simulator.analysis.summary import summarize
    turns, server = recorder.frames()
    summary = summarize(turns, price_per_hour=recorder.manifest.get("price_per_hour"),
                        simulated=endpoint.simulated, server_metrics=server)
    stats = getattr(endpoint, "stats", None)
    if callable(stats):
        engine = stats()
        summary["engine"] = engine
        summary["kv_usage_peak"] = engine.get("kv_usage_peak")
        summary["preemptions"] = engine.get("preemptions")
        if engine.get("prefix_cache_queries"):
            summary["server_prefix_cache_hit_share"] = (
                engine["prefix_cache_hits"] / engine["prefix_cache_queries"])
    summary.update(status=outcome.status, status_reason=outcome.reason,
                   failed_sessions=outcome.failed_sessions,
                   deadline_reached=outcome.deadline_reached,
                   run_id=recorder.manifest["run_id"], simulated=endpoint.simulated,
                   contains_verbatim_content=bool(recorder.manifest.get("contains_verbatim_content")))
    if endpoint.simulated:
        summary["twin"] = {k: v for k, v in endpoint.describe().items() if k != "profile"}
    recorder.manifest.update(status_reason=outcome.reason,
                             failed_sessions=list(outcome.failed_sessions))
    recorder.finalize(outcome.status, summary, (turns, server))
    return summary
