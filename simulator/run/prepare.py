"""The first half of every run: scenario → endpoint → pre-flight → server facts →
manifest → recorder, in one process or sharded (`open_run`).

A `--resume` reopens the run directory with the facts its manifest recorded instead
(`run.resume`). Whatever fails here fails before the results directory exists, or —
for an unwritable `--out` — as one InputError line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.clock import RunClock
from simulator.endpoints.base import Endpoint, EngineEndpoint
from simulator.endpoints.factory import EndpointTarget, make_endpoint
from simulator.endpoints.http.preflight import preflight
from simulator.errors import InputError
from simulator.records.manifest import Manifest
from simulator.records.recorder import Recorder
from simulator.run import server as server_info
from simulator.run.bounds import check_runnable
from simulator.run.manifest import build_manifest, new_run_id
from simulator.run.resume import open_resumed
from simulator.run.server import ServerInfo
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario, resolve_scenario, with_step_ramp
from simulator.scenario.model import Scenario
from simulator.session.resume import ResumeState
from simulator.twin.model.profiles import parse_twin

if TYPE_CHECKING:       # a type only: the view loads with the run's drive
    from simulator.live.view import LiveView


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
    live: LiveView | None = None       # what watches it (`run/observe.py`), set by execute

    @property
    def run_id(self) -> str:
        return str(self.recorder.manifest.run_id)

    @property
    def run_dir(self) -> Path:
        return self.recorder.run_dir


def resolve(spec: RunSpec) -> tuple[Scenario, dict[str, object]]:
    """The scenario with the spec's overrides, checked as `validate` checks it."""
    s, resolved = load_scenario(spec.scenario_path, spec.overrides) if spec.source is None \
        else resolve_scenario(spec.source, spec.overrides)
    if spec.ramp is not None:
        s, resolved = with_step_ramp(resolved, spec.ramp)
    check_runnable(s, twin=parse_twin(spec.twin) if spec.twin else None, spec=spec.spec,
                   in_process=spec.endpoint_url is None)
    return s, resolved


def endpoint_target(spec: RunSpec) -> EndpointTarget:
    """What the spec says about the endpoint, for `endpoints.factory.make_endpoint`."""
    return EndpointTarget(url=spec.endpoint_url, urls=spec.endpoint_urls, twin=spec.twin,
                          spec=spec.spec, twin_overrides=spec.twin_overrides,
                          api_key_file=spec.api_key_file, client=spec.client)


def open_run(spec: RunSpec, endpoint: Endpoint | None = None,
             extra: Callable[[Scenario, Manifest], Manifest] | None = None) -> OpenedRun:
    """The first half of every run, in one process or sharded: scenario → endpoint →
    pre-flight → `ServerInfo` (probed once) → manifest → recorder (its clock at the
    server's rate). `extra(scenario, manifest)` adds its fields (a sharded run's workers).
    A `--resume` reopens the run with the facts its manifest recorded."""
    if spec.resume_dir is not None:
        s, spec, recorder, state = open_resumed(spec, endpoint)
        endpoint = endpoint or make_endpoint(s, endpoint_target(spec))
        server = ServerInfo.from_manifest(recorder.manifest, spec.endpoint_url) \
            if spec.endpoint_url is not None else ServerInfo.in_process(endpoint)
        if isinstance(endpoint, EngineEndpoint):   # the in-process twin's engine log
            endpoint.continue_timeline(state.mono_offset_s)
        return OpenedRun(s, spec, endpoint, recorder, server, state)
    s, resolved = resolve(spec)
    endpoint = endpoint or make_endpoint(s, endpoint_target(spec))
    if spec.endpoint_url is not None:
        for url in spec.endpoint_urls or (spec.endpoint_url,):   # every replica's
            preflight(url, s.endpoint.connect_timeout_s, s.timeouts)
        server = server_info.probe(spec.endpoint_url, s.endpoint.connect_timeout_s, s.model)
        if server.context_limit is not None and server.context_limit < s.context_window_tokens:
            s = s.model_copy(update={"context_window_tokens": server.context_limit})
    else:
        server = ServerInfo.in_process(endpoint)
    run_id = new_run_id(s.name, spec.label)
    manifest = server.stamp(build_manifest(s, resolved, spec, endpoint, run_id,
                                           server.twin if server.http_twin else None))
    if extra is not None:
        manifest = extra(s, manifest)
    for _ in range(RUN_ID_DRAWS - 1):
        try:
            recorder = open_recorder(spec.out_dir / run_id, manifest, spec.out_dir,
                                     clock=server.clock(), taken_ok=True)
            break
        except FileExistsError:    # another run took this id this second: draw again
            run_id = new_run_id(s.name, spec.label)
            manifest = replace(manifest, run_id=run_id)
    else:
        recorder = open_recorder(spec.out_dir / run_id, manifest, spec.out_dir,
                                 clock=server.clock())
    return OpenedRun(s, spec, endpoint, recorder, server)


# A run id is the second it starts, the scenario and 4 random hex digits: runs started in
# the same second into one --out (a search's parallel points) can draw the same one
RUN_ID_DRAWS = 8


def open_recorder(run_dir: Path, manifest: Manifest, out: Path,
                  clock: RunClock | None = None, taken_ok: bool = False) -> Recorder:
    """A recorder for a new run directory under `out`; one InputError line when `--out`
    cannot hold it (not a directory, not writable, under /proc, a name too long). With
    `taken_ok`, a run directory that exists already raises FileExistsError (the caller
    draws another id)."""
    try:
        return Recorder(run_dir, manifest, clock=clock)
    except (OSError, ValueError) as exc:   # ValueError: a NUL byte in the path
        if taken_ok and isinstance(exc, FileExistsError) and run_dir.is_dir():
            raise
        why = describe_os_error(exc) if isinstance(exc, OSError) else str(exc)
        raise InputError(f"--out {str(out)[:200]!r}: cannot create the results directory "
                         f"({why})") from None


def describe_os_error(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
