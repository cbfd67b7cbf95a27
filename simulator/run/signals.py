"""Signals around a run: SIGTERM ends a run as Ctrl-C does, and nothing tears a finalize.

From the moment a results directory exists, SIGTERM is turned into KeyboardInterrupt
(status interrupted, resumable), never the default kill that leaves it `running`;
while the results are written both signals are ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from types import FrameType

# what `signal.signal` installs: a function, SIG_IGN or SIG_DFL
SignalHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers


@contextlib.contextmanager
def signals_handled(handlers: Mapping[int, SignalHandler]) -> Iterator[None]:
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


def interrupt(_sig: int, _frame: FrameType | None) -> None:
    """A signal handler that stops the run as Ctrl-C does."""
    raise KeyboardInterrupt


def sigterm_as_interrupt() -> contextlib.AbstractContextManager[None]:
    """SIGTERM raises KeyboardInterrupt for the block (the runner's own handlers take
    over while it runs)."""
    return signals_handled({signal.SIGTERM: interrupt})
