"""Independent points (sweep counts, sizing probes, seeds) run K at a time.

`map_points(fn, items, parallel, executor)` is `[fn(x) for x in items]` with up to
`parallel` calls at once: in spawned local processes (`executor="local"`, the default)
or as Ray tasks on a cluster (`executor="ray"`). `fn` must be picklable (a top-level
function, or a bound method of a picklable object) and its result too. Results come
back in the order of `items` whatever order the points finish in, so a deterministic
`fn` (the twin runs in virtual time) gives exactly the serial answer.

`bisection_frontier` (re-exported from `analysis.sizing`, where the sizing search
is) gives the next K points of a bisection tree, breadth first, all of which a serial
bisection might ask for next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from simulator.analysis.sizing import bisection_frontier as bisection_frontier
from simulator.errors import InputError

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "ray")


def check_parallel(parallel: int, executor: str) -> None:
    if parallel < 1:
        raise InputError(f"--parallel must be >= 1, got {parallel}")
    if executor not in EXECUTORS:
        raise InputError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")


def map_points(fn: Callable[[T], R], items: Sequence[T], parallel: int = 1,
               executor: str = "local", *, ray_address: str | None = None,
               cost: Callable[[T], float] | None = None) -> list[R]:
    """`[fn(x) for x in items]`, up to `parallel` at once; results in `items` order.
    `cost` (e.g. sessions of a sweep point) starts the costliest points first, so the
    longest one does not start last. `parallel=1` with the local executor runs in this
    process (no pickling)."""
    check_parallel(parallel, executor)
    order = sorted(range(len(items)), key=lambda i: -cost(items[i])) if cost \
        else list(range(len(items)))
    if executor == "ray":
        return _map_ray(fn, items, order, parallel, ray_address)
    if parallel == 1 or len(items) <= 1:
        return [fn(x) for x in items]
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context
    with ProcessPoolExecutor(max_workers=min(parallel, len(items)),
                             mp_context=get_context("spawn")) as pool:
        futures = {i: pool.submit(fn, items[i]) for i in order}   # FIFO: costliest first
        return [futures[i].result() for i in range(len(items))]


def _map_ray(fn: Callable[[T], R], items: Sequence[T], order: list[int], parallel: int,
             address: str | None) -> list[R]:
    """Ray tasks, at most `parallel` in flight, started in `order`; a task's exception
    is re-raised here."""
    from simulator.run.ray import ensure_ray, import_ray
    ray = import_ray()
    started = ensure_ray(address)
    try:
        task = ray.remote(max_retries=0, num_cpus=1)(_apply)   # fn may be a bound method
        out: dict[int, R] = {}
        index: dict[Any, int] = {}
        pending: list[Any] = []
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
        return [out[i] for i in range(len(items))]
    finally:
        if started:
            ray.shutdown()


def _apply(fn: Callable[[T], R], x: T) -> R:
    return fn(x)
