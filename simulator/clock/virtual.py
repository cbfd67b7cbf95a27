"""An asyncio event loop whose clock is virtual.

When nothing is ready to run, a normal loop blocks in `select(timeout)` until the
next timer is due; this loop instead jumps its clock forward by `timeout` at once.
All timers (`asyncio.sleep`, `wait_for`, `asyncio.timeout`) therefore run in
simulated seconds, while real file descriptors (the self-pipe that delivers signals
such as Ctrl-C) are still polled on every iteration. The in-process twin and the
agents share this clock, so a 553-turn session finishes in seconds with timings
identical to what the engine computed.

Only code without real network I/O may run on it (the in-process twin has none).
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

T = TypeVar("T")


class _VirtualSelector(selectors.BaseSelector):
    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._real = selectors.DefaultSelector()
        self._loop = loop

    def register(self, fileobj: FileDescriptorLike, events: int, data: object = None
                 ) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: FileDescriptorLike) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: FileDescriptorLike, events: int, data: object = None
               ) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # nothing scheduled: only real events can wake us
            return self._real.select(None)
        self._loop.advance(timeout)
        return []

    def get_map(self) -> Mapping[FileDescriptorLike, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector loop whose `time()` is virtual seconds starting at 0."""

    def __init__(self) -> None:
        self._virtual_now = 0.0
        super().__init__(selector=_VirtualSelector(self))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._virtual_now += seconds

    def quiet(self) -> bool:
        """Whether nothing but the caller can run at this instant: no callback is ready,
        so no timer of this instant is left to fire and nothing another task did is
        waiting."""
        return not self._ready  # type: ignore[attr-defined]

    def next_timer(self) -> float | None:
        """When the earliest scheduled timer is due (None when none is)."""
        sched: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        while sched and sched[0].cancelled():
            # Cancelled handles at the head are dropped by the loop lazily; skip them.
            return min((h.when() for h in sched if not h.cancelled()), default=None)
        return sched[0].when() if sched else None


def quiet_now() -> bool:
    """The running loop's `quiet()` when it is virtual, else False."""
    loop = asyncio.get_running_loop()
    return isinstance(loop, VirtualTimeLoop) and loop.quiet()


def run_virtual(coro: Coroutine[object, None, T]) -> T:
    """`asyncio.run` on a fresh virtual-time loop."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(coro)


def next_timer() -> float | None:
    """The running loop's next timer when it is virtual, else None."""
    loop = asyncio.get_running_loop()
    return loop.next_timer() if isinstance(loop, VirtualTimeLoop) else None
