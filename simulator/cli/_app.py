"""The root click group and the error → exit-code mapping shared by every command."""

from __future__ import annotations

import _thread
import contextlib
import gc
import os
import sys
import threading
from typing import Any

import click

from simulator import __version__
from simulator.errors import EnduranceError
from simulator.util.redact import redact_text


def _deliver_interrupts(unraisable: Any, _default: Any = sys.__unraisablehook__) -> None:
    """`sys.unraisablehook`: a Ctrl-C that lands while a finalizer runs (an event loop's
    `__del__` as a pre-flight's loop is collected) would be printed as "Exception ignored
    in …" with a traceback, and lost. It is handed back to the main thread instead, as if
    the signal had arrived a moment later (from a timer thread: raised here, inside the
    hook, it would be unraisable again); anything else is reported as Python does."""
    exc_type = getattr(unraisable, "exc_type", None)
    if isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt):
        timer = threading.Timer(0.05, _thread.interrupt_main)
        timer.daemon = True
        timer.start()
        return
    _default(unraisable)


# The cyclic collector's thresholds for a command's process. A run holds a large,
# long-lived heap (histories, memoised draws, plans and token ids: 1.6 GB in a fleet
# `size` search) and allocates without pause; at Python's default (700, 10, 10) the
# collector rescanned it 14 times in that search, 8% of its CPU. Fewer, larger young
# collections find the same short-lived cycles (RSS unchanged): 2% (docs/benchmarks.md).
GC_THRESHOLDS = (10_000, 10, 10)


def _stdout_failed(exc: OSError) -> bool:
    """Whether `exc` is standard output failing (a full disk or /dev/full, a closed
    pipe): the write that raised it was to stdout's file descriptor (`click.echo`'s
    stream), or what is still buffered fails to flush again."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    try:
        out = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return True
    for v in (tb.tb_frame.f_locals.values() if tb is not None else ()):
        fileno = getattr(v, "fileno", None)
        with contextlib.suppress(Exception):
            if callable(fileno) and fileno() == out:
                return True
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


class _Group(click.Group):
    """Turns our exceptions into one line on stderr and the right exit code."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, **kwargs)
        except OSError as exc:
            if not _stdout_failed(exc):
                raise
            # what is left in the buffer would fail again at exit, with a traceback
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.stderr.write(f"error: cannot write the output to standard output "
                             f"({exc.strerror or type(exc).__name__})\n")
            sys.exit(1)

    def invoke(self, ctx: click.Context) -> Any:
        sys.unraisablehook = _deliver_interrupts
        gc.set_threshold(*GC_THRESHOLDS)
        try:
            return super().invoke(ctx)
        except EnduranceError as exc:
            # One line, whatever the message quotes (YAML problems span lines).
            line = " ".join(redact_text(str(exc)).split())
            click.echo(f"error: {line}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            # Ctrl-C before a run's own handling (start-up, a pre-flight): one line and
            # 130, as a run interrupted later ends — not click's "Aborted!" and exit 1
            click.echo("error: interrupted", err=True)
            sys.exit(130)
        except click.UsageError as exc:
            # One line naming the bad value, not click's usage block (exit 2 either way).
            sub = exc.ctx.command_path if exc.ctx is not None else "endurance"
            click.echo(f"error: {exc.format_message()} (see `{sub} --help`)", err=True)
            sys.exit(2)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="endurance")
def main() -> None:
    """endurance: agentic endurance simulator for LLM serving endpoints.

    Replays Claude-Code-style sessions (hundreds of turns, tool results, live
    compaction) against an Anthropic Messages or OpenAI Chat Completions endpoint
    (--api openai-chat), or against the built-in
    simulated vLLM engine (the twin) when no --endpoint is given.
    """
