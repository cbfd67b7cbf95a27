"""The one loop every many-run answer goes through (after guidellm's `Benchmarker.run`).

A profile plans the points: `profile.plan(width)` is a generator that yields the next
batch of points (up to `width` of which can usefully run at once), receives their
results and, when it has its answer, returns it. `run_profile` runs each batch on the
fan-out and sends the results back. A sweep yields its whole grid at once; a search
yields the probes its serial algorithm may need next (`search.frontier`) and reads its
answer from the probes the serial search consumed, so a parallel search answers as the
serial one does.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol, TypeVar

from simulator.errors import Interrupted
from simulator.sweep.fanout import Fanout
from simulator.sweep.point import Point, PointResult, run_point

A = TypeVar("A", covariant=True)

Plan = Generator[list[Point], list[PointResult], Any]


class Profile(Protocol[A]):
    def plan(self, width: int) -> Generator[list[Point], list[PointResult], A]: ...


def _point_cost(p: Point) -> float:
    return p.cost


def _failed(r: PointResult) -> bool:
    return not r.ok


def run_profile(profile: Profile[A], fanout: Fanout,
                on_done: Callable[[PointResult], None] | None = None,
                runner: Callable[[Point], PointResult] = run_point) -> A:
    """Run the profile's points on `fanout` until it returns its answer. `runner` is
    the one point runner (`point.run_point`); tests inject a toy server there."""
    plan = profile.plan(fanout.width)
    own = getattr(profile, "answers_interrupted", False)
    try:
        batch = next(plan)
        while True:
            results = fanout.map(runner, batch, _point_cost, on_done, _failed)
            if not own:
                _stop_if_interrupted(results)
            batch = plan.send(results)
    except StopIteration as done:
        answer: A = done.value
        return answer


def _stop_if_interrupted(results: Sequence[PointResult]) -> None:
    """A point ended by Ctrl-C/SIGTERM ends the search: its answer would be read from a
    run cut short (or the search would carry on to the next point as if nothing
    happened). One line, exit 130; the points that finished keep their folders."""
    cut = next((r for r in results if r.status == "interrupted"), None)
    if cut is not None:
        done = sum(r.status != "interrupted" for r in results)
        raise Interrupted(f"interrupted at {cut.point.label} ({cut.run_dir}): no answer"
                          + (f"; {done} point(s) of that batch finished" if done else ""))
