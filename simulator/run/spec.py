"""What one run is asked to do (`RunSpec`) and what it gave back (`RunResult`).

Plain values only, so a spec travels to a worker process or a Ray task as it is. The
URL and number checks here run before anything is opened: a bad `--endpoint` or an
absurd `--price-per-hour` is one line, never a half-made results directory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from simulator.analysis.early_verdict import EarlyRule
from simulator.errors import InputError
from simulator.records.manifest import Manifest
from simulator.scenario.load import ScenarioSource
from simulator.scenario.model import StepRamp
from simulator.session.runner import RunOutcome
from simulator.util.redact import check_endpoint_url, redact_url

if TYPE_CHECKING:        # a type only: building one needs pandas (run.finish does)
    from simulator.analysis.run_summary import RunSummary


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
    api_key_file: str | None = None       # the key's file (else $scenario.endpoint.api_key_env)
    endpoint_urls: tuple[str, ...] = ()   # several --endpoint URLs: routed on the client
    # in-process twin only: efficiency terms / engine settings on top of the scenario's
    # twin section (a fit's candidate terms, run without writing a profile file)
    twin_overrides: Mapping[str, object] = field(default_factory=dict)
    # a stepped ramp in this run (`run --ramp`, `size --ramp`): the scenario's `load.ramp`,
    # passed as a value (set after the overrides)
    ramp: StepRamp | None = None
    # watching the run (`run/observe.py`, docs/watching.md): the live view's mode
    # (auto | dashboard | bar | plain | off; show_progress=False is off), a plain status
    # line's period, the load generator's own /metrics ([HOST:]PORT) and how long it
    # stays up after the run, and extra Prometheus targets (GPU telemetry)
    progress: str = "auto"
    progress_every_s: float = 30.0
    metrics_port: str | None = None
    metrics_hold_s: float = 0.0
    scrape_urls: tuple[str, ...] = ()
    # the scenario file already read (a search reads it once): its overrides are resolved
    # on this value instead of parsing `scenario_path` again (`scenario.load`)
    source: ScenarioSource | None = None
    # stop once the run's SLO verdict is decided (`analysis.early_verdict`: a search's
    # probe that fails whatever its remaining requests give); the run ends interrupted
    early: EarlyRule | None = None


@dataclass
class RunResult:
    run_dir: Path
    status: str
    summary: RunSummary          # summary.json's figures and facts, typed
    outcome: RunOutcome
    manifest: Manifest


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


def check_spec_numbers(spec: RunSpec) -> None:
    """Command-line numbers that must be finite and in range (InputError otherwise)."""
    for name, value, hi in (("--price-per-hour", spec.price_per_hour, 1e6),
                            ("--stop-grace-s", spec.stop_grace_s, 3600.0)):
        if value is not None and not (math.isfinite(value) and 0 <= value <= hi):
            raise InputError(f"{name} {value}: must be a finite number within [0, {hi:g}]")
