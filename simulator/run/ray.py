"""Ray, integrated once: a run's shards as Ray tasks on any node (`RayExecutor`, for
`endurance run --workers N --executor ray`), and a search's points as Ray tasks
(`map_tasks`, for `sweep`/`size --executor ray`).

Each shard is one Ray task running the ordinary `workers.run_shard` in its worker's
main thread. It journals to node-local disk (a temporary directory) and a shipper
thread beside it sends every complete journal line to a small hub actor about twice
a second; the driver drains the hub into `<run>/workers/w<i>/`, so when the shard
returns (or its node dies) the parent merges whatever reached it exactly as it
merges local shards. With `--ray-shared-fs` the shards journal straight into the run
directory instead and nothing is shipped.

The same hub carries the two things that must not travel otherwise:
- the stop request: SIGINT/SIGTERM on the driver raises the hub's stop level; each
  shipper delivers it to its runner as a SIGTERM (the runner's own graceful stop,
  a second one cancels in-flight requests at once), and a shard still running after
  the stop grace (+ `CANCEL_MARGIN_S`) is force-cancelled;
- the endpoint's API key: handed to the hub in an actor call (in memory) and read
  back by each shard into its environment for the run. Ray's `runtime_env` env_vars
  would be simpler but the runtime-env agent writes them verbatim into its log
  (`runtime_env_agent.log`, checked on Ray 2.60), so the key never goes there.

Timelines: each sync also reads the driver's wall clock, so a shard knows its clock's
offset to the driver's (best of several round trips, error half that round trip); the
parent aligns shard timelines by wall clock and records the error in the manifest.
Ray is imported lazily: the base install does not need it.
"""

from __future__ import annotations

import _thread
import contextlib
import dataclasses
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, TypeVar

from simulator.errors import InputError, RunError
from simulator.run.prepare import resolve
from simulator.run.shards import SHARD_JOURNALS, ShardJob, ShardResult, run_shard
from simulator.run.signals import SignalHandler, signals_handled
from simulator.session.runner import STOP_GRACE_S

if TYPE_CHECKING:       # types only: Ray is imported when a run asks for it
    from ray import ObjectRef
    from ray.actor import ActorHandle

T = TypeVar("T")
R = TypeVar("R")

RAY_EXTRA = "pip install 'endurance[ray]'"
SYNC_INTERVAL_S = 0.5      # how often a shard ships journal lines and reads the stop level
CLOCK_PROBES = 5           # round trips before the run to estimate the clock offset
CANCEL_MARGIN_S = 10.0     # past the stop grace, a shard still running is force-cancelled


def import_ray() -> ModuleType:
    """The `ray` module, or one clear line naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise InputError(f"--executor ray needs Ray, which is not installed: {RAY_EXTRA}") from None
    return ray


def ensure_ray(address: str | None = None) -> bool:
    """Connect to (or start) Ray unless already connected; True when this call did it
    (then the caller shuts it down). `address`: a cluster (`auto`, `ray://host:10001`),
    else $RAY_ADDRESS, else a new local Ray without its dashboard."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    target = address or os.environ.get("RAY_ADDRESS") or None
    try:
        # log_to_driver off: workers' prints must not mix into stdout (`--json`, the run
        # directory as the last line); a shard's error comes back in its result
        ray.init(address=target, include_dashboard=False if target is None else None,
                 log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = target or "a local Ray"
        raise RunError(f"Ray: cannot connect to {where}: {str(exc).splitlines()[0]}") from None
    return True


class Hub:
    """The actor between the driver and its shards (one per run, holds no CPU):
    journal bytes going up, the stop level and the driver's clock going down."""

    def __init__(self) -> None:
        self.stop_level = 0
        self.pending: list[tuple[int, str, bytes]] = []
        self.secrets: dict[str, str] = {}

    def set_secrets(self, secrets: dict[str, str]) -> None:
        self.secrets = dict(secrets)

    def get_secrets(self) -> dict[str, str]:
        return dict(self.secrets)

    def sync(self, index: int, chunks: list[tuple[str, bytes]]) -> tuple[float, int]:
        """Take a shard's new journal bytes; (the driver-side wall clock, stop level)."""
        self.pending.extend((index, name, data) for name, data in chunks)
        return time.time(), self.stop_level

    def stop(self, level: int) -> None:
        self.stop_level = max(self.stop_level, level)

    def drain(self) -> list[tuple[int, str, bytes]]:
        out, self.pending = self.pending, []
        return out


def write_chunks(chunks: Sequence[tuple[int, str, bytes]], dirs: dict[int, Path]) -> None:
    """Append shipped journal bytes to the shards' directories on the driver."""
    for index, name, data in chunks:
        dirs[index].mkdir(parents=True, exist_ok=True)
        with open(dirs[index] / name, "ab") as f:
            f.write(data)


class _Shipper:
    """The shard-side thread: ships complete journal lines, estimates the clock offset,
    turns the hub's stop level into SIGTERMs for the runner (in the main thread)."""

    def __init__(self, ray: ModuleType, hub: ActorHandle[Hub], index: int, shard_dir: Path,
                 ship: bool) -> None:
        self.ray, self.hub, self.index, self.dir, self.ship = ray, hub, index, shard_dir, ship
        self.offsets = dict.fromkeys(SHARD_JOURNALS, 0)
        self.offset_s, self.error_s = 0.0, float("inf")
        self.delivered = 0
        self._default = signal.getsignal(signal.SIGTERM)   # Ray's own, before the runner's
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="endurance-shipper", daemon=True)

    def start(self) -> None:
        for _ in range(CLOCK_PROBES):
            self.sync(final=False)
        self._thread.start()

    def close(self) -> None:
        self._done.set()
        self._thread.join(30)
        self.sync(final=True)

    def _loop(self) -> None:
        while not self._done.wait(SYNC_INTERVAL_S):
            with contextlib.suppress(Exception):   # the hub busy or gone: try again later
                self.sync(final=False)

    def _chunks(self, final: bool) -> list[tuple[str, bytes]]:
        out: list[tuple[str, bytes]] = []
        for name, pos in self.offsets.items():
            path = self.dir / name
            if not self.ship or not path.exists():
                continue
            with open(path, "rb") as f:
                f.seek(pos)
                data = f.read()
            cut = len(data) if final else data.rfind(b"\n") + 1   # whole lines only
            if cut > 0:
                out.append((name, data[:cut]))
                self.offsets[name] = pos + cut
        return out

    def sync(self, *, final: bool) -> None:
        sent = time.time()
        driver_now, level = self.ray.get(self.hub.sync.remote(self.index, self._chunks(final)))
        back = time.time()
        if (back - sent) / 2 < self.error_s:
            self.error_s = (back - sent) / 2
            self.offset_s = driver_now - (sent + back) / 2
        # the runner's handler replaced Ray's while it runs: only then is a stop safe
        while level > self.delivered and signal.getsignal(signal.SIGTERM) is not self._default:
            self.delivered += 1
            _thread.interrupt_main(signal.SIGTERM)


def remote_shard(job: ShardJob, hub: ActorHandle[Hub], ship: bool) -> ShardResult:
    """Body of the Ray task: run one shard on this node, shipping its journals."""
    ray = import_ray()
    local = job
    if ship:
        scratch = Path(tempfile.mkdtemp(prefix=f"endurance-{job.run_id}-"))
        local = dataclasses.replace(job, shard_dir=scratch / f"w{job.index}")
    secrets = ray.get(hub.get_secrets.remote())
    old = {k: os.environ.get(k) for k in secrets}
    os.environ.update(secrets)
    shipper = _Shipper(ray, hub, job.index, local.shard_dir, ship)
    try:
        shipper.start()
        result = run_shard(local)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shipper.close()
        if ship:
            shutil.rmtree(local.shard_dir.parent, ignore_errors=True)
    return dataclasses.replace(result, clock_offset_s=shipper.offset_s,
                               clock_error_s=shipper.error_s,
                               node=ray.util.get_node_ip_address())


class RayExecutor:
    """Runs each shard as a Ray task (see the module docstring); the parent scrapes
    the server's /metrics and merges as for local shards."""

    name = "ray"
    parent_scrapes_metrics = True

    def __init__(self, address: str | None = None, *, shared_fs: bool = False,
                 secret_env: Sequence[str] | None = None) -> None:
        import_ray()        # fail before anything is created when Ray is missing
        self.address, self.shared_fs = address, shared_fs
        self.secret_env = secret_env
        self._stop_level = 0
        self._stop_at: float | None = None

    def stop(self, level: int = 1) -> None:
        """Ask every shard to stop (level 2: cancel in-flight requests at once)."""
        self._stop_level = max(self._stop_level, level)
        if self._stop_at is None:
            self._stop_at = time.monotonic()

    def run_shards(self, jobs: Sequence[ShardJob]) -> list[ShardResult]:
        if not jobs:
            return []
        ray = import_ray()
        started = ensure_ray(self.address)
        try:
            return self._run(ray, jobs)
        finally:
            if started:
                ray.shutdown()

    def _secrets(self, jobs: Sequence[ShardJob]) -> dict[str, str]:
        names = self.secret_env
        if names is None:
            s = jobs[0].scenario or resolve(jobs[0].spec)[0]
            names = [s.endpoint.api_key_env]
        return {n: os.environ[n] for n in names if os.environ.get(n)}

    def _run(self, ray: ModuleType, jobs: Sequence[ShardJob]) -> list[ShardResult]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        hub = ray.remote(num_cpus=0, max_restarts=0)(Hub).options(
            scheduling_strategy=here).remote()
        ray.get(hub.set_secrets.remote(self._secrets(jobs)))
        task = ray.remote(max_retries=0, num_cpus=1)(remote_shard)
        dirs = {job.index: job.shard_dir for job in jobs}
        grace = jobs[0].spec.stop_grace_s
        grace = STOP_GRACE_S if grace is None else grace
        handlers: dict[int, SignalHandler] = {signal.SIGINT: self._on_signal, signal.SIGTERM: self._on_signal}
        with signals_handled(handlers):
            refs = [task.remote(job, hub, not self.shared_fs) for job in jobs]
            pending, sent_level, cancelled = list(refs), 0, False
            while pending:
                _done, pending = ray.wait(pending, num_returns=len(pending),
                                          timeout=SYNC_INTERVAL_S)
                if self._stop_level > sent_level:
                    sent_level = self._stop_level
                    hub.stop.remote(sent_level)
                if not self.shared_fs:
                    write_chunks(ray.get(hub.drain.remote()), dirs)
                if (pending and not cancelled and self._stop_at is not None
                        and time.monotonic() - self._stop_at > grace + CANCEL_MARGIN_S):
                    for ref in pending:
                        ray.cancel(ref, force=True)
                    cancelled = True
                    _done, pending = ray.wait(pending, num_returns=len(pending), timeout=30)
        if not self.shared_fs:
            with contextlib.suppress(Exception):
                write_chunks(ray.get(hub.drain.remote()), dirs)
        results = [self._result(ray, ref, job) for ref, job in zip(refs, jobs, strict=True)]
        ray.kill(hub)
        return results

    def _on_signal(self, _sig: int, _frame: FrameType | None) -> None:
        self.stop(self._stop_level + 1)

    def _result(self, ray: ModuleType, ref: ObjectRef[ShardResult], job: ShardJob) -> ShardResult:
        """The shard's own result, or why it has none (crashed, node lost, cancelled)."""
        try:
            res: ShardResult = ray.get(ref, timeout=30)
            return res
        except Exception as exc:
            crashed = isinstance(exc, ray.exceptions.RayTaskError)
            cause = (getattr(exc, "cause", None) or exc) if crashed else exc
            first = (str(cause).strip().splitlines() or [""])[-1][:300]
            what = type(cause).__name__
            if self._stop_at is not None:
                return ShardResult(job.index, "interrupted",
                                   f"worker {job.index} cancelled after the stop grace ({what})")
            how = "crashed" if crashed else "lost (its worker or node died)"
            return ShardResult(job.index, "failed", f"worker {job.index} {how}: {what}: {first}")


def map_tasks(fn: Callable[[T], R], items: Sequence[T], order: list[int],
              parallel: int, on_done: Callable[[R], None] | None = None) -> list[R]:
    """`[fn(x) for x in items]` as Ray tasks on the connected cluster, at most `parallel`
    in flight, started in `order`; results in `items` order. A task's exception is
    re-raised here as itself. Used by searches' points (`sweep.fanout.RayTasks`)."""
    ray = import_ray()
    task = ray.remote(max_retries=0, num_cpus=1)(_apply)   # fn may be a bound method
    out: dict[int, R] = {}
    index: dict[object, int] = {}      # a task's ObjectRef → its item
    pending: list[object] = []
    todo = list(order)
    while todo or pending:
        while todo and len(pending) < parallel:
            i = todo.pop(0)
            ref = task.remote(fn, items[i])
            index[ref] = i
            pending.append(ref)
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            try:
                out[index[ref]] = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                raise exc.as_instanceof_cause() from None
            if on_done is not None:
                on_done(out[index[ref]])
    return [out[i] for i in range(len(items))]


def _apply(fn: Callable[[T], R], x: T) -> R:
    return fn(x)
