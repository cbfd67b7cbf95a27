"""Where a search's points run: one at a time here, K at a time in local processes, or
as Ray tasks on a cluster — the one fan-out every many-run answer uses.

`fanout_for(parallel, executor, ray_address)` gives a `Fanout`; its `map(fn,
items)` is `[fn(x) for x in items]` with up to `width` calls at once, results in the
order of `items` whatever order they finish in, so a deterministic `fn` (the twin runs
in virtual time) gives exactly the serial answer. `cost` starts the costliest first.
The fan-out lives as long as the search (a process pool or a Ray connection is made
once, not per batch); Ray is integrated once, in `run.ray`, for points and shards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from types import TracebackType
from typing import Protocol, TypeVar

from simulator.errors import InputError
from simulator.run.ray import ensure_ray, import_ray, map_tasks

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "ray")


class Fanout(Protocol):
    """Runs `fn` over `items`, up to `width` at once; results in `items` order.
    `on_done(result)` is called as each finishes; `stop(result)` true ends a serial map
    early (a failed point: the rest would not have run serially either), so the list
    returned may be shorter than `items`."""

    name: str
    width: int                        # points run at once

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            cost: Callable[[T], float] | None = None,
            on_done: Callable[[R], None] | None = None,
            stop: Callable[[R], bool] | None = None) -> list[R]: ...

    def close(self) -> None: ...


def check_parallel(parallel: int, executor: str) -> None:
    if parallel < 1:
        raise InputError(f"--parallel must be >= 1, got {parallel}")
    if executor not in EXECUTORS:
        raise InputError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")


def _order(items: Sequence[T], cost: Callable[[T], float] | None) -> list[int]:
    """Indexes of `items`, costliest first (stable), or as given."""
    if cost is None:
        return list(range(len(items)))
    return sorted(range(len(items)), key=lambda i: -cost(items[i]))


class Serial:
    """One point after another, in this process (no pickling)."""

    name = "serial"
    width = 1

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            cost: Callable[[T], float] | None = None,
            on_done: Callable[[R], None] | None = None,
            stop: Callable[[R], bool] | None = None) -> list[R]:
        out: list[R] = []
        for x in items:
            out.append(res := fn(x))
            if on_done is not None:
                on_done(res)
            if stop is not None and stop(res):
                break
        return out

    def close(self) -> None:
        return None


class Processes:
    """Up to `width` points at once in spawned local processes (one pool per search)."""

    name = "local"

    def __init__(self, width: int) -> None:
        self.width = width
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            cost: Callable[[T], float] | None = None,
            on_done: Callable[[R], None] | None = None,
            stop: Callable[[R], bool] | None = None) -> list[R]:
        if len(items) <= 1:
            return Serial().map(fn, items, cost, on_done, stop)
        if self._pool is None:
            from multiprocessing import get_context
            self._pool = ProcessPoolExecutor(max_workers=self.width,
                                             mp_context=get_context("spawn"))
        futures = {i: self._pool.submit(fn, items[i]) for i in _order(items, cost)}
        if on_done is not None:
            for f in as_completed(futures.values()):
                if f.exception() is None:
                    on_done(f.result())
        return [futures[i].result() for i in range(len(items))]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class RayTasks:
    """Up to `width` points at once as Ray tasks (`run.ray.map_tasks`); Ray is joined
    (or started) on the first batch and shut down at the end if this search started it."""

    name = "ray"

    def __init__(self, width: int, address: str | None = None) -> None:
        import_ray()            # one line now when Ray is missing, before any point runs
        self.width, self.address = width, address
        self._started: bool | None = None

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            cost: Callable[[T], float] | None = None,
            on_done: Callable[[R], None] | None = None,
            stop: Callable[[R], bool] | None = None) -> list[R]:
        if self._started is None:
            self._started = ensure_ray(self.address)
        return map_tasks(fn, items, _order(items, cost), self.width, on_done)

    def close(self) -> None:
        if self._started:
            import_ray().shutdown()
        self._started = None


class fanout_for:
    """`with fanout_for(parallel, executor, ray_address) as fx:` — the search's
    fan-out (`--executor local|ray` names where its points run), closed when the search
    ends (however it ends). Not the shard protocol `run.shards.Executor`."""

    def __init__(self, parallel: int = 1, executor: str = "local",
                 ray_address: str | None = None) -> None:
        check_parallel(parallel, executor)
        if ray_address and executor != "ray":
            raise InputError("--ray-address needs --executor ray")
        self.ex: Fanout
        if executor == "ray":
            self.ex = RayTasks(parallel, ray_address)
        elif parallel > 1:
            self.ex = Processes(parallel)
        else:
            self.ex = Serial()

    def __enter__(self) -> Fanout:
        return self.ex

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.ex.close()


def map_points(fn: Callable[[T], R], items: Sequence[T], parallel: int = 1,
               executor: str = "local", *, ray_address: str | None = None,
               cost: Callable[[T], float] | None = None) -> list[R]:
    """`[fn(x) for x in items]`, up to `parallel` at once; results in `items` order
    (one batch through `fanout_for`)."""
    with fanout_for(parallel, executor, ray_address) as fx:
        return fx.map(fn, items, cost)


